//! `weft template list|get`: the WorkflowTemplates of a namespace, and what
//! one asks of a launch (its inputs, with types, defaults and fixed values).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use kube::{Api, Client, ResourceExt, api::ListParams};
use serde_json::Value;

use super::list::{created, human_duration, table};
use crate::api::WorkflowTemplate;

/// `weft template ...`.
#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// The templates of a namespace: inputs, nodes, age.
    List(ListArgs),
    /// What a template asks of a launch: inputs (type, default, fixed
    /// value), outputs and nodes; or the object as YAML or JSON.
    Get(GetArgs),
}

/// Arguments of `weft template list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Output formats of `weft template get`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GetFormat {
    /// The WorkflowTemplate as YAML.
    Yaml,
    /// The WorkflowTemplate as JSON.
    Json,
}

/// Arguments of `weft template get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The template's name.
    pub name: String,
    /// Print the object instead of the description.
    #[arg(short, long, value_enum)]
    pub output: Option<GetFormat>,
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Run `weft template ...`.
pub fn run(cmd: TemplateCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let out = match cmd {
            TemplateCommand::List(args) => {
                let client = args.cluster.client().await?;
                let ns = &args.cluster.namespace;
                let api: Api<WorkflowTemplate> = Api::namespaced(client, ns);
                let templates = api.list(&ListParams::default()).await?.items;
                if templates.is_empty() {
                    eprintln!("No workflow templates found in namespace {ns}.");
                    return Ok(ExitCode::SUCCESS);
                }
                render_list(templates, SystemTime::now())
            }
            TemplateCommand::Get(args) => {
                let client = args.cluster.client().await?;
                let mut t = get_template(&client, &args.cluster.namespace, &args.name).await?;
                // As kubectl, without the server's bookkeeping.
                t.metadata.managed_fields = None;
                match args.output {
                    Some(GetFormat::Yaml) => serde_yaml::to_string(&t)?,
                    Some(GetFormat::Json) => serde_json::to_string_pretty(&t)?,
                    None => describe(&t, SystemTime::now()),
                }
            }
        };
        super::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The template `name` of `namespace`; an error naming it when there is
/// none.
pub async fn get_template(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<WorkflowTemplate> {
    let api: Api<WorkflowTemplate> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .with_context(|| format!("reading WorkflowTemplate {name}"))?
        .with_context(|| format!("template {name} not found in namespace {namespace}"))
}

fn render_list(mut templates: Vec<WorkflowTemplate>, now: SystemTime) -> String {
    templates.sort_by_key(|t| t.name_any());
    let mut rows = vec![
        ["NAME", "INPUTS", "NODES", "AGE"]
            .map(String::from)
            .to_vec(),
    ];
    for t in &templates {
        let age = created(t).map(|c| human_duration(now.duration_since(c).unwrap_or_default()));
        rows.push(vec![
            t.name_any(),
            t.spec.spec.workflow.inputs.len().to_string(),
            t.spec.spec.workflow.nodes.len().to_string(),
            age.unwrap_or_else(|| "-".into()),
        ]);
    }
    table(&rows)
}

/// A value as a launch would give it (JSON).
fn shown(v: &Value) -> String {
    v.to_string()
}

/// Rows indented under a heading.
fn section(out: &mut String, heading: &str, rows: &[Vec<String>]) {
    let _ = writeln!(out, "\n{heading}:");
    for line in table(rows).lines() {
        let _ = writeln!(out, "  {line}");
    }
}

/// `weft template get NAME`: a description in `kubectl describe`'s manner.
fn describe(t: &WorkflowTemplate, now: SystemTime) -> String {
    let name = t.name_any();
    let spec = &t.spec.spec;
    let wf = &spec.workflow;
    let mut out = String::new();
    let _ = writeln!(out, "Name:        {name}");
    let _ = writeln!(out, "Namespace:   {}", t.namespace().unwrap_or_default());
    if let Some(c) = created(t) {
        let age = human_duration(now.duration_since(c).unwrap_or_default());
        let _ = writeln!(
            out,
            "Created:     {} ({age} ago)",
            humantime::format_rfc3339_seconds(c)
        );
    }
    if let Some(p) = wf.parallelism {
        let _ = writeln!(out, "Parallelism: {p}");
    }
    if let Some(d) = &wf.active_deadline {
        let _ = writeln!(out, "Deadline:    {d}");
    }

    if wf.inputs.is_empty() {
        out.push_str("\nInputs: none\n");
    } else {
        let mut rows = vec![
            ["NAME", "TYPE", "DEFAULT", "FIXED", "DESCRIPTION"]
                .map(String::from)
                .to_vec(),
        ];
        for (input, decl) in &wf.inputs {
            let fixed = spec.fixed_inputs.get(input);
            let default = match (decl.default_value(), fixed) {
                (Some(v), _) => shown(v),
                (None, None) if decl.required() => "required".into(),
                _ => "-".into(),
            };
            let description = match decl {
                weft_dag::inputs::InputSpec::Declared(d) => d.description.clone(),
                weft_dag::inputs::InputSpec::Value(_) => None,
            };
            rows.push(vec![
                input.clone(),
                decl.input_type().map_or("any".into(), |t| t.to_string()),
                default,
                fixed.map_or("-".into(), shown),
                description.unwrap_or_default(),
            ]);
        }
        section(&mut out, "Inputs", &rows);
    }

    if !wf.outputs.is_empty() {
        let rows: Vec<Vec<String>> = wf
            .outputs
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                vec![k.clone(), v]
            })
            .collect();
        section(&mut out, "Outputs", &rows);
    }

    let mut rows = vec![["ID", "KIND", "DEPENDS ON"].map(String::from).to_vec()];
    for n in &wf.nodes {
        let deps = match n.depends_on.is_empty() {
            true => "-".into(),
            false => n.depends_on.join(", "),
        };
        rows.push(vec![n.id.clone(), crate::render::kind(n), deps]);
    }
    section(&mut out, "Nodes", &rows);

    let mut launch = format!("\nLaunch: weft submit --from template/{name}");
    for (input, decl) in &wf.inputs {
        if decl.required() && !spec.fixed_inputs.contains_key(input) {
            let _ = write!(launch, " -p {input}=VALUE");
        }
    }
    out.push_str(&launch);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests;
