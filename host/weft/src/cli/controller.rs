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
    /// Namespaces whose ConfigMaps labelled `weft.dev/plugin` are hot-loaded
    /// (default: the --namespace, or all namespaces).
    #[arg(long, env = "WEFT_PLUGIN_NAMESPACES", value_delimiter = ',')]
    pub plugin_namespace: Vec<String>,
    /// Do not hot-load plugins from ConfigMaps (only the plugin directory).
    #[arg(long)]
    pub no_hotload: bool,
    /// Sandbox faults (traps, timeouts) a plugin version may have within
    /// --breaker-window before it is rolled back; 0 disables the breaker.
    #[arg(long, default_value_t = 5)]
    pub breaker_faults: u32,
    /// The circuit breaker's window.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub breaker_window: std::time::Duration,
    /// The admin API.
    #[command(flatten)]
    pub admin: super::dev::AdminArgs,
    /// Do not serve the admin API.
    #[arg(long)]
    pub no_admin: bool,
}

impl ControllerArgs {
    /// The hot loading configuration these arguments ask for.
    pub fn hotload(&self) -> crate::hotload::HotloadConfig {
        let namespaces = if self.plugin_namespace.is_empty() {
            self.namespace.iter().cloned().collect()
        } else {
            self.plugin_namespace.clone()
        };
        crate::hotload::HotloadConfig {
            namespaces,
            workflow_namespace: self.namespace.clone(),
            breaker: weft_plugin::breaker::BreakerConfig {
                max_faults: self.breaker_faults,
                window: self.breaker_window,
            },
            ..Default::default()
        }
    }
}

/// Run `weft controller`: kubeconfig or in-cluster config, as kube-rs finds it.
pub fn controller(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let admin_config = (!args.no_admin)
        .then(|| args.admin.config(false))
        .transpose()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = Client::try_default().await?;
        let (engine, registry) = runtime::load_plugins(&args.plugins, args.cache_dir.as_deref())?;
        if args.install_crd {
            runtime::install_crd(&client).await?;
        }
        let ready = Arc::new(serve::Readiness::default());
        let hotload = args.hotload();
        let (ctx, task) = runtime::spawn_controller(
            client.clone(),
            registry.clone(),
            args.namespace.clone(),
            async {
                super::dev::shutdown_signal().await;
            },
        );
        let admin = match &admin_config {
            Some(config) => Some(
                crate::admin::serve(
                    config,
                    client.clone(),
                    registry.clone(),
                    ctx.metrics.clone(),
                    super::dev::shutdown_signal(),
                )
                .await?,
            ),
            None => None,
        };
        let loader = (!args.no_hotload).then(|| {
            runtime::spawn_hotload(
                client,
                engine,
                registry,
                ctx.metrics.clone(),
                hotload,
                futures::future::pending(),
            )
            .1
        });
        let addr = serve::serve(args.metrics_addr, ctx.metrics.clone(), ready.clone()).await?;
        tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
        ready.set_ready();
        task.await?;
        if let Some(l) = loader {
            l.abort();
        }
        if let Some(a) = admin {
            a.task.abort();
        }
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
