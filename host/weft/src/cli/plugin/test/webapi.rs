//! `weft plugin test` for web-API plugins: create, then get until the job
//! ends, as the controller would (with the manifest's polling), live, live
//! and recorded (`--record`), or from a recording with no network at all
//! (`--replay`), like Kubewarden's `kwctl` for its policies' host calls.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use weft_plugin::outbound::{Exchange, Tape};
use weft_plugin::{TaskContext, WebApiPlugin};

use super::TestArgs;

/// Runs the plugin's create / get loop and prints what each call answered.
pub fn run(
    args: &TestArgs,
    plugin: &Arc<WebApiPlugin>,
    ctx: TaskContext,
    overrides: Option<Map<String, Value>>,
) -> anyhow::Result<ExitCode> {
    let mut plugin = WebApiPlugin::clone(plugin);
    if let Some(o) = overrides {
        let mut config = plugin.manifest().config_without_secret_refs();
        config.extend(o);
        plugin.set_config(config);
    }
    let tape = match (&args.record, &args.replay) {
        (Some(_), _) => Some(Tape::record()),
        (_, Some(path)) => Some(Tape::replay(read_tape(path)?)),
        _ => None,
    };
    if let Some(t) = &tape {
        plugin.set_tape(t.clone());
    }
    let replaying = args.replay.is_some();
    let outcome = calls(&plugin, &ctx, args.max_polls, replaying);
    if let (Some(path), Some(t)) = (&args.record, &tape) {
        let text = serde_json::to_string_pretty(&t.recorded())?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("--record {}: cannot write", path.display()))?;
        eprintln!(
            "# recorded {} exchanges in {}",
            t.recorded().len(),
            path.display()
        );
    }
    if let Some(t) = tape.as_ref().filter(|_| replaying) {
        for r in t.unused() {
            eprintln!(
                "# warning: recorded {} {} was never asked for",
                r.method, r.url
            );
        }
    }
    match outcome {
        Ok(report) => {
            crate::cli::out(&serde_yaml::to_string(&report)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
}

fn read_tape(path: &std::path::Path) -> anyhow::Result<Vec<Exchange>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--replay {}: cannot read", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("--replay {}: not a recording of exchanges", path.display()))
}

/// create, then get until a terminal phase: the meta, every phase seen,
/// and the last answer.
fn calls(
    plugin: &WebApiPlugin,
    ctx: &TaskContext,
    max_polls: u32,
    replaying: bool,
) -> anyhow::Result<Value> {
    let (meta, _) = plugin.create(ctx, &ctx.resource_name)?;
    let poll = plugin.poll();
    let mut wait = poll.initial;
    let mut phases: Vec<String> = Vec::new();
    for _ in 0..max_polls {
        if !replaying {
            std::thread::sleep(wait);
            wait = (wait * 2).min(poll.max).max(Duration::from_millis(1));
        }
        let (info, _) = plugin.get(ctx, &meta)?;
        let phase = info.phase.to_string();
        if phases.last() != Some(&phase) {
            phases.push(phase);
        }
        if info.phase.is_terminal() {
            return Ok(json!({"meta": meta, "phases": phases, "result": info}));
        }
    }
    bail!("the job did not end within {max_polls} polls (--max-polls); last phases {phases:?}")
}
