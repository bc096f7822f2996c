//! Hot loading: plugins from ConfigMaps, without restarting the host.
//!
//! A kube-runtime watcher follows ConfigMaps labelled `weft.dev/plugin` in
//! the configured namespaces (format: [`package`]). For each change: read
//! the head, fetch its parts, decompress under a size cap, verify the
//! digest, parse the manifest, compile off the async runtime (the engine's
//! digest-keyed cache makes a known version cheap), then publish the new
//! version in the registry in one atomic swap. Calls already running finish
//! on the version they started with.
//!
//! - **Rejection**: anything wrong (no manifest, bad digest, oversize, not a
//!   component, wrong world, compile failure, a name another ConfigMap owns)
//!   leaves the previous version serving and is recorded as a Warning Event
//!   on the ConfigMap, the `weft.dev/plugin-error` annotation, a log line
//!   and `weft_plugin_loads_total{result="rejected"}`.
//! - **Pinning**: the registry keeps replaced versions; every few seconds
//!   the loader lists running Workflows and unloads versions none of their
//!   nodes used (the previous version of each plugin always stays, as the
//!   rollback target). A plugin with `data.pinning: latest` ignores pins.
//! - **Circuit breaker**: the registry counts sandbox faults per version
//!   and rolls back; the loader records the trip (Event, metric, status).
//! - **Removal**: deleting the ConfigMap withdraws the plugin from new work
//!   at once; its versions go when no running Workflow pins them.
//! - **Status**: the loader keeps a `weft.dev/plugin-status` annotation (JSON,
//!   [`PluginStatus`]) on each head ConfigMap, which `weft plugin status` reads:
//!   it works with nothing but API access, on any cluster.
//!
//! - **Configuration** from Secrets and the operator's registry config
//!   ([`secrets`]); **roll-outs** as shadow or canary ([`rollout`]).
//!
//! The loader reads and annotates heads; it writes only the archives of
//! versions a head no longer holds (pinned, or the serving one during a
//! roll-out) and `rollout: aborted` when the breaker stops a candidate.
//! Run one per host (with leader election, the leader's).

mod archive;
mod load;
pub mod package;
mod push;
pub mod rollout;
mod secrets;
mod status;
mod watch;

pub use archive::ARCHIVE_MANAGER;
pub use push::{PUSH_MANAGER, push, push_with};
pub use status::{BreakerStatus, PluginStatus, RetainedVersion, read_status};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Client, ResourceExt};

use weft_plugin::{
    Pinning, Plugin, PluginEngine, Registry, breaker::BreakerConfig, engine::Digest, registry::Trip,
};

use crate::metrics::Metrics;
use package::{ANNOTATION_CLAIMED_AT, Problem, Stored};

/// Most watch events coalesced into one batch.
const MAX_BATCH: usize = 1024;

/// How the loader is set up.
#[derive(Debug, Clone)]
pub struct HotloadConfig {
    /// Namespaces whose plugin ConfigMaps are loaded; empty: all namespaces.
    pub namespaces: Vec<String>,
    /// Namespace of the Workflows whose pins count; `None`: all namespaces.
    pub workflow_namespace: Option<String>,
    /// The largest component (uncompressed) accepted.
    pub max_size: usize,
    /// When the circuit breaker trips.
    pub breaker: BreakerConfig,
    /// How often unpinned versions are unloaded and status refreshed.
    pub prune_every: Duration,
    /// The controller's Workflow cache, when one runs in this process: the
    /// pins are counted from it, not from a list of every Workflow.
    pub workflows: Option<std::sync::Arc<crate::live::LiveWorkflows>>,
}

impl Default for HotloadConfig {
    fn default() -> Self {
        HotloadConfig {
            namespaces: Vec::new(),
            workflow_namespace: None,
            max_size: 64 << 20,
            breaker: BreakerConfig::default(),
            prune_every: Duration::from_secs(2),
            workflows: None,
        }
    }
}

/// Why a plugin ConfigMap was rejected.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The ConfigMap's layout (see [`package`]).
    #[error(transparent)]
    Package(#[from] Problem),
    /// The manifest.
    #[error(transparent)]
    Manifest(#[from] weft_plugin::manifest::Error),
    /// The component (not Wasm, wrong world, compile or link failure).
    #[error(transparent)]
    Load(#[from] weft_plugin::plugin::LoadError),
    /// Another ConfigMap already provides a plugin of this name.
    #[error("plugin {name:?} is already loaded from configmap {other}")]
    Duplicate {
        /// The plugin name.
        name: String,
        /// The ConfigMap that has it.
        other: String,
    },
    /// Another plugin owns a task type this one claims (see
    /// [`weft_plugin::registry::Conflict`] for how the owner is chosen).
    #[error(
        "plugin {plugin:?} claims task type {task_type:?}, which plugin {winner:?}{source_of_winner} already serves ({why}); give one of them a higher `priority` in its manifest, or choose in the registry's defaultForTaskTypes"
    )]
    Conflict {
        /// The rejected plugin.
        plugin: String,
        /// The contested task type.
        task_type: String,
        /// The plugin that keeps it.
        winner: String,
        /// ` (configmap ns/name)` when the winner was hot-loaded.
        source_of_winner: String,
        /// Why the winner keeps it.
        why: String,
    },
    /// A roll-out that cannot start (no serving version beside it, a
    /// middleware).
    #[error("roll-out: {0}")]
    Rollout(String),
    /// A Secret its configuration names is missing or unreadable (loaded
    /// again when the Secret changes).
    #[error("configuration: {0}")]
    Secret(#[from] crate::secrets::SecretError),
    /// A part could not be read from the API.
    #[error("cannot read part {name}: {source}")]
    Fetch {
        /// The part.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl Rejection {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Rejection::Package(p) => p.metric_label(),
            Rejection::Manifest(_) => "manifest",
            Rejection::Load(e) => match e.problem {
                weft_plugin::plugin::LoadProblem::NotWasm => "not_wasm",
                weft_plugin::plugin::LoadProblem::CoreModule => "core_module",
                weft_plugin::plugin::LoadProblem::Compile(_) => "compile",
                weft_plugin::plugin::LoadProblem::WrongWorld { .. } => "wrong_world",
                weft_plugin::plugin::LoadProblem::Link(_) => "link",
                weft_plugin::plugin::LoadProblem::MemoryOverLimit { .. } => "memory_over_limit",
                weft_plugin::plugin::LoadProblem::Properties(_) => "properties",
                weft_plugin::plugin::LoadProblem::Unserved(_) => "unserved_world",
            },
            Rejection::Duplicate { .. } => "duplicate",
            Rejection::Conflict { .. } => "conflict",
            Rejection::Fetch { .. } => "missing_part",
            Rejection::Secret(_) => "secret",
            Rejection::Rollout(_) => "rollout",
        }
    }
}

/// What the loader remembers of one head ConfigMap.
#[derive(Debug, Clone, Default)]
struct Source {
    /// Hash of the ConfigMap's data and binaryData: a change of only
    /// annotations or labels (our own status writes) is not a new version.
    fingerprint: Option<Digest>,
    uid: Option<String>,
    /// The plugin it provides, once a version of it loaded.
    plugin: Option<String>,
    /// Its digest as last seen.
    desired: Option<Digest>,
    error: Option<String>,
    /// The status annotation last written.
    written: Option<String>,
    /// The plugin and digest being compiled now.
    compiling: Option<(String, Digest)>,
    /// The last change was rejected because another plugin owns one of
    /// its task types: retried when that plugin goes away.
    conflict: bool,
    /// The serving version as stored, to archive it when it is replaced
    /// while running workflows pin it.
    stored: Option<Arc<Stored>>,
    /// The Secrets its configuration names, with the resourceVersion it
    /// was configured from (None: missing).
    secrets: secrets::SecretVersions,
    /// What its head asks besides serving: a roll-out or an aborted one
    /// (`stored` then stays the serving version's).
    rollout: Option<package::HeadRollout>,
}

/// A version that compiled and passed every check, ready to publish.
struct Loaded {
    plugin: Plugin,
    pinning: Pinning,
    source: weft_plugin::engine::CompileSource,
    /// When it first served, from its ConfigMap (Unix milliseconds).
    since: Option<i64>,
    /// Keeps its task types marked as loading until it is published.
    loading: weft_plugin::registry::Loading,
    /// The version as stored, for its archive.
    stored: Arc<Stored>,
    /// What the head asks besides serving it.
    rollout: Option<package::HeadRollout>,
}

/// The loader. Create with [`HotLoader::new`], drive with [`HotLoader::run`].
pub struct HotLoader {
    client: Client,
    engine: PluginEngine,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    config: HotloadConfig,
    sources: Mutex<BTreeMap<(String, String), Source>>,
    /// Archive ConfigMaps (namespace, name) by the digest they hold.
    archives: Mutex<BTreeMap<Digest, (String, String)>>,
    trips: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Trip>>>,
    synced: tokio::sync::watch::Sender<bool>,
    /// Plugins from the plugin directory configured from Secrets.
    dir_secrets: Mutex<BTreeMap<String, secrets::SecretVersions>>,
}

fn key_of(cm: &ConfigMap) -> (String, String) {
    (cm.namespace().unwrap_or_default(), cm.name_any())
}

/// The claim time a loader recorded on a head, if any.
fn claimed_at(cm: &ConfigMap) -> Option<i64> {
    cm.annotations()
        .get(ANNOTATION_CLAIMED_AT)
        .and_then(|v| v.trim().parse().ok())
}

fn fingerprint(cm: &ConfigMap) -> Digest {
    let v = serde_json::to_vec(&(&cm.data, &cm.binary_data)).unwrap_or_default();
    Digest::of(&v)
}

impl HotLoader {
    /// A loader publishing into `registry`, compiling with `engine`.
    pub fn new(
        client: Client,
        engine: PluginEngine,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
        config: HotloadConfig,
    ) -> Arc<Self> {
        registry.set_breaker(config.breaker);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        registry.on_trip(move |t| {
            let _ = tx.send(t.clone());
        });
        Arc::new(HotLoader {
            client,
            engine,
            registry,
            metrics,
            config,
            sources: Mutex::new(BTreeMap::new()),
            archives: Mutex::new(BTreeMap::new()),
            trips: Mutex::new(Some(rx)),
            synced: tokio::sync::watch::Sender::new(false),
            dir_secrets: Mutex::new(BTreeMap::new()),
        })
    }

    /// Waits until the ConfigMaps present at start have been loaded (or rejected).
    pub async fn synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// The registry it publishes into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    fn sources(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Source>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }
}
