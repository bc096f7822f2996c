//! `weft controller` (against a real cluster) and `weft get` (a Workflow's DAG).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use kube::{Api, Client};

use crate::api::Workflow;
use crate::{render, runtime, serve};

/// Arguments of `weft controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Plugin directory (components with their manifests).
    #[arg(long, default_value = "/var/lib/weft/plugins", env = "WEFT_PLUGINS")]
    pub plugins: PathBuf,
    /// Only Workflows of this namespace (all namespaces when absent).
    #[arg(long, env = "WEFT_NAMESPACE")]
    pub namespace: Option<String>,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    #[arg(long, default_value = "0.0.0.0:8080", env = "WEFT_METRICS_ADDR")]
    pub metrics_addr: SocketAddr,
    /// Precompiled plugin cache.
    #[arg(long, env = "WEFT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Install or update the Workflow CRD at start.
    #[arg(long)]
    pub install_crd: bool,
}

/// Run `weft controller`: kubeconfig or in-cluster config, as kube-rs finds it.
pub fn controller(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = Client::try_default().await?;
        let (_engine, registry) = runtime::load_plugins(&args.plugins, args.cache_dir.as_deref())?;
        if args.install_crd {
            runtime::install_crd(&client).await?;
        }
        let ready = Arc::new(serve::Readiness::default());
        let (ctx, task) = runtime::spawn_controller(client, registry, args.namespace, async {
            let _ = tokio::signal::ctrl_c().await;
        });
        let addr = serve::serve(args.metrics_addr, ctx.metrics.clone(), ready.clone()).await?;
        tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
        ready.set_ready();
        task.await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Output formats of `weft get`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GetFormat {
    /// The Workflow as YAML.
    Yaml,
    /// Graphviz dot of the DAG with node phases.
    Dot,
    /// A Mermaid flowchart of the DAG with node phases.
    Mermaid,
}

/// Arguments of `weft get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The Workflow's name.
    pub name: String,
    /// Its namespace.
    #[arg(short, long, default_value = "default")]
    pub namespace: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = GetFormat::Yaml)]
    pub output: GetFormat,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

/// Run `weft get`.
pub fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = match &args.server {
            Some(url) => runtime::client_for(url)?,
            None => Client::try_default().await?,
        };
        let api: Api<Workflow> = Api::namespaced(client, &args.namespace);
        let wf = api.get(&args.name).await?;
        let out = match args.output {
            GetFormat::Yaml => serde_yaml::to_string(&wf)?,
            GetFormat::Dot => render::dot(&args.name, &wf.spec.spec, wf.status.as_ref()),
            GetFormat::Mermaid => render::mermaid(&wf.spec.spec, wf.status.as_ref()),
        };
        super::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}
