//! `weft plugin test`: one call (or the conformance checks) of a component
//! in the same sandbox the controller uses; web-API plugins in [`webapi`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_plugin::{Plugin, TaskContext};

use super::{load, manifest_for};

mod webapi;

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
pub(super) struct TaskFile {
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

pub(super) fn default_workflow() -> String {
    "example".into()
}

pub(super) fn default_uid() -> String {
    "00000000-0000-0000-0000-000000000000".into()
}

pub(super) fn default_namespace() -> String {
    "default".into()
}

pub(super) fn default_node() -> String {
    "task".into()
}

pub(super) fn empty_object() -> Value {
    json!({})
}

pub(super) fn read_structured(path: &Path, what: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{what} {}: cannot read", path.display()))?;
    serde_yaml::from_str(&text)
        .with_context(|| format!("{what} {}: not JSON or YAML", path.display()))
}

pub(super) fn read_task(path: &Path) -> anyhow::Result<TaskFile> {
    let task: TaskFile = serde_json::from_value(read_structured(path, "task")?)
        .with_context(|| format!("task {}: invalid", path.display()))?;
    if !task.config.is_object() || !task.inputs.is_object() {
        bail!("task {}: config and inputs must be objects", path.display());
    }
    Ok(task)
}

/// Calls `weft plugin test` times for its per-call figure.
pub(super) const PER_CALL_SAMPLES: usize = 21;

pub(super) fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
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
        return webapi::run(&args, &w, task.webapi_context(&w), overrides);
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
            crate::cli::out(&serde_json::to_string_pretty(&report)?)?;
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
            crate::cli::out(&text)?;
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
            crate::cli::out(&text?)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
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
