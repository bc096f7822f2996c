//! `weft submit`: create a Workflow from a file or a WorkflowTemplate, with
//! input values typed by their declarations (`argo submit`).
//!
//! Every `-p` value is checked before anything is written: a value of the
//! wrong type, an input that is not declared, one a template fixes and a
//! required input without a value are all refused at once, each naming
//! the input.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use kube::ResourceExt;
use serde_json::{Map, Value};
use weft_dag::inputs::{InputType, Inputs};
use weft_dag::template::TemplateRef;

use crate::api::{Workflow, WorkflowResourceSpec};

use super::run::{self, Manifests};

/// Arguments of `weft submit`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["file", "from"]))]
pub struct SubmitArgs {
    /// A file with one Workflow and any WorkflowTemplates (applied first).
    pub file: Option<PathBuf>,
    /// Launch a WorkflowTemplate of the namespace instead: `template/NAME`.
    #[arg(long, value_name = "template/NAME")]
    pub from: Option<String>,
    /// An input value, typed by the input's declaration (a string as
    /// typed, anything else as JSON: `5`, `true`, `[1, 2]`). Repeatable.
    #[arg(short = 'p', long = "parameter", value_name = "KEY=VALUE")]
    pub parameters: Vec<String>,
    /// An input given as a local file or directory: uploaded through the
    /// admin API's data proxy (as `weft cp PATH -`), and its reference
    /// `{key, digest, size, kind}` is the input's value (a task reads it
    /// with `inputs.artifacts: [{name, path, from: '${inputs.NAME}'}]`).
    /// The input must be declared untyped or `object`. Repeatable.
    #[arg(short = 'a', long = "artifact", value_name = "NAME=PATH")]
    pub artifacts: Vec<String>,
    /// The admin API, for `-a`.
    #[command(flatten)]
    pub admin: super::cp::AdminClientArgs,
    /// Follow the Workflow to its end, as `weft run` does; exits non-zero
    /// unless it succeeds.
    #[arg(short, long)]
    pub watch: bool,
    /// Create the Workflow through the admin API (`--admin`), as the user
    /// of `weft login` or `--token`, instead of with the kubeconfig's
    /// credentials: the admin API's authorization decides (as `argo
    /// submit` with `ARGO_SERVER`). Templates must already be in the
    /// cluster.
    #[arg(long, env = "WEFT_VIA_ADMIN", conflicts_with = "watch")]
    pub via_admin: bool,
    /// With --watch: give up after this long (e.g. 10m).
    #[arg(long, requires = "watch", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// The Workflow's name (instead of a generated one).
    #[arg(long, conflicts_with = "generate_name")]
    pub name: Option<String>,
    /// The prefix of the Workflow's generated name (default: the
    /// template's name and `-` with --from).
    #[arg(long, value_name = "PREFIX")]
    pub generate_name: Option<String>,
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Run `weft submit`.
pub fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    // What needs no cluster is checked before connecting to one.
    let params = parse_params(&args.parameters)?;
    let artifacts = parse_artifacts(&args.artifacts)?;
    let from = args.from.as_deref().map(template_name).transpose()?;
    let manifests = args.file.as_deref().map(run::read_manifests).transpose()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = match args.via_admin {
            true => None,
            false => Some(args.cluster.client().await?),
        };
        let ns = &args.cluster.namespace;
        let (mut wf, to_apply) = match (manifests, from) {
            (
                Some(Manifests {
                    workflow,
                    templates,
                }),
                _,
            ) => (workflow, templates),
            (None, Some(name)) => {
                let mut wf = Workflow::new("", WorkflowResourceSpec::default());
                wf.metadata.name = None;
                wf.metadata.generate_name = Some(format!("{name}-"));
                wf.spec.spec.workflow_template_ref = Some(TemplateRef {
                    name: name.to_string(),
                    inputs: Map::new(),
                });
                (wf, Vec::new())
            }
            (None, None) => unreachable!("clap requires FILE or --from"),
        };
        let spec = &mut wf.spec.spec;
        let (decls, fixed, source, given) = match &spec.workflow_template_ref {
            Some(launch) => {
                // The file's own version of the template is what runs.
                let template = match to_apply.iter().find(|t| t.name_any() == launch.name) {
                    Some(t) => t.clone(),
                    None => match &client {
                        Some(c) => super::template::get_template(c, ns, &launch.name).await?,
                        None => bail!(
                            "--via-admin: template {} must be in the file to check the inputs; the admin API does not serve templates",
                            launch.name
                        ),
                    },
                };
                let t = template.spec.spec;
                let source = format!("template {}", launch.name);
                (
                    t.workflow.inputs,
                    t.fixed_inputs,
                    source,
                    launch.inputs.clone(),
                )
            }
            None => {
                let file = args.file.as_deref().unwrap_or_else(|| "?".as_ref());
                let source = format!("the workflow in {}", file.display());
                (spec.inputs.clone(), Map::new(), source, Map::new())
            }
        };
        check_artifacts(&artifacts, &params, &decls, &fixed, &source)?;
        // An input an -a gives has a value (once uploaded).
        let mut given_all = given;
        given_all.extend(artifacts.iter().map(|(k, _)| (k.clone(), Value::Null)));
        let mut values = bind(&params, &decls, &fixed, &source, &given_all)?;
        values.extend(upload_inputs(&args.admin, ns, &artifacts).await?);
        match &mut spec.workflow_template_ref {
            Some(launch) => launch.inputs.extend(values),
            None => {
                for (name, value) in values {
                    let decl = spec.inputs[&name].with_default(value);
                    spec.inputs.insert(name, decl);
                }
            }
        }
        if let Some(name) = &args.name {
            wf.metadata.name = Some(name.clone());
            wf.metadata.generate_name = None;
        }
        if let Some(prefix) = &args.generate_name {
            wf.metadata.name = None;
            wf.metadata.generate_name = Some(prefix.clone());
        }
        let Some(client) = client else {
            let name = via_admin::create(&args.admin, ns, &wf, &to_apply).await?;
            println!("workflow.weft.dev/{name} created");
            return Ok(ExitCode::SUCCESS);
        };
        run::apply_templates(&client, ns, &to_apply).await?;
        let created = run::create(&client, ns, wf).await?;
        println!("workflow.weft.dev/{} created", created.name_any());
        match args.watch {
            true => run::follow(&client, ns, &created, args.timeout).await,
            false => Ok(ExitCode::SUCCESS),
        }
    })
}

/// One `-p KEY=VALUE` as given, split at its first `=`.
#[derive(Debug, Clone, PartialEq)]
struct Param {
    /// The argument as typed, for messages.
    arg: String,
    key: String,
    raw: String,
}

/// Splits every `-p`; an argument without `=` or with an empty key is
/// refused.
fn parse_params(args: &[String]) -> anyhow::Result<Vec<Param>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for arg in args {
        match arg.split_once('=') {
            Some((key, raw)) if !key.is_empty() => out.push(Param {
                arg: arg.clone(),
                key: key.to_string(),
                raw: raw.to_string(),
            }),
            _ => problems.push(format!("-p {arg}: expected KEY=VALUE")),
        }
    }
    match problems.is_empty() {
        true => Ok(out),
        false => bail!("{}", problems.join("\n")),
    }
}

/// Splits every `-a NAME=PATH`; the path must exist (checked before
/// anything is uploaded or created).
fn parse_artifacts(args: &[String]) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for arg in args {
        match arg.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => {
                match std::fs::metadata(path) {
                    Ok(_) => out.push((name.to_string(), PathBuf::from(path))),
                    Err(e) => problems.push(format!("-a {arg}: {path}: {e}")),
                }
            }
            _ => problems.push(format!("-a {arg}: expected NAME=PATH")),
        }
    }
    match problems.is_empty() {
        true => Ok(out),
        false => bail!("{}", problems.join("\n")),
    }
}

/// Each `-a` names a declared input that takes an artifact reference (an
/// object, or anything), that nothing fixes and no `-p` sets too.
fn check_artifacts(
    artifacts: &[(String, PathBuf)],
    params: &[Param],
    decls: &Inputs,
    fixed: &Map<String, Value>,
    source: &str,
) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for (name, path) in artifacts {
        let arg = format!("-a {name}={}", path.display());
        let problem = match (
            decls.get(name),
            decls.get(name).and_then(|d| d.input_type()),
        ) {
            _ if fixed.contains_key(name) => format!("{arg}: input {name} is fixed by {source}"),
            _ if params.iter().any(|p| &p.key == name) => {
                format!("{arg}: input {name} is also given with -p")
            }
            (None, _) => format!("{arg}: {source} has no input {name}"),
            (Some(_), Some(t)) if t != InputType::Object => format!(
                "{arg}: input {name} is {}; an artifact reference is an object (declare it `type: object` or untyped)",
                a(t)
            ),
            _ => continue,
        };
        problems.push(problem);
    }
    match problems.is_empty() {
        true => Ok(()),
        false => bail!("{}", problems.join("\n")),
    }
}

/// Uploads each `-a` through the admin API; the inputs' values are their
/// references.
async fn upload_inputs(
    admin: &super::cp::AdminClientArgs,
    namespace: &str,
    artifacts: &[(String, PathBuf)],
) -> anyhow::Result<Map<String, Value>> {
    let mut values = Map::new();
    if artifacts.is_empty() {
        return Ok(values);
    }
    let mut client = admin.connect().await?;
    for (name, path) in artifacts {
        let r = super::cp::upload(&mut client, namespace, path, None)
            .await
            .with_context(|| format!("-a {name}={}", path.display()))?;
        eprintln!(
            "input {name}: uploaded {} as {} ({} bytes, {})",
            path.display(),
            r.key,
            r.size,
            r.digest
        );
        values.insert(name.clone(), serde_json::to_value(r)?);
    }
    Ok(values)
}

/// The template name of `--from template/NAME`.
fn template_name(from: &str) -> anyhow::Result<&str> {
    match from.split_once('/') {
        Some(("template" | "workflowtemplate", name))
            if !name.is_empty() && !name.contains('/') =>
        {
            Ok(name)
        }
        _ => bail!("--from {from}: expected template/NAME"),
    }
}

/// "a string", "an integer".
fn a(t: InputType) -> String {
    match t {
        InputType::Integer | InputType::Object => format!("an {t}"),
        t => format!("a {t}"),
    }
}

/// Types each `-p` by `decls` (the inputs of `source`, e.g. `template
/// etl`), refusing inputs that are not declared or that `fixed` holds;
/// then checks that every required input has a value (from `given`, the
/// values the file already gives, a `-p`, a default or `fixed`). Every
/// problem at once.
fn bind(
    params: &[Param],
    decls: &Inputs,
    fixed: &Map<String, Value>,
    source: &str,
    given: &Map<String, Value>,
) -> anyhow::Result<Map<String, Value>> {
    let mut values = Map::new();
    let mut problems = Vec::new();
    for Param { arg, key, raw } in params {
        if let Some(to) = fixed.get(key) {
            problems.push(format!(
                "-p {arg}: input {key} is fixed by {source} to {to}; it cannot be set"
            ));
            continue;
        }
        let Some(decl) = decls.get(key) else {
            let declared = match decls.is_empty() {
                true => "none".to_string(),
                false => decls.keys().cloned().collect::<Vec<_>>().join(", "),
            };
            problems.push(format!(
                "-p {arg}: {source} has no input {key} (it declares: {declared})"
            ));
            continue;
        };
        let value = match decl.input_type() {
            Some(t) => t
                .parse_arg(raw)
                .map_err(|e| format!("-p {arg}: input {key} is {}: {e}", a(t))),
            // An input declared by a bare null takes anything: JSON when
            // it reads as JSON, else the string.
            None => Ok(serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))),
        };
        match value {
            Ok(v) => {
                values.insert(key.clone(), v);
            }
            Err(e) => problems.push(e),
        }
    }
    for (name, decl) in decls {
        let has_value = values.contains_key(name)
            || given.contains_key(name)
            || fixed.contains_key(name)
            || decl.default_value().is_some();
        if decl.required() && !has_value && !params.iter().any(|p| &p.key == name) {
            let ty = decl.input_type().map_or("any".into(), |t| t.to_string());
            problems.push(format!(
                "{source}: input {name} ({ty}) is required: give it with -p {name}=VALUE"
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(values),
        false => bail!("{}", problems.join("\n")),
    }
}

mod via_admin;

#[cfg(test)]
mod tests;
