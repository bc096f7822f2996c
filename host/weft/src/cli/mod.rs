//! Command-line interface.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::actions::Action;
use crate::telemetry::LogFormat;

pub mod actions;
pub mod archive;
pub mod artifacts;
pub mod cache;
pub mod config;
pub mod controller;
pub mod cp;
pub mod cron;
pub mod dev;
pub mod history;
pub mod io;
pub mod list;
pub mod login;
pub mod logs;
pub mod node;
pub mod plugin;
pub mod rbac;
pub mod run;
pub mod scaffold;
pub mod submit;
pub mod sync;
pub mod table;
pub mod template;
pub mod webhook;

/// Weft: a Kubernetes workflow executor with WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about)]
pub struct Cli {
    /// More log output (-v, -vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Export OpenTelemetry traces (reconcile, node, plugin call, apply,
    /// status patch) to this OTLP gRPC endpoint, e.g. http://collector:4317.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    pub otlp_endpoint: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and test plugin components: the plugin author's harness.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Run a workflow end to end on the embedded dev cluster, showing its progress.
    Run(run::RunArgs),
    /// The dev cluster, controller, hot loading and admin API, until Ctrl-C.
    Dev(dev::DevArgs),
    /// Run the controller against a cluster (kubeconfig or in-cluster).
    #[command(args_override_self = true)]
    Controller(Box<controller::ControllerArgs>),
    /// Run the pods an API server's scheduler binds to this machine as
    /// local processes (a node agent, as virtual-kubelet).
    Node(node::NodeArgs),
    /// The admission webhook alone (validation and task secrets), with its
    /// managed certificate.
    Webhook(Box<webhook::WebhookCommand>),
    /// Show a Workflow, or its DAG as dot or Mermaid with node phases.
    Get(controller::GetArgs),
    /// Create a Workflow from a file or a WorkflowTemplate, with input
    /// values (-p), and optionally follow it to the end.
    Submit(submit::SubmitArgs),
    /// List Workflows: phase, progress, age and duration.
    List(list::ListArgs),
    /// List and describe WorkflowTemplates.
    #[command(subcommand)]
    Template(template::TemplateCommand),
    /// CronWorkflows: list, suspend, resume, trigger (as `argo cron`).
    #[command(subcommand)]
    Cron(cron::CronCommand),
    /// The logs of a Workflow's task pods, each line prefixed with its
    /// node (as `argo logs`); -f follows them to the Workflow's end.
    Logs(logs::LogsArgs),
    /// The task output cache: list, get and delete entries.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Mutexes, semaphores and parallelism limits: who holds, who waits.
    #[command(subcommand)]
    Sync(sync::SyncCommand),
    /// Run a Failed or Aborted Workflow again from its failed and skipped
    /// nodes, keeping what succeeded (`--node` to restart from a node).
    Retry(actions::RetryArgs),
    /// Create a new Workflow with the same spec and inputs.
    Resubmit(actions::ResubmitArgs),
    /// Start no new node of a Workflow; running nodes finish.
    Suspend(actions::Target),
    /// Let a suspended Workflow start nodes again.
    Resume(actions::Target),
    /// Abort a Workflow's running nodes, then run its exit handlers.
    Stop(actions::Target),
    /// Abort a Workflow's running nodes; no exit handler runs.
    Terminate(actions::Target),
    /// Approve a Workflow's approval gate: the nodes after it may run.
    Approve(actions::GateArgs),
    /// Reject a Workflow's approval gate: it fails with the reason.
    Reject(actions::RejectArgs),
    /// Download a node's artifact (`WORKFLOW/NODE/ARTIFACT DEST`) or
    /// upload a workflow input (`PATH -`, printing its reference) through
    /// the admin API's data proxy.
    Cp(cp::CpArgs),
    /// Sign in to the admin API's identity provider (single sign-on): a
    /// link to open, or `--device` for a code to enter elsewhere. Later
    /// commands that talk to that admin API send the token.
    Login(login::LoginArgs),
    /// Forget the sign-in to an admin API.
    Logout(login::LogoutArgs),
    /// A task pod's side of the data plane: stage inputs (`init`), run
    /// the command and upload outputs (`exec`), or move one artifact
    /// (`get`, `put`), with presigned URLs only (no store credentials).
    #[command(subcommand)]
    Io(io::IoCommand),
    /// The execution history database: `migrate` its schema (as
    /// flyteadmin's `migrate run`), or print its `version`.
    #[command(subcommand)]
    Db(history::DbCommand),
    /// The execution history through the admin API: `list` live and
    /// archived executions with filters, `get` one with its events,
    /// `delete` an archived one, `resubmit` one (as `argo archive`).
    #[command(subcommand)]
    Archive(archive::ArchiveCommand),
    /// Print one of Weft's CRDs (YAML), generated from the Rust types.
    Crd {
        /// `workflow`, `workflowtemplate` or `cronworkflow`.
        #[arg(default_value = "workflow")]
        kind: String,
    },
}

/// Writes a command's result to stdout. A closed pipe (`weft ... | head`)
/// is not an error: the reader has what it wanted.
pub fn out(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{}", text.trim_end()).and_then(|_| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Where the commands that talk to a cluster (`get`, `submit`, `list`,
/// `template`) connect, as `weft get` always has.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// The namespace (default: the kubeconfig context's, as kubectl's).
    #[arg(short, long, default_value_t = context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
}

impl ClusterArgs {
    /// A client for `--server`, else the kubeconfig (or in-cluster config).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        match &self.server {
            Some(url) => crate::runtime::client_for(url),
            None => Ok(kube::Client::try_default().await?),
        }
    }
}

/// The namespace a command uses without `-n`: the current kubeconfig
/// context's, as kubectl and the argo CLI take it (a user who ran
/// `kubectl config set-context --current --namespace=team-a` means team-a);
/// in a pod, the pod's own; else `default`.
///
/// Read once: clap evaluates the default for every subcommand's `-n` when
/// it builds the command line, and the kubeconfig does not change meanwhile.
pub fn context_namespace() -> String {
    static NAMESPACE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAMESPACE.get_or_init(read_context_namespace).clone()
}

fn read_context_namespace() -> String {
    let from_kubeconfig = kube::config::Kubeconfig::read().ok().and_then(|kc| {
        let current = kc.current_context?;
        kc.contexts
            .into_iter()
            .find(|c| c.name == current)?
            .context?
            .namespace
    });
    from_kubeconfig
        .or_else(|| {
            let file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
            std::fs::read_to_string(file).ok()
        })
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plugin(cmd) => plugin::run(cmd),
        Command::Run(args) => run::run(args),
        Command::Dev(args) => dev::dev(args),
        Command::Controller(args) => controller::controller(*args),
        Command::Webhook(args) => webhook::webhook(*args),
        Command::Node(args) => node::node(args),
        Command::Get(args) => controller::get(args),
        Command::Submit(args) => submit::submit(args),
        Command::List(args) => list::list(args),
        Command::Template(cmd) => template::run(cmd),
        Command::Cron(cmd) => cron::run(cmd),
        Command::Logs(args) => logs::logs(args),
        Command::Cache(cmd) => cache::run(cmd),
        Command::Sync(cmd) => sync::run(cmd),
        Command::Io(cmd) => io::run(cmd),
        Command::Db(cmd) => history::run(cmd),
        Command::Archive(cmd) => archive::run(cmd),
        Command::Cp(args) => cp::cp(args),
        Command::Login(args) => login::login(args),
        Command::Logout(args) => login::logout(args),
        Command::Retry(a) => actions::run(a.target, Action::Retry { node: a.node }),
        Command::Resubmit(a) => actions::run(
            a.target,
            Action::Resubmit {
                memoized: a.memoized,
            },
        ),
        Command::Suspend(t) => actions::run(t, Action::Suspend),
        Command::Resume(t) => actions::run(t, Action::Resume),
        Command::Stop(t) => actions::run(t, Action::Stop),
        Command::Terminate(t) => actions::run(t, Action::Terminate),
        Command::Approve(a) => actions::run(a.target, Action::Approve { node: a.node }),
        Command::Reject(a) => actions::run(
            a.gate.target,
            Action::Reject {
                node: a.gate.node,
                reason: a.reason,
            },
        ),
        Command::Crd { kind } => {
            let file = format!("{}.yaml", kind.to_lowercase());
            let Some((_, crd)) = crate::api::crds().into_iter().find(|(f, _)| *f == file) else {
                let kinds: Vec<&str> = crate::api::crds()
                    .into_iter()
                    .map(|(f, _)| f.trim_end_matches(".yaml"))
                    .collect();
                anyhow::bail!("no CRD {kind:?}: one of {}", kinds.join(", "));
            };
            out(&crate::api::yaml_of(&crd))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every subcommand's arguments, checked as clap checks them when that
    /// subcommand is first used (two arguments named alike, a bad default):
    /// a mistake fails here, not in a user's first call.
    #[test]
    fn every_subcommand_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
