//! Wiring shared by `weft run`, `weft dev` and `weft controller`: a kube
//! client, the plugin registry from a directory, the CRD, and the
//! controller task.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use weft_plugin::engine::ChildCompiler;
use weft_plugin::{EngineConfig, PluginEngine, PreparerPriority, Registry, RegistryConfig};

use crate::controller::{self, Context, children::Children};

/// A client for an API server at `url` without credentials (the embedded
/// dev cluster on loopback).
pub fn client_for(url: &str) -> anyhow::Result<Client> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("bad API server URL {url:?}"))?;
    let config = kube::Config::new(uri);
    Ok(Client::try_from(config)?)
}

/// Where compiled components are kept: `WEFT_CACHE_DIR` when set (every
/// command honours it, as the plugin docs say), else `<data_dir>/cache`.
pub fn cache_dir(data_dir: &Path) -> std::path::PathBuf {
    std::env::var_os("WEFT_CACHE_DIR")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| data_dir.join("cache"))
}

/// The operator's registry configuration (`--registry-config FILE`, YAML;
/// see [`RegistryConfig`]): an unknown key or a bad value is refused,
/// naming it. No file: the defaults.
pub fn registry_config(path: Option<&Path>) -> anyhow::Result<RegistryConfig> {
    let Some(path) = path else {
        return Ok(RegistryConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the registry config {}", path.display()))?;
    serde_yaml::from_str(&text)
        .with_context(|| format!("the registry config {} is not valid", path.display()))
}

/// Loads every plugin of a directory; says which failed and why, and goes on.
pub fn load_plugins(
    dir: &Path,
    cache: Option<&Path>,
) -> anyhow::Result<(PluginEngine, Arc<Registry>)> {
    load_plugins_with(
        dir,
        cache,
        RegistryConfig::default(),
        PluginSizing::default(),
    )
}

/// Instances each plugin version keeps prepared ahead of its calls unless
/// the operator says otherwise (`weft controller --plugin-spares`).
pub const DEFAULT_SPARES: usize = 1;

/// How the plugin engine is sized (`weft controller --plugin-spares`,
/// `--plugin-keep-resident`, `--plugin-preparer-priority`) and where it
/// compiles; see [`EngineConfig`].
#[derive(Debug, Clone)]
pub struct PluginSizing {
    /// [`EngineConfig::spares`].
    pub spares: usize,
    /// [`EngineConfig::keep_resident`].
    pub keep_resident: usize,
    /// [`EngineConfig::preparer_priority`].
    pub preparer_priority: PreparerPriority,
    /// [`EngineConfig::compiler`]: the `weft` binary's own commands
    /// compile in a child of themselves ([`PluginSizing::weft`]); a test
    /// that runs a controller in its own process compiles in it.
    pub compiler: Option<ChildCompiler>,
}

impl Default for PluginSizing {
    fn default() -> Self {
        PluginSizing {
            spares: DEFAULT_SPARES,
            keep_resident: EngineConfig::default().keep_resident,
            preparer_priority: PreparerPriority::default(),
            compiler: None,
        }
    }
}

impl PluginSizing {
    /// The defaults of the `weft` binary's commands: plugins compile in a
    /// child `weft plugin compile-artifact`, so cranelift's peak (125 MiB
    /// for the k8s-resource plugin) never enters the controller's memory.
    pub fn weft() -> Self {
        PluginSizing {
            compiler: ChildCompiler::this_weft(),
            ..PluginSizing::default()
        }
    }
}

/// [`load_plugins`] into a registry the operator configured. Their
/// `plugins.NAME.config` overrides apply at once; Secret references in
/// them wait for the hot loader, which has a client (until then the guest
/// sees those keys left out).
pub fn load_plugins_with(
    dir: &Path,
    cache: Option<&Path>,
    config: RegistryConfig,
    sizing: PluginSizing,
) -> anyhow::Result<(PluginEngine, Arc<Registry>)> {
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: cache.map(Path::to_path_buf),
        spares: sizing.spares,
        keep_resident: sizing.keep_resident,
        preparer_priority: sizing.preparer_priority,
        compiler: sizing.compiler,
        ..EngineConfig::default()
    })?;
    let registry = Arc::new(Registry::new(config));
    if !dir.exists() {
        // Outside the repository (or in a cluster without baked-in
        // plugins) there is no directory: plugins come from ConfigMaps.
        tracing::info!(dir = %dir.display(), "no plugin directory: only hot-loaded plugins serve");
        return Ok((engine, registry));
    }
    for err in registry.load_dir(&engine, dir) {
        tracing::error!("{err}");
        eprintln!("warning: {err}");
    }
    for (name, settings) in &registry.config().plugins {
        if let Some(p) = registry.snapshot().plugins().get(name) {
            let base = p.manifest().config_without_secret_refs();
            let mut config = base;
            config.extend(weft_plugin::manifest::without_secret_refs(&settings.config));
            registry.publish(p.with_config(config));
        }
    }
    let types: Vec<String> = registry
        .snapshot()
        .task_types()
        .map(str::to_string)
        .collect();
    tracing::info!(dir = %dir.display(), task_types = ?types, "plugins loaded");
    Ok((engine, registry))
}

/// Installs (or updates) Weft's CRDs with server-side apply.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in crate::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(controller::MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("installing the CRD {name}"))?;
    }
    Ok(())
}

/// Starts the controller on the runtime; it stops when `shutdown` resolves.
pub fn spawn_controller(
    client: Client,
    registry: Arc<Registry>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> (Arc<Context>, tokio::task::JoinHandle<()>) {
    spawn_controller_after(client, registry, namespace, async {}, shutdown)
}

/// Starts the controller once `start` resolves (e.g. the hot loader's
/// first sync, so a restarted controller finds the plugin versions its
/// running workflows pin); it stops when `shutdown` resolves.
pub fn spawn_controller_after(
    client: Client,
    registry: Arc<Registry>,
    namespace: Option<String>,
    start: impl std::future::Future<Output = ()> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> (Arc<Context>, tokio::task::JoinHandle<()>) {
    let (children, wake) = Children::new_in(client.clone(), namespace.clone());
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let ctx = Context::new(
        client,
        registry,
        children,
        metrics,
        None,
        controller::Settings::default(),
    );
    let run = controller::run(ctx.clone(), wake, namespace, shutdown);
    let task = tokio::spawn(async move {
        start.await;
        run.await
    });
    (ctx, task)
}

/// A start gate for [`spawn_controller_after`]: opens when the loader has
/// synced (at once without one).
pub fn after_sync() -> (
    impl FnOnce(Option<Arc<crate::hotload::HotLoader>>),
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let open = move |loader: Option<Arc<crate::hotload::HotLoader>>| {
        tokio::spawn(async move {
            if let Some(l) = loader {
                l.synced().await;
            }
            let _ = tx.send(());
        });
    };
    (open, async move {
        let _ = rx.await;
    })
}

/// Starts hot loading plugins from ConfigMaps into `registry` (see
/// [`crate::hotload`]); it stops when `shutdown` resolves. `metrics` are the
/// controller's, so `/metrics` shows loads, rejections and rollbacks.
pub fn spawn_hotload(
    client: Client,
    engine: PluginEngine,
    registry: Arc<Registry>,
    metrics: Arc<crate::metrics::Metrics>,
    config: crate::hotload::HotloadConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (Arc<crate::hotload::HotLoader>, tokio::task::JoinHandle<()>) {
    let loader = crate::hotload::HotLoader::new(client, engine, registry, metrics, config);
    let task = tokio::spawn(loader.clone().run(shutdown));
    (loader, task)
}
