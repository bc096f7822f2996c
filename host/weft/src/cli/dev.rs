//! `weft dev`: the embedded dev cluster, the controller, plugin hot loading
//! and the admin API in one process, until Ctrl-C: what a plugin or client
//! author develops against. And the admin API flags the serving commands share.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::admin::{self, AdminConfig};
use crate::runtime;

/// Admin API flags of `weft controller`, `weft dev` and `weft run --serve`.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// The admin API's configuration (YAML: listen, tls, middleware,
    /// authorization, maxMessageBytes).
    #[arg(long, env = "WEFT_ADMIN_CONFIG", value_name = "FILE")]
    pub admin_config: Option<PathBuf>,
    /// Where the admin API listens (overrides the config's `listen`;
    /// default 127.0.0.1:8081, loopback only).
    #[arg(long, env = "WEFT_ADMIN_LISTEN", value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// The largest workflow input the data proxy signs an upload for
    /// (`CreateUploadLocation`, `weft cp`, `weft submit -a`), e.g. 500Mi
    /// (overrides the config's `dataProxy.maxUploadBytes`; default 5Gi).
    #[arg(long, env = "WEFT_MAX_UPLOAD_SIZE", value_name = "QUANTITY", value_parser = weft_plugin::quantity::parse_quantity)]
    pub max_upload_size: Option<u64>,
}

impl AdminArgs {
    /// The admin configuration these flags ask for. Without a config file,
    /// the dev commands run no Wasm middleware (the first-party plugins
    /// beside the pod plugin would otherwise ask for tokens nobody has
    /// configured); `weft controller` runs every loaded middleware.
    pub fn config(&self, dev: bool) -> anyhow::Result<AdminConfig> {
        let mut config = match &self.admin_config {
            Some(path) => AdminConfig::load(path)?,
            None => AdminConfig {
                middleware: dev.then(Vec::new),
                ..AdminConfig::default()
            },
        };
        if let Some(addr) = self.admin_listen {
            config.listen = addr;
        }
        if let Some(max) = self.max_upload_size {
            config.data_proxy.max_upload_bytes = max;
        }
        Ok(config)
    }
}

/// Arguments of `weft dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
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
    /// The namespace whose plugin ConfigMaps are hot-loaded.
    #[arg(short, long, default_value = "default")]
    pub namespace: String,
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The admission webhook.
    #[command(flatten)]
    pub webhook: DevWebhookArgs,
    /// Where tasks' artifacts go (default: `artifacts/` of the data dir).
    #[command(flatten)]
    pub artifacts: super::artifacts::ArtifactArgs,
    /// Where execution history goes (default: `history.db` of the data dir).
    #[command(flatten)]
    pub history: super::history::HistoryArgs,
}

/// The admission webhook of `weft dev` and `weft run`: on by default,
/// registered with the dev cluster like a cluster install's.
#[derive(Debug, Clone, Args)]
pub struct DevWebhookArgs {
    /// Do not run the admission webhook (Workflows are then checked only
    /// by the controller, after creation).
    #[arg(long)]
    pub no_webhook: bool,
    /// Admit Workflows whose task types no plugin serves yet (plugins may be
    /// pushed later), with a warning.
    #[arg(long)]
    pub allow_unknown_task_types: bool,
}

impl DevWebhookArgs {
    /// Starts it against the dev cluster, unless turned off.
    pub async fn start(
        &self,
        client: &kube::Client,
        registry: std::sync::Arc<weft_plugin::Registry>,
    ) -> anyhow::Result<()> {
        if self.no_webhook {
            return Ok(());
        }
        let addr =
            crate::webhook::serve_dev(client, registry, self.allow_unknown_task_types).await?;
        println!("admission webhook at https://{addr} (--no-webhook to run without)");
        Ok(())
    }
}

/// Run `weft dev`.
pub fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let config = args.admin.config(true)?;
    let registry_config = runtime::registry_config(args.registry_config.as_deref())?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let cluster = crate::dev::start(&args.data_dir).await?;
        let client = runtime::client_for(&cluster.base_url())?;
        let (engine, registry) = runtime::load_plugins_with(
            &args.plugins,
            Some(&runtime::cache_dir(&args.data_dir)),
            registry_config,
            runtime::PluginSizing::weft(),
        )?;
        runtime::install_crd(&client).await?;
        args.webhook.start(&client, registry.clone()).await?;
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
        let hotload = crate::hotload::HotloadConfig {
            namespaces: vec![args.namespace.clone()],
            workflow_namespace: None,
            workflows: Some(ctx.live.clone()),
            ..Default::default()
        };
        let (hot, loader) = runtime::spawn_hotload(
            client.clone(),
            engine,
            registry.clone(),
            ctx.metrics.clone(),
            hotload,
            futures::future::pending(),
        );
        open(Some(hot.clone()));
        // As `weft controller`: the admin API opens with its middleware
        // loaded and configured.
        hot.synced().await;
        let server = admin::serve_with(
            &config,
            client,
            registry,
            ctx.metrics.clone(),
            admin::Planes { artifacts, history },
            shutdown_signal(),
        )
        .await?;
        println!("dev cluster at {}", cluster.base_url());
        println!(
            "kubectl --kubeconfig {}",
            args.data_dir.join("kubeconfig").display()
        );
        println!("admin API at {}", server.addr);
        println!("console at {}", server.console_url());
        println!("Ctrl-C to stop");
        server.task.await??;
        let _ = stop_tx.send(());
        loader.abort();
        // The cluster goes last: whatever still runs then would log
        // connection errors against it.
        let mut controller = controller;
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), &mut controller);
        if waited.await.is_err() {
            controller.abort();
            let _ = controller.await;
        }
        ctx.stop_watches();
        let _ = loader.await;
        cluster.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves on Ctrl-C or SIGTERM (how a pod is stopped).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => futures::future::pending::<()>().await,
                }
            } => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
