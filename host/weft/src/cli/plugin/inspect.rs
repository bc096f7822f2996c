//! `weft plugin inspect`: what the host sees of a component (world,
//! imports, exports, size, compile time) without a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use weft_plugin::Plugin;

use super::{load, manifest_for};

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

pub(super) fn inspect(args: InspectArgs) -> anyhow::Result<ExitCode> {
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
        crate::cli::out(&serde_json::to_string_pretty(&out)?)?;
    } else {
        crate::cli::out(&serde_yaml::to_string(&out)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn humantime_ms(d: std::time::Duration) -> String {
    format!("{}ms", d.as_millis())
}
