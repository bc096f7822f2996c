//! `weft plugin`: the plugin author's harness, like Kubewarden's `kwctl run`.
//!
//! `inspect` shows what the host sees of a component; `test` runs one call of
//! it in the same sandbox the controller uses, so what passes here behaves the
//! same in a cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Subcommand;

mod inspect;
mod push;
mod status;
mod test;

pub use inspect::InspectArgs;
pub use push::PushArgs;
pub use status::{RolloutArgs, StatusArgs};
pub use test::TestArgs;
use weft_plugin::{
    Manifest, Plugin, PluginEngine, engine::EngineConfig, registry::manifest_path_for,
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
    /// Compile a component read on stdin to the artifact the controller
    /// loads, on stdout: how `weft controller` compiles plugins outside
    /// its own memory (`weft_plugin::engine::ChildCompiler`).
    #[command(hide = true)]
    CompileArtifact,
}

/// Run `weft plugin ...`.
pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::Inspect(args) => inspect::inspect(args),
        PluginCommand::Test(args) => test::test(args),
        PluginCommand::Push(args) => push::push(args),
        PluginCommand::Status(args) => status::status(args),
        PluginCommand::New(args) => super::scaffold::new(args),
        PluginCommand::Promote(args) => status::end_rollout(args, true),
        PluginCommand::Abort(args) => status::end_rollout(args, false),
        PluginCommand::Rbac(args) => super::rbac::rbac(args),
        PluginCommand::CompileArtifact => compile_artifact(),
    }
}

/// `weft plugin compile-artifact`: exits [`weft_plugin::engine::REFUSED`]
/// with the reason when the component does not compile.
fn compile_artifact() -> anyhow::Result<ExitCode> {
    use std::io::{Read, Write};
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("reading the component from stdin")?;
    match weft_plugin::engine::compile_artifact(&bytes) {
        Ok(artifact) => {
            std::io::stdout()
                .write_all(&artifact)
                .context("writing the artifact to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{e:#}");
            Ok(ExitCode::from(weft_plugin::engine::REFUSED as u8))
        }
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
