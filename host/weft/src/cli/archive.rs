//! `weft archive list|get|delete|resubmit` and `weft list --archived`:
//! the execution history through the admin API (Argo's `argo archive`).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::cp::AdminClientArgs;
use super::table::table;
use crate::admin::pb;

/// `weft archive ...`.
#[derive(Subcommand, Debug)]
pub enum ArchiveCommand {
    /// Live and archived executions, newest start first, with filters.
    List(ListArgs),
    /// One execution (archived or live) and its events, oldest first.
    Get(Target),
    /// Remove an archived execution from the history.
    Delete(Target),
    /// Create a new Workflow with an archived execution's spec and inputs.
    Resubmit {
        /// Which one.
        #[command(flatten)]
        target: Target,
        /// The new Workflow's name (default: generated from the old one's).
        #[arg(long = "name", value_name = "NAME")]
        new_name: Option<String>,
    },
}

/// Which execution: a name (the live one, else the newest archived), or
/// `--uid`.
#[derive(Args, Debug)]
pub struct Target {
    /// The Workflow's name.
    #[arg(required_unless_present = "uid")]
    pub name: Option<String>,
    /// Exactly this execution (a name may have been used again since).
    #[arg(long)]
    pub uid: Option<String>,
    /// The namespace (default: the kubeconfig context's).
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// Where the admin API is.
    #[command(flatten)]
    pub admin: AdminClientArgs,
}

impl Target {
    fn id(&self) -> pb::ExecutionId {
        pb::ExecutionId {
            namespace: self.namespace.clone(),
            name: self.name.clone().unwrap_or_default(),
            uid: self.uid.clone().unwrap_or_default(),
        }
    }
}

/// The history's filters.
#[derive(Args, Debug, Clone)]
pub struct Filters {
    /// Only this phase (Succeeded, Failed, Aborted, Running, Pending).
    #[arg(long)]
    pub phase: Option<String>,
    /// Only launches of this WorkflowTemplate.
    #[arg(long)]
    pub template: Option<String>,
    /// Only names starting with this.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// Only executions started at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only executions started before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// At most this many (default 100).
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// The token the previous page printed.
    #[arg(long, value_name = "TOKEN")]
    pub page_token: Option<String>,
}

/// `weft archive list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// The namespace (default: the kubeconfig context's).
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only executions with these labels (`key=value,key2!=v,key3,!key4`).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// The history's filters.
    #[command(flatten)]
    pub filters: Filters,
    /// Where the admin API is.
    #[command(flatten)]
    pub admin: AdminClientArgs,
}

/// The request `weft archive list` (and `weft list --archived`) sends.
pub fn request(ns: Option<&str>, selector: Option<&str>, f: &Filters) -> pb::ListExecutionsRequest {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    pb::ListExecutionsRequest {
        namespace: ns.unwrap_or_default().to_string(),
        label_selector: selector.unwrap_or_default().to_string(),
        limit: f.limit,
        page_token: text(&f.page_token),
        include_archived: true,
        phase: text(&f.phase),
        template: text(&f.template),
        name_prefix: text(&f.prefix),
        started_after: text(&f.since),
        started_before: text(&f.until),
    }
}

/// Runs `weft archive ...`.
pub fn run(cmd: ArchiveCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match cmd {
            ArchiveCommand::List(a) => {
                let ns = (!a.all_namespaces).then_some(a.namespace.as_str());
                let req = request(ns, a.selector.as_deref(), &a.filters);
                list(&a.admin, req, a.all_namespaces).await
            }
            ArchiveCommand::Get(t) => {
                let mut client = t.admin.connect().await?;
                let req = pb::GetExecutionRequest { id: Some(t.id()) };
                let e = client
                    .get_execution(req)
                    .await
                    .map_err(status)?
                    .into_inner();
                super::out(&describe(&e))?;
                Ok(ExitCode::SUCCESS)
            }
            ArchiveCommand::Delete(t) => {
                let mut client = t.admin.connect().await?;
                let req = pb::DeleteArchivedExecutionRequest { id: Some(t.id()) };
                let done = client
                    .delete_archived_execution(req)
                    .await
                    .map_err(status)?;
                println!("deleted archived execution {}", done.into_inner().uid);
                Ok(ExitCode::SUCCESS)
            }
            ArchiveCommand::Resubmit { target, new_name } => {
                let mut client = target.admin.connect().await?;
                let req = pb::ResubmitArchivedRequest {
                    id: Some(target.id()),
                    name: new_name.unwrap_or_default(),
                };
                let e = client
                    .resubmit_archived(req)
                    .await
                    .map_err(status)?
                    .into_inner();
                let id = e.id.unwrap_or_default();
                println!("workflow {}/{} created", id.namespace, id.name);
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

/// A gRPC error as the user reads it: its message, and its code.
fn status(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{} ({:?})", s.message(), s.code())
}

/// Lists a page and prints it; the next page's token goes to stderr.
pub async fn list(
    admin: &AdminClientArgs,
    req: pb::ListExecutionsRequest,
    namespaces: bool,
) -> anyhow::Result<ExitCode> {
    let mut client = admin.connect().await?;
    let page = client
        .list_executions(req)
        .await
        .map_err(status)?
        .into_inner();
    if page.executions.is_empty() {
        eprintln!("No executions found.");
        return Ok(ExitCode::SUCCESS);
    }
    super::out(&render(&page.executions, namespaces))?;
    if !page.next_page_token.is_empty() {
        eprintln!("more: --page-token {}", page.next_page_token);
    }
    Ok(ExitCode::SUCCESS)
}

fn render(executions: &[pb::Execution], namespaces: bool) -> String {
    let mut rows = vec![
        [
            "NAMESPACE",
            "NAME",
            "PHASE",
            "STARTED",
            "FINISHED",
            "ARCHIVED",
            "UID",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for e in executions {
        let id = e.id.clone().unwrap_or_default();
        let dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        rows.push(vec![
            id.namespace,
            id.name,
            dash(&e.phase),
            dash(&e.started_at),
            dash(&e.finished_at),
            if e.archived { "yes" } else { "no" }.to_string(),
            e.uid.clone(),
        ]);
    }
    if !namespaces {
        for row in &mut rows {
            row.remove(0);
        }
    }
    table(&rows)
}

/// `weft archive get`: the execution, its nodes, then its events.
fn describe(e: &pb::Execution) -> String {
    let id = e.id.clone().unwrap_or_default();
    let mut out = format!(
        "Name:      {}/{}\nUID:       {}\nPhase:     {}\nArchived:  {}\nStarted:   {}\nFinished:  {}\n",
        id.namespace,
        id.name,
        e.uid,
        e.phase,
        if e.archived { "yes" } else { "no" },
        e.started_at,
        e.finished_at
    );
    if !e.message.is_empty() {
        out.push_str(&format!("Message:   {}\n", e.message));
    }
    if !e.inputs.is_empty() {
        out.push_str(&format!("Inputs:    {}\n", e.inputs));
    }
    if !e.outputs.is_empty() {
        out.push_str(&format!("Outputs:   {}\n", e.outputs));
    }
    let mut nodes = vec![
        [
            "NODE", "PHASE", "ATTEMPTS", "STARTED", "FINISHED", "OUTPUTS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for n in e.nodes.iter().chain(&e.exit_nodes) {
        nodes.push(vec![
            n.id.clone(),
            n.phase.clone(),
            n.attempts.to_string(),
            n.started_at.clone(),
            n.finished_at.clone(),
            n.outputs.clone(),
        ]);
    }
    out.push('\n');
    out.push_str(&table(&nodes));
    if !e.events.is_empty() {
        let mut events = vec![
            ["AT", "KIND", "NODE", "ATTEMPT", "PHASE", "MESSAGE"]
                .map(String::from)
                .to_vec(),
        ];
        for ev in &e.events {
            events.push(vec![
                ev.at.clone(),
                ev.kind.clone(),
                if ev.node_id.is_empty() {
                    "-".into()
                } else {
                    ev.node_id.clone()
                },
                ev.attempt.to_string(),
                ev.phase.clone(),
                ev.message.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&table(&events));
    }
    out
}
