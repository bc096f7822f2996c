//! `weft plugin`: the plugin author's harness, like Kubewarden's `kwctl run`.
//!
//! `inspect` shows what the host sees of a component; `test` runs one call of
//! it in the same sandbox the controller uses, so what passes here behaves the
//! same in a cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_plugin::rollout::RolloutMode;

use crate::hotload::PluginStatus;
use weft_plugin::{
    Manifest, Plugin, PluginEngine, TaskContext, engine::EngineConfig, registry::manifest_path_for,
};

/// `weft plugin ...`
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Show a component's world, imports and exports, manifest, digest and size.
    Inspect(InspectArgs),
    /// Run build-resource (or get-task-phase with --observed) on a task, in the real sandbox.
    Test(TestArgs),
    /// Create or update a plugin's ConfigMap(s) for hot loading (compressed, split when large).
    Push(PushArgs),
    /// List hot-loaded plugins: versions, digests, pins, errors and breaker state.
    Status(StatusArgs),
    /// Start a new plugin from an SDK template (rust, python, js or c).
    New(super::scaffold::NewArgs),
    /// Make a shadow or canary version (push --shadow, --canary) the serving one.
    Promote(RolloutArgs),
    /// Drop a shadow or canary version; the serving one stays.
    Abort(RolloutArgs),
    /// Print the ServiceAccount and ClusterRole a plugin's resources are
    /// written with (controller --impersonate-plugins), from its manifest.
    Rbac(super::rbac::RbacArgs),
}

/// Arguments of `weft plugin promote` and `weft plugin abort`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The plugin (its head ConfigMap is found by the weft.dev/plugin label).
    pub plugin: String,
    /// The namespace of its ConfigMap.
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

/// Arguments of `weft plugin push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component (`.wasm`).
    pub file: PathBuf,
    /// The manifest; defaults to `<file>.yaml` (or `.yml`, `.json`) beside the component.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The namespace of the ConfigMap (one the controller watches).
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// The ConfigMap's name (default: the plugin's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Running workflows switch to this version too, instead of keeping theirs.
    #[arg(long)]
    pub latest: bool,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
    /// Print the ConfigMaps (parts, then the head) as YAML instead of
    /// writing them: for kustomize, GitOps or `kubectl apply`.
    #[arg(long, conflicts_with = "wait")]
    pub dry_run: bool,
    /// Return only once a controller serves the pushed version (exit 0), or
    /// rejected it (exit 1, with the reason).
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (exit 1).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration, requires = "wait")]
    pub timeout: std::time::Duration,
    /// Load it beside the serving version as a shadow: it gets copies of
    /// real calls, its answers are compared and never used
    /// (`weft plugin status --diff`); then promote or abort.
    #[arg(long, conflicts_with = "canary")]
    pub shadow: bool,
    /// Load it beside the serving version for this percentage (1-100) of
    /// new workflows; then promote or abort (the breaker aborts it on its own).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub canary: Option<u8>,
}

/// Arguments of `weft plugin status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this namespace (default: all).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print each roll-out: routed workflows, and a shadow's
    /// differences from the serving version (counts and samples).
    #[arg(long)]
    pub diff: bool,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

/// Arguments of `weft plugin inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The component (`.wasm`).
    pub file: PathBuf,
    /// The manifest; defaults to `<file>.yaml` (or `.yml`, `.json`) beside the component.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `weft plugin test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The component (`.wasm`).
    pub file: PathBuf,
    /// The task, a JSON or YAML file: {workflow, namespace, nodeId, attempt, taskType, config, inputs}.
    /// With --conformance, repeat it to check several tasks.
    #[arg(long, required = true)]
    pub task: Vec<PathBuf>,
    /// Run the conformance checks every plugin must pass (deterministic
    /// build, a phase for unknown and partial objects, declared abort
    /// behaviour and kinds, JSON-object outputs, within deadline and
    /// memory) instead of one call. Exit status 1 when one fails.
    #[arg(long, conflicts_with = "observed")]
    pub conformance: bool,
    /// With --conformance: print the report as JSON.
    #[arg(long, requires = "conformance")]
    pub json: bool,
    /// The resource as last observed (JSON or YAML): runs get-task-phase instead of build-resource.
    #[arg(long)]
    pub observed: Option<PathBuf>,
    /// The manifest; defaults to `<file>.yaml` beside the component.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Plugin config overrides, a JSON object merged over the manifest's defaults.
    #[arg(long, value_name = "JSON")]
    pub plugin_config: Option<String>,
    /// Web-API plugins: go live and write every HTTP exchange (request
    /// without its headers, response) to this JSON file.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Web-API plugins: answer every HTTP request from this file (written
    /// by --record), never going live. The allow-list still applies.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Web-API plugins: how many `get` polls at most before giving up.
    #[arg(long, default_value_t = 600)]
    pub max_polls: u32,
}

/// A task as the harness reads it: the fields of the WIT `task-context`
/// a user chooses; the host derives the rest (resource name, labels).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskFile {
    #[serde(default = "default_workflow")]
    workflow: String,
    #[serde(default = "default_uid")]
    workflow_uid: String,
    #[serde(default = "default_namespace")]
    namespace: String,
    #[serde(default = "default_node")]
    node_id: String,
    #[serde(default)]
    attempt: u32,
    task_type: Option<String>,
    #[serde(default = "empty_object")]
    config: Value,
    #[serde(default = "empty_object")]
    inputs: Value,
}

fn default_workflow() -> String {
    "example".into()
}
fn default_uid() -> String {
    "00000000-0000-0000-0000-000000000000".into()
}
fn default_namespace() -> String {
    "default".into()
}
fn default_node() -> String {
    "task".into()
}
fn empty_object() -> Value {
    json!({})
}

/// Run `weft plugin ...`.
pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::Inspect(args) => inspect(args),
        PluginCommand::Test(args) => test(args),
        PluginCommand::Push(args) => push(args),
        PluginCommand::Status(args) => status(args),
        PluginCommand::New(args) => super::scaffold::new(args),
        PluginCommand::Promote(args) => end_rollout(args, true),
        PluginCommand::Abort(args) => end_rollout(args, false),
        PluginCommand::Rbac(args) => super::rbac::rbac(args),
    }
}

async fn client(server: Option<&str>) -> anyhow::Result<kube::Client> {
    Ok(match server {
        Some(url) => crate::runtime::client_for(url)?,
        None => kube::Client::try_default()
            .await
            .map_err(|e| anyhow::anyhow!("{}", no_cluster_hint(&e)))?,
    })
}

/// What to do when no cluster configuration is found: kube-rs's own error
/// lists every place it looked, which says nothing of how to fix it.
pub fn no_cluster_hint(e: &kube::Error) -> String {
    let cause = e.to_string();
    let cause = cause.lines().next().unwrap_or_default();
    format!(
        "cannot find a Kubernetes cluster ({cause}).\n\
         Set KUBECONFIG to the cluster's kubeconfig, or pass --server URL. \
         For `weft dev`, use the kubeconfig it prints at start, by default \
         .weft/dev/kubeconfig in the directory where it runs: \
         KUBECONFIG=.weft/dev/kubeconfig"
    )
}

fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let manifest_path = match &args.manifest {
        Some(p) => p.clone(),
        None => manifest_path_for(&args.file).with_context(|| {
            format!(
                "{}: no manifest beside it (looked for .yaml, .yml, .json); pass --manifest",
                args.file.display()
            )
        })?,
    };
    let manifest = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("{}: cannot read", manifest_path.display()))?;
    let parsed = Manifest::parse(&manifest, &manifest_path.display().to_string())?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    let name = args.name.clone().unwrap_or_else(|| parsed.name.clone());
    let pinning = if args.latest {
        weft_plugin::Pinning::Latest
    } else {
        weft_plugin::Pinning::Pinned
    };
    let rollout = match (args.shadow, args.canary) {
        (true, _) => Some(RolloutMode::Shadow),
        (_, Some(percent)) => Some(RolloutMode::Canary { percent }),
        _ => None,
    };
    if args.dry_run {
        let mut packed =
            crate::hotload::package::pack(&name, &parsed.name, &bytes, &manifest, pinning);
        if let Some(mode) = rollout {
            let data = crate::hotload::package::HeadRollout::data(mode);
            packed.head.data.get_or_insert_default().extend(data);
        }
        let mut docs = Vec::new();
        for mut cm in packed.parts.into_iter().chain([packed.head]) {
            cm.metadata.namespace = Some(args.namespace.clone());
            docs.push(serde_yaml::to_string(&cm)?);
        }
        super::out(&docs.join("---\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = client(args.server.as_deref()).await?;
        let packed = crate::hotload::push_with(
            &client,
            &args.namespace,
            &name,
            &bytes,
            &manifest,
            pinning,
            rollout,
        )
        .await?;
        let stored: usize = packed
            .parts
            .iter()
            .chain([&packed.head])
            .map(crate::hotload::package::payload_size)
            .sum();
        let waiting = args
            .wait
            .then(|| (client.clone(), packed.digest.to_string()));
        super::out(&format!(
            "configmap {}/{name}: plugin {} {} {} ({} bytes, {} stored in {} configmap{})",
            args.namespace,
            parsed.name,
            parsed.version,
            packed.digest,
            bytes.len(),
            stored,
            packed.parts.len() + 1,
            if packed.parts.is_empty() { "" } else { "s" },
        ))?;
        match waiting {
            Some((client, digest)) => {
                wait_for_version(&client, &args.namespace, &name, &digest, args.timeout).await
            }
            None => Ok(ExitCode::SUCCESS),
        }
    })
}

/// Polls the head ConfigMap's status annotation until a controller serves
/// `digest` or rejects it; says how it stands as it changes.
async fn wait_for_version(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    digest: &str,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let mut said = String::new();
    loop {
        let rows = crate::hotload::read_status(client, Some(namespace)).await?;
        let st = rows
            .into_iter()
            .find(|(_, n, _, _)| n == name)
            .and_then(|(_, _, st, _)| st);
        let about_this = st.as_ref().filter(|s| s.desired.as_deref() == Some(digest));
        let rolled_out = about_this
            .and_then(|s| s.rollout.as_ref())
            .filter(|r| r.candidate == digest);
        if let Some(r) = rolled_out {
            super::out(&format!(
                "{digest} rolled out as {} after {:.1}s",
                r.mode,
                start.elapsed().as_secs_f64()
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        let state = match about_this {
            Some(s) if s.serving.as_deref() == Some(digest) && s.state != "conflict" => {
                super::out(&format!(
                    "serving {digest} after {:.1}s",
                    start.elapsed().as_secs_f64()
                ))?;
                return Ok(ExitCode::SUCCESS);
            }
            Some(s) if s.state == "rejected" || s.state == "conflict" => {
                let why = s.error.clone().or(s.conflict.clone()).unwrap_or_default();
                eprintln!("error: {} {digest}: {why}", s.state);
                return Ok(ExitCode::FAILURE);
            }
            Some(s) => s.state.clone(),
            None => "no controller has seen this version yet".to_string(),
        };
        if state != said {
            eprintln!("{name}: {state}");
            said = state;
        }
        if start.elapsed() > timeout {
            eprintln!(
                "error: {digest} is not serving after {} ({said}); is a controller watching namespace {namespace}?",
                humantime::format_duration(timeout)
            );
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn short(d: &Option<String>) -> String {
    d.as_deref()
        .map(|d| d.trim_start_matches("sha256:").chars().take(12).collect())
        .unwrap_or_else(|| "-".into())
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = client(args.server.as_deref()).await?;
        let rows = crate::hotload::read_status(&client, args.namespace.as_deref()).await?;
        if args.json {
            let v: Vec<Value> = rows
                .iter()
                .map(|(ns, name, st, desired)| {
                    json!({"namespace": ns, "configMap": name, "desired": desired, "status": st})
                })
                .collect();
            super::out(&serde_json::to_string_pretty(&v)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = format!(
            "{:<28} {:<16} {:<10} {:<8} {:<12} {:<12} {:<7} {:<4} {:<24} {}\n",
            "CONFIGMAP",
            "PLUGIN",
            "STATE",
            "VERSION",
            "SERVING",
            "DESIRED",
            "PINNING",
            "PINS",
            "RETAINED",
            "BREAKER / ERROR"
        );
        let rows_for_diff: Vec<(String, String, Option<PluginStatus>)> = rows
            .iter()
            .map(|(ns, name, st, _)| (ns.clone(), name.clone(), st.clone()))
            .collect();
        for (ns, name, st, desired) in rows {
            let st = st.unwrap_or_default();
            let retained = st
                .retained
                .iter()
                .map(|r| format!("{}({} pins)", short(&Some(r.digest.clone())), r.pins))
                .collect::<Vec<_>>()
                .join(",");
            let mut note = Vec::new();
            if let Some(b) = &st.breaker {
                note.push(format!(
                    "tripped {} after {} faults -> {}",
                    short(&Some(b.tripped.clone())),
                    b.faults,
                    short(&b.rolled_back_to)
                ));
            }
            if let Some(e) = &st.error {
                note.push(format!("rejected: {e}"));
            } else if let Some(c) = &st.conflict {
                note.push(c.clone());
            }
            // The annotation is the controller's word; none at all, or one
            // about another digest, means no controller has seen this one.
            let state = match (&st.desired, &desired) {
                _ if st.state.is_empty() => "unseen",
                (Some(seen), Some(now)) if seen != now => "unseen",
                _ => st.state.as_str(),
            };
            if state == "unseen" {
                note.push(
                    "no controller has seen this version (is one watching this namespace?)".into(),
                );
            }
            out.push_str(&format!(
                "{:<28} {:<16} {:<10} {:<8} {:<12} {:<12} {:<7} {:<4} {:<24} {}\n",
                format!("{ns}/{name}"),
                if st.plugin.is_empty() {
                    "-"
                } else {
                    st.plugin.as_str()
                },
                state,
                st.version.as_deref().unwrap_or("-"),
                short(&st.serving),
                short(&desired.or(st.desired.clone())),
                if st.pinning.is_empty() {
                    "-"
                } else {
                    st.pinning.as_str()
                },
                st.pins,
                if retained.is_empty() {
                    "-".into()
                } else {
                    retained
                },
                note.join("; ")
            ));
        }
        if args.diff {
            out.push_str(&rollouts(&rows_for_diff));
        }
        super::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `status --diff`: each roll-out, with a shadow's differences.
fn rollouts(rows: &[(String, String, Option<PluginStatus>)]) -> String {
    let mut out = String::new();
    for (ns, name, st) in rows {
        let Some(r) = st.as_ref().and_then(|s| s.rollout.as_ref()) else {
            continue;
        };
        out.push_str(&format!(
            "\n{ns}/{name}: {} {} ({}) — {} of {} new workflows on it\n",
            r.mode,
            r.version,
            short(&Some(r.candidate.clone())),
            r.to_candidate,
            r.routed
        ));
        if let Some(sh) = &r.shadow {
            out.push_str(&format!(
                "  shadow calls {}, differing {}, candidate failed {}\n",
                sh.calls, sh.diffs, sh.errors
            ));
            for d in &sh.samples {
                out.push_str(&format!("  - {d}\n"));
            }
        }
    }
    if out.is_empty() {
        out.push_str("\nno roll-out under way\n");
    }
    out
}

/// `weft plugin promote` (`promote`) or `abort`: edits the head's
/// `data.rollout`; the controller does the rest and records an Event.
fn end_rollout(args: RolloutArgs, promote: bool) -> anyhow::Result<ExitCode> {
    use crate::hotload::package::{KEY_CANARY_PERCENT, KEY_ROLLOUT};
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = client(args.server.as_deref()).await?;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, &args.namespace);
        let head = crate::hotload::rollout::find_head(&api, &args.plugin).await?;
        let data = head.data.clone().unwrap_or_default();
        match data.get(KEY_ROLLOUT).map(String::as_str) {
            Some("shadow" | "canary") => {}
            other => anyhow::bail!(
                "plugin {} in {} has no roll-out under way (data.{KEY_ROLLOUT} is {other:?}): push one with --shadow or --canary",
                args.plugin,
                args.namespace
            ),
        }
        let patch = if promote {
            json!({"data": {KEY_ROLLOUT: null, KEY_CANARY_PERCENT: null}})
        } else {
            json!({"data": {KEY_ROLLOUT: "aborted"}})
        };
        use kube::ResourceExt as _;
        api.patch(
            &head.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
        super::out(&format!(
            "configmap {}/{}: {} {}",
            args.namespace,
            head.name_any(),
            if promote { "promoting" } else { "aborting" },
            data.get(crate::hotload::package::KEY_DIGEST)
                .map(String::as_str)
                .unwrap_or("the candidate")
        ))?;
        Ok(ExitCode::SUCCESS)
    })
}

fn manifest_for(file: &Path, explicit: Option<&Path>) -> anyhow::Result<Manifest> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => manifest_path_for(file).with_context(|| {
            format!(
                "{}: no manifest beside it (looked for .yaml, .yml, .json); pass --manifest",
                file.display()
            )
        })?,
    };
    Ok(Manifest::from_path(&path)?)
}

fn load(file: &Path, manifest: Manifest) -> anyhow::Result<(Plugin, Vec<u8>, f64, PluginEngine)> {
    let bytes = std::fs::read(file).with_context(|| format!("{}: cannot read", file.display()))?;
    // WEFT_CACHE_DIR (as for `weft controller`): keep compiled components,
    // so a 12-18 MB Python or JavaScript plugin compiles once, not per run.
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: std::env::var_os("WEFT_CACHE_DIR").map(PathBuf::from),
        // One-off calls: nothing to prepare ahead for.
        spares: 0,
        ..EngineConfig::default()
    })?;
    let start = Instant::now();
    let (plugin, _) = Plugin::load(&engine, &bytes, manifest, &file.display().to_string())?;
    Ok((plugin, bytes, start.elapsed().as_secs_f64() * 1e3, engine))
}

fn inspect(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let manifest = manifest_for(&args.file, args.manifest.as_deref())?;
    let (plugin, bytes, load_ms, engine) = load(&args.file, manifest)?;
    let component = engine.describe(&bytes)?;
    let m = plugin.manifest();
    let properties = match &plugin {
        Plugin::Task(t) => Some(t.properties()),
        Plugin::Middleware(_) | Plugin::WebApi(_) => None,
    };
    let out = json!({
        "file": args.file.display().to_string(),
        "name": m.name,
        "version": m.version,
        "world": m.world.wit_name(),
        "description": m.description,
        "digest": format!("sha256:{}", plugin.digest().hex()),
        "size": plugin.size(),
        "loadMillis": (load_ms * 10.0).round() / 10.0,
        "exports": component.0,
        "imports": component.1,
        "taskTypes": m.task_types,
        "resources": m.resources.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "limits": {
            "deadline": humantime_ms(m.limits.deadline),
            "memory": m.limits.memory,
            "output": m.limits.output,
        },
        "config": m.config,
        "properties": properties,
        "middleware": (m.world == weft_plugin::manifest::World::MiddlewarePlugin).then_some(&m.middleware),
    });
    if args.json {
        super::out(&serde_json::to_string_pretty(&out)?)?;
    } else {
        super::out(&serde_yaml::to_string(&out)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn humantime_ms(d: std::time::Duration) -> String {
    format!("{}ms", d.as_millis())
}

fn read_structured(path: &Path, what: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{what} {}: cannot read", path.display()))?;
    serde_yaml::from_str(&text)
        .with_context(|| format!("{what} {}: not JSON or YAML", path.display()))
}

fn read_task(path: &Path) -> anyhow::Result<TaskFile> {
    let task: TaskFile = serde_json::from_value(read_structured(path, "task")?)
        .with_context(|| format!("task {}: invalid", path.display()))?;
    if !task.config.is_object() || !task.inputs.is_object() {
        bail!("task {}: config and inputs must be objects", path.display());
    }
    Ok(task)
}

impl TaskFile {
    fn context(self, plugin: &weft_plugin::TaskPlugin) -> TaskContext {
        let first = plugin.manifest().task_types.first().cloned();
        self.context_of(first)
    }

    fn webapi_context(self, plugin: &weft_plugin::WebApiPlugin) -> TaskContext {
        let first = plugin.manifest().task_types.first().cloned();
        self.context_of(first)
    }

    fn context_of(self, first_type: Option<String>) -> TaskContext {
        let task_type = self.task_type.clone().or(first_type).unwrap_or_default();
        TaskContext::for_attempt(
            &self.workflow,
            &self.workflow_uid,
            &self.namespace,
            &self.node_id,
            self.attempt,
            &task_type,
            self.config,
            self.inputs,
        )
    }
}

/// Calls `weft plugin test` times for its per-call figure.
const PER_CALL_SAMPLES: usize = 21;

fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let manifest = manifest_for(&args.file, args.manifest.as_deref())?;
    let tasks = args
        .task
        .iter()
        .map(|p| read_task(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if tasks.len() > 1 && !args.conformance {
        bail!("--task once, unless with --conformance");
    }
    let observed = args
        .observed
        .as_deref()
        .map(|p| read_structured(p, "observed resource"))
        .transpose()?;
    let overrides = match &args.plugin_config {
        None => None,
        Some(s) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => Some(m),
            Ok(_) => bail!("--plugin-config must be a JSON object"),
            Err(e) => bail!("--plugin-config is not JSON: {e}"),
        },
    };
    let (plugin, _, _, _) = load(&args.file, manifest)?;
    if let Plugin::WebApi(w) = plugin {
        let task = tasks.into_iter().next().context("--task is required")?;
        return super::webapi_test::run(&args, &w, task.webapi_context(&w), overrides);
    }
    if args.record.is_some() || args.replay.is_some() {
        bail!("--record and --replay are for web-API plugins (world webapi-task-plugin)");
    }
    let Plugin::Task(plugin) = plugin else {
        bail!(
            "{}: a middleware plugin; `weft plugin test` runs task plugins",
            args.file.display()
        );
    };
    let mut plugin = std::sync::Arc::unwrap_or_clone(plugin);
    if let Some(o) = &overrides {
        plugin.set_config_overrides(o);
    }
    let mut contexts: Vec<TaskContext> = tasks.into_iter().map(|t| t.context(&plugin)).collect();
    if args.conformance {
        let report = weft_plugin::conformance::check(&plugin, &contexts);
        if args.json {
            super::out(&serde_json::to_string_pretty(&report)?)?;
        } else {
            let mut text = format!(
                "conformance of {} {}\n",
                plugin.name(),
                plugin.manifest().version
            );
            for c in &report.checks {
                let mark = if c.passed { "PASS" } else { "FAIL" };
                text.push_str(&format!("  {mark}  {}: {}\n", c.name, c.detail));
            }
            super::out(&text)?;
        }
        return Ok(if report.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let ctx = contexts.remove(0);
    let call = |p: &weft_plugin::TaskPlugin| match &observed {
        None => p
            .build_resource(&ctx)
            .map(|(v, stats)| (serde_yaml::to_string(&v), stats.memory_peak)),
        Some(obs) => p
            .get_task_phase(&ctx, obs)
            .map(|(info, stats)| (serde_yaml::to_string(&info), stats.memory_peak)),
    };
    let result = call(&plugin);
    if let Ok((_, peak)) = &result {
        // What one call costs in the controller: a fresh instance each
        // time, so instantiation is part of it. The median of a few calls.
        let mut took: Vec<std::time::Duration> = (0..PER_CALL_SAMPLES)
            .map(|_| {
                let start = Instant::now();
                let _ = call(&plugin);
                start.elapsed()
            })
            .collect();
        took.sort();
        eprintln!(
            "# {}: {:.0} µs per call (median of {PER_CALL_SAMPLES}, instantiate + call), peak memory {} KiB of {} KiB allowed",
            if observed.is_some() {
                "get-task-phase"
            } else {
                "build-resource"
            },
            took[took.len() / 2].as_secs_f64() * 1e6,
            peak / 1024,
            plugin.manifest().limits.memory / 1024,
        );
    }
    let result = result.map(|(text, _)| text);
    match result {
        Ok(text) => {
            super::out(&text?)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
}
