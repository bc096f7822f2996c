//! `weft plugin push`: a component and its manifest written to the
//! cluster as ConfigMaps, optionally as a shadow or canary, and waited for
//! until the loader serves it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use weft_plugin::rollout::RolloutMode;
use weft_plugin::{Manifest, registry::manifest_path_for};

use super::client;

/// Arguments of `weft plugin push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component (`.wasm`).
    pub file: PathBuf,
    /// The manifest; defaults to `<file>.yaml` (or `.yml`, `.json`) beside the component.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The namespace of the ConfigMap (one the controller watches).
    #[arg(short, long, default_value_t = crate::cli::context_namespace(), hide_default_value = true)]
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

pub(super) fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
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
        crate::cli::out(&docs.join("---\n"))?;
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
        crate::cli::out(&format!(
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
pub(super) async fn wait_for_version(
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
            crate::cli::out(&format!(
                "{digest} rolled out as {} after {:.1}s",
                r.mode,
                start.elapsed().as_secs_f64()
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        let state = match about_this {
            Some(s) if s.serving.as_deref() == Some(digest) && s.state != "conflict" => {
                crate::cli::out(&format!(
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
