//! `weft run FILE`: the one-command experience. Starts the embedded dev
//! cluster (or uses `--server`), installs the CRD, loads the plugins,
//! starts the controller, submits the workflow and follows it to the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{LogParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use weft_dag::{NodePhase, WorkflowPhase};

use serde::Deserialize as _;

use crate::api::{CronWorkflow, Workflow, WorkflowTemplate};
use crate::runtime;

/// Arguments of `weft run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The Workflow (YAML).
    pub file: PathBuf,
    /// Use this API server instead of starting the embedded dev cluster.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Where the dev cluster keeps its data.
    #[arg(long, default_value = ".weft/dev")]
    pub data_dir: PathBuf,
    /// Plugin directory (components with their manifests).
    #[arg(long, default_value = "target/plugins")]
    pub plugins: PathBuf,
    /// The operator's plugin registry settings (YAML): `enabled`,
    /// `defaultForTaskTypes`, `middlewareOrder`, and `plugins.NAME.config`
    /// overrides (which may name Secrets). See docs/hotload.md.
    #[arg(long, value_name = "FILE", env = "WEFT_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// Namespace to run in.
    #[arg(short, long, default_value = "default")]
    pub namespace: String,
    /// Give up after this long (e.g. 10m).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Also hot-load plugins from ConfigMaps labelled `weft.dev/plugin` in
    /// the namespace (push them with `weft plugin push --server URL`).
    #[arg(long)]
    pub hotload: bool,
    /// Also serve the admin API (gRPC) during the run, and keep serving
    /// after it until Ctrl-C.
    #[arg(long)]
    pub serve: bool,
    /// The admin API (with --serve).
    #[command(flatten)]
    pub admin: super::dev::AdminArgs,
    /// The admission webhook (on the embedded dev cluster only).
    #[command(flatten)]
    pub webhook: super::dev::DevWebhookArgs,
    /// Where tasks' artifacts go (default: `artifacts/` of the data dir).
    #[command(flatten)]
    pub artifacts: super::artifacts::ArtifactArgs,
    /// Where execution history goes (default: `history.db` of the data dir).
    #[command(flatten)]
    pub history: super::history::HistoryArgs,
}

/// What `weft run` reads from a file: one Workflow, and the
/// WorkflowTemplates it may launch (applied before it is submitted).
#[derive(Debug)]
pub struct Manifests {
    /// The Workflow.
    pub workflow: Workflow,
    /// Templates in the same file.
    pub templates: Vec<WorkflowTemplate>,
}

/// Reads a file of YAML documents: exactly one Workflow (named after the
/// file when it has no name) and any number of WorkflowTemplates.
pub fn read_manifests(path: &Path) -> anyhow::Result<Manifests> {
    let mut workflows = Vec::new();
    let mut templates = Vec::new();
    for doc in documents(path)? {
        match doc.kind.as_str() {
            "Workflow" => workflows.push(doc.decode()?),
            "WorkflowTemplate" => templates.push(doc.decode()?),
            _ => bail!("{}: expected Workflows and WorkflowTemplates", doc.at),
        }
    }
    let mut wf = match <[Workflow; 1]>::try_from(workflows) {
        Ok([wf]) => wf,
        Err(found) => bail!(
            "{}: needs exactly one Workflow, found {}",
            path.display(),
            found.len()
        ),
    };
    if wf.metadata.name.is_none() && wf.metadata.generate_name.is_none() {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("workflow");
        wf.metadata.generate_name = Some(format!("{stem}-"));
    }
    Ok(Manifests {
        workflow: wf,
        templates,
    })
}

/// One YAML document of a file.
pub struct Document {
    /// `FILE: document N (KIND)`, for messages.
    pub at: String,
    /// Its kind.
    pub kind: String,
    value: serde_json::Value,
}

impl Document {
    /// The document as a `T`, or which field is wrong.
    pub fn decode<T: serde::de::DeserializeOwned>(self) -> anyhow::Result<T> {
        serde_path_to_error::deserialize(self.value)
            .map_err(|e| anyhow::anyhow!("{}: {}: {}", self.at, e.path(), e.inner()))
    }
}

/// The YAML documents of a file (empty ones skipped).
pub fn documents(path: &Path) -> anyhow::Result<Vec<Document>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = serde_json::Value::deserialize(doc)
            .with_context(|| format!("{}: document {}: not YAML", path.display(), i + 1))?;
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let at = format!("{}: document {} ({kind})", path.display(), i + 1);
        out.push(Document { at, kind, value });
    }
    Ok(out)
}

/// A file of CronWorkflows (and the templates they launch), with no
/// Workflow: `weft run` applies them and follows the first Workflow the
/// first one launches. `None` when the file holds no CronWorkflow.
pub fn read_crons(
    path: &Path,
) -> anyhow::Result<Option<(Vec<WorkflowTemplate>, Vec<CronWorkflow>)>> {
    let docs = documents(path)?;
    if !docs.iter().any(|d| d.kind == "CronWorkflow") {
        return Ok(None);
    }
    let (mut templates, mut crons) = (Vec::new(), Vec::new());
    for doc in docs {
        match doc.kind.as_str() {
            "CronWorkflow" => crons.push(doc.decode()?),
            "WorkflowTemplate" => templates.push(doc.decode()?),
            _ => bail!(
                "{}: a file with CronWorkflows holds only them and WorkflowTemplates",
                doc.at
            ),
        }
    }
    Ok(Some((templates, crons)))
}

/// Applies CronWorkflows, then waits for the first Workflow the first one
/// launches and follows it.
async fn run_crons(
    client: &Client,
    namespace: &str,
    crons: &[CronWorkflow],
    timeout: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let api: Api<CronWorkflow> = Api::namespaced(client.clone(), namespace);
    for c in crons {
        let name = c.name_any();
        api.patch(&name, &PatchParams::apply("weft").force(), &Patch::Apply(c))
            .await
            .with_context(|| format!("applying CronWorkflow {name}"))?;
        println!("cronworkflow {name} applied ({})", c.spec.spec.schedule);
    }
    let first = crons[0].name_any();
    println!("waiting for the first Workflow of cronworkflow {first}");
    let workflows: Api<Workflow> = Api::namespaced(client.clone(), namespace);
    let lp = kube::api::ListParams::default()
        .labels(&format!("{}={first}", crate::controller::cron::LABEL));
    let deadline = Instant::now() + timeout.unwrap_or(Duration::from_secs(3600));
    let launched = loop {
        let mut found = workflows.list(&lp).await?.items;
        found.sort_by_key(|w| w.metadata.creation_timestamp.clone().map(|t| t.0));
        if let Some(wf) = found.into_iter().next() {
            break wf;
        }
        if Instant::now() > deadline {
            bail!("cronworkflow {first} launched no Workflow in time");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    follow(client, namespace, &launched, timeout).await
}

/// Creates or updates templates (server-side apply), as `kubectl apply`.
pub async fn apply_templates(
    client: &Client,
    namespace: &str,
    templates: &[WorkflowTemplate],
) -> anyhow::Result<()> {
    let api: Api<WorkflowTemplate> = Api::namespaced(client.clone(), namespace);
    for t in templates {
        let name = t.name_any();
        api.patch(&name, &PatchParams::apply("weft").force(), &Patch::Apply(t))
            .await
            .with_context(|| format!("applying WorkflowTemplate {name}"))?;
        println!("workflowtemplate {name} applied");
    }
    Ok(())
}

/// Run `weft run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // A Workflow to submit, or CronWorkflows whose first launch to follow.
    let (templates, job) = match read_crons(&args.file)? {
        Some((templates, crons)) => (templates, Err(crons)),
        None => {
            let m = read_manifests(&args.file)?;
            (m.templates, Ok(m.workflow))
        }
    };
    let admin_config = args.serve.then(|| args.admin.config(true)).transpose()?;
    let registry_config = runtime::registry_config(args.registry_config.as_deref())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let (client, cluster) = match &args.server {
            Some(url) => (runtime::client_for(url)?, None),
            None => {
                let cluster = crate::dev::start(&args.data_dir).await?;
                println!(
                    "dev cluster at {} (kubectl --kubeconfig {})",
                    cluster.base_url(),
                    args.data_dir.join("kubeconfig").display()
                );
                (runtime::client_for(&cluster.base_url())?, Some(cluster))
            }
        };
        let (engine, registry) = runtime::load_plugins_with(
            &args.plugins,
            Some(&runtime::cache_dir(&args.data_dir)),
            registry_config,
            runtime::PluginSizing::weft(),
        )?;
        if registry.snapshot().task_types().next().is_none() && !args.hotload {
            bail!(
                "no plugins in {}: build them with `make guests`",
                args.plugins.display()
            );
        }
        runtime::install_crd(&client).await?;
        if cluster.is_some() {
            let webhook = super::dev::DevWebhookArgs {
                // Plugins hot-loaded during the run may serve types not
                // loaded yet.
                allow_unknown_task_types: args.webhook.allow_unknown_task_types || args.hotload,
                ..args.webhook.clone()
            };
            webhook.start(&client, registry.clone()).await?;
        }
        let artifacts = args
            .artifacts
            .open(&client, &args.namespace, Some(&args.data_dir))
            .await?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (open, synced) = runtime::after_sync();
        let (ctx, controller) = runtime::spawn_controller_after(
            client.clone(),
            registry.clone(),
            None,
            synced,
            async {
                let _ = stop_rx.await;
            },
        );
        // Before the controller's start gate opens: no round runs without it.
        if let Some(io) = &artifacts {
            ctx.set_artifacts(io.clone());
        }
        let history = args
            .history
            .open(ctx.metrics.clone(), Some(&args.data_dir))?;
        if let Some(h) = &history {
            ctx.set_history(h.clone());
        }
        let loader = args.hotload.then(|| {
            let config = crate::hotload::HotloadConfig {
                namespaces: vec![args.namespace.clone()],
                workflow_namespace: Some(args.namespace.clone()),
                workflows: Some(ctx.live.clone()),
                ..Default::default()
            };
            runtime::spawn_hotload(
                client.clone(),
                engine,
                registry.clone(),
                ctx.metrics.clone(),
                config,
                futures::future::pending(),
            )
        });
        open(loader.as_ref().map(|(l, _)| l.clone()));
        if let Some((l, _)) = &loader {
            l.synced().await;
        }
        let loader = loader.map(|(_, task)| task);
        let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
        let server = match &admin_config {
            Some(config) => {
                let server = crate::admin::serve_with(
                    config,
                    client.clone(),
                    registry.clone(),
                    ctx.metrics.clone(),
                    crate::admin::Planes {
                        artifacts: artifacts.clone(),
                        history: history.clone(),
                    },
                    async {
                        let _ = admin_stopped.await;
                    },
                )
                .await?;
                println!("admin API at {}", server.addr);
                println!("console at {}", server.console_url());
                Some(server)
            }
            None => None,
        };
        apply_templates(&client, &args.namespace, &templates).await?;
        let code = match job {
            Ok(wf) => submit_and_follow(&client, &args.namespace, wf, args.timeout).await,
            Err(crons) => run_crons(&client, &args.namespace, &crons, args.timeout).await,
        };
        if let Some(server) = server {
            println!("admin API at {} until Ctrl-C", server.addr);
            super::dev::shutdown_signal().await;
            let _ = stop_admin.send(());
            let _ = server.task.await;
        }
        let _ = stop_tx.send(());
        if let Some(l) = loader {
            l.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
        if let Some(cluster) = cluster {
            cluster.shutdown().await;
        }
        code
    })
}

/// Creates the Workflow and shows its progress until it ends.
pub async fn submit_and_follow(
    client: &Client,
    namespace: &str,
    wf: Workflow,
    timeout: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let created = create(client, namespace, wf).await?;
    follow(client, namespace, &created, timeout).await
}

/// Creates the Workflow in `namespace`.
pub async fn create(
    client: &Client,
    namespace: &str,
    mut wf: Workflow,
) -> anyhow::Result<Workflow> {
    wf.metadata.namespace = Some(namespace.to_string());
    let api: Api<Workflow> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), &wf)
        .await
        .context("creating the Workflow")
}

/// Shows a created Workflow's progress until it ends, then its outputs
/// (or, when it did not succeed, its message and its failed pods' last
/// log lines): success when it succeeded.
pub async fn follow(
    client: &Client,
    namespace: &str,
    created: &Workflow,
    timeout: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let api: Api<Workflow> = Api::namespaced(client.clone(), namespace);
    let name = created.name_any();
    let total = created.spec.spec.nodes.len() as u64;
    match &created.spec.spec.workflow_template_ref {
        // A launch has no nodes of its own: the bar learns its length
        // from the resolved spec.
        Some(t) if total == 0 => println!("workflow {namespace}/{name}: template {}", t.name),
        _ => println!("workflow {namespace}/{name}: {total} nodes"),
    }

    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    let started = Instant::now();
    let mut seen: BTreeMap<String, NodePhase> = BTreeMap::new();
    let mut events = watcher::watch_object(api.clone(), &name).boxed();
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let last = loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, events.next()).await {
                Ok(n) => n,
                Err(_) => {
                    bar.abandon();
                    bail!(
                        "workflow {name} did not finish within {}",
                        humantime::format_duration(timeout.unwrap_or_default())
                    );
                }
            },
            None => events.next().await,
        };
        let Some(ev) = next else {
            bail!("lost the watch on workflow {name}")
        };
        let Some(wf) = ev.context("watching the Workflow")? else {
            bar.abandon();
            bail!("workflow {name} was deleted");
        };
        let Some(status) = wf.status.clone() else {
            continue;
        };
        if let Some(resolved) = &status.resolved_spec {
            bar.set_length(resolved.nodes.len() as u64);
        }
        for (id, node) in &status.nodes {
            if seen.get(id) == Some(&node.phase) {
                continue;
            }
            seen.insert(id.clone(), node.phase);
            let line = match node.phase {
                NodePhase::Pending => continue,
                NodePhase::Running => format!("  ▶ {id} running"),
                NodePhase::Retrying => format!(
                    "  ↻ {id} retrying ({}): {}",
                    node.retry_at.as_deref().unwrap_or("soon"),
                    node.message.as_deref().unwrap_or_default()
                ),
                NodePhase::Succeeded => format!("  ✓ {id} succeeded"),
                NodePhase::Failed => format!(
                    "  ✗ {id} failed: {}",
                    node.message.as_deref().unwrap_or_default()
                ),
                NodePhase::Skipped => format!(
                    "  - {id} skipped: {}",
                    node.message.as_deref().unwrap_or_default()
                ),
                NodePhase::Aborted => format!("  ■ {id} aborted"),
            };
            bar.suspend(|| println!("{line}"));
        }
        let done = status
            .nodes
            .values()
            .filter(|n| n.phase.is_terminal())
            .count() as u64;
        bar.set_position(done);
        let running: Vec<&str> = status
            .nodes
            .iter()
            .filter(|(_, n)| n.phase == NodePhase::Running)
            .map(|(id, _)| id.as_str())
            .take(5)
            .collect();
        bar.set_message(format!("{:?} {}", status.phase, running.join(" ")));
        if status.phase.is_terminal() {
            break wf;
        }
    };
    bar.finish_and_clear();
    let status = last.status.clone().unwrap_or_default();
    let took = humantime::format_duration(Duration::from_secs(started.elapsed().as_secs()));
    match status.phase {
        WorkflowPhase::Succeeded => {
            println!("workflow {name} succeeded in {took}");
            for (id, node) in &status.nodes {
                if let Some(out) = node
                    .outputs
                    .as_ref()
                    .filter(|o| !o.is_empty() && node.items.is_empty())
                {
                    println!("  {id} outputs: {}", serde_json::Value::Object(out.clone()));
                }
                if let Some(r) = &node.outputs_ref {
                    let kib = r.size.div_ceil(1024);
                    println!(
                        "  {id} outputs: {kib} KiB in the artifact repository at {} ({})",
                        r.key, r.digest
                    );
                }
            }
            if let Some(out) = &status.outputs {
                println!(
                    "workflow outputs: {}",
                    serde_json::Value::Object(out.clone())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        phase => {
            println!(
                "workflow {name} {:?} after {took}: {}",
                phase,
                status.message.as_deref().unwrap_or_default()
            );
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            for (id, node) in status
                .nodes
                .iter()
                .filter(|(_, n)| n.phase == NodePhase::Failed)
            {
                if let Some(r) = node.resource.as_ref().filter(|r| r.kind == "Pod") {
                    let lp = LogParams {
                        tail_lines: Some(20),
                        ..Default::default()
                    };
                    if let Ok(log) = pods.logs(&r.name, &lp).await
                        && !log.trim().is_empty()
                    {
                        {
                            println!("  last lines of {id} ({}):", r.name);
                            for line in log.lines() {
                                println!("    {line}");
                            }
                        }
                    }
                }
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
