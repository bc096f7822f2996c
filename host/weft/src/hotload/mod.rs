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

pub mod package;
pub mod rollout;
mod secrets;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::watcher,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_plugin::{
    Manifest, Pinning, Plugin, PluginEngine, Registry, breaker::BreakerConfig, engine::Digest,
    registry::Trip,
};

use crate::api::Workflow;
use crate::metrics::Metrics;
use package::{
    ANNOTATION_CLAIMED_AT, ANNOTATION_ERROR, ANNOTATION_STATUS, Body, Head, LABEL_ARCHIVE,
    LABEL_PLUGIN, Problem, Stored,
};

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
}

impl Default for HotloadConfig {
    fn default() -> Self {
        HotloadConfig {
            namespaces: Vec::new(),
            workflow_namespace: None,
            max_size: 64 << 20,
            breaker: BreakerConfig::default(),
            prune_every: Duration::from_secs(2),
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

/// What the loader knows of a plugin, as kept in the `weft.dev/plugin-status`
/// annotation of its head ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// The plugin name (from the manifest).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plugin: String,
    /// Where the ConfigMap's version stands: `compiling`, `serving`,
    /// `rejected` (the previous version, if any, keeps serving),
    /// `conflict` (another plugin owns one of its task types), `shadow` or
    /// `canary` (rolled out beside the serving version) or `aborted` (its
    /// roll-out was aborted; the serving version stays).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The roll-out under way, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<rollout::RolloutStatus>,
    /// The task-type conflict it is part of, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// The version serving new work (manifest version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The digest serving new work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// The digest the ConfigMap holds (differs from `serving` after a
    /// rejection or a rollback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// `pinned` or `latest`.
    #[serde(default)]
    pub pinning: String,
    /// Other loaded versions, with how many running Workflows pin each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedVersion>,
    /// Running Workflows pinned to the serving digest.
    #[serde(default)]
    pub pins: usize,
    /// Why the last change was rejected, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The circuit breaker's last trip, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerStatus>,
}

/// A loaded version that is not the serving one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetainedVersion {
    /// Its digest.
    pub digest: String,
    /// Its manifest version.
    pub version: String,
    /// Running Workflows pinned to it.
    pub pins: usize,
}

/// The circuit breaker's last trip of a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakerStatus {
    /// The version that faulted.
    pub tripped: String,
    /// The version it was rolled back to (none: it had no earlier version).
    pub rolled_back_to: Option<String>,
    /// Faults counted in the window.
    pub faults: u32,
    /// The last fault.
    pub last_error: String,
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

    fn watch(&self) -> BoxStream<'static, Result<watcher::Event<ConfigMap>, watcher::Error>> {
        self.watch_kind(watcher::Config::default().labels(LABEL_PLUGIN))
    }

    /// A watch of `K` in the plugin namespaces (all when none are set).
    fn watch_kind<K>(
        &self,
        cfg: watcher::Config,
    ) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + 'static,
    {
        use kube::runtime::WatchStreamExt as _;
        // With backoff: an unreachable API server must not become a busy loop.
        if self.config.namespaces.is_empty() {
            watcher::watcher(Api::<K>::all(self.client.clone()), cfg)
                .default_backoff()
                .boxed()
        } else {
            futures::stream::select_all(self.config.namespaces.iter().map(|ns| {
                watcher::watcher(Api::<K>::namespaced(self.client.clone(), ns), cfg.clone())
                    .default_backoff()
                    .boxed()
            }))
            .boxed()
        }
    }

    /// Follows plugin ConfigMaps until `shutdown` resolves.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()> + Send) {
        let mut trips = self
            .trips
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("HotLoader::run is called once");
        // Archived versions first: they are part of what "synced" promises.
        self.load_archives().await;
        self.configure_dir_plugins().await;
        let mut events = self.watch();
        let mut secret_events = self.watch_secrets();
        let mut tick = tokio::time::interval(self.config.prune_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = std::pin::pin!(shutdown);
        // ConfigMaps seen during a (re)list, to notice deletions missed while
        // the watch was down.
        let mut listing: Option<BTreeSet<(String, String)>> = None;
        let mut lists_to_sync = self.config.namespaces.len().max(1);
        loop {
            let first = tokio::select! {
                _ = &mut shutdown => return,
                ev = events.next() => match ev {
                    Some(ev) => ev,
                    None => return,
                },
                Some(trip) = trips.recv() => {
                    self.tripped(trip).await;
                    continue;
                }
                Some(ev) = secret_events.next() => {
                    self.secret_event(ev).await;
                    continue;
                }
                _ = tick.tick() => {
                    // Not before the first sync: until every head has been
                    // read, an archived serving version (a roll-out's) looks
                    // unpinned and would be unloaded and deleted.
                    if *self.synced.borrow() {
                        self.prune().await;
                    }
                    continue;
                }
            };
            // Coalesce what is already queued: only the last state of each
            // ConfigMap matters.
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH
                && let Some(Some(ev)) = events.next().now_or_never()
            {
                batch.push(ev);
            }
            let mut changes: BTreeMap<(String, String), Option<ConfigMap>> = BTreeMap::new();
            let mut listed = 0;
            for ev in batch {
                match ev {
                    Ok(watcher::Event::Init) => listing = Some(BTreeSet::new()),
                    Ok(watcher::Event::InitApply(cm)) => {
                        if let Some(l) = listing.as_mut() {
                            l.insert(key_of(&cm));
                        }
                        changes.insert(key_of(&cm), Some(cm));
                    }
                    Ok(watcher::Event::InitDone) => {
                        listed += 1;
                        if let Some(seen) = listing.take() {
                            let gone: Vec<_> = self
                                .sources()
                                .keys()
                                .filter(|k| {
                                    !seen.contains(*k)
                                        && (self.config.namespaces.is_empty()
                                            || self.config.namespaces.contains(&k.0))
                                })
                                .cloned()
                                .collect();
                            for k in gone {
                                changes.entry(k).or_insert(None);
                            }
                        }
                    }
                    Ok(watcher::Event::Apply(cm)) => {
                        changes.insert(key_of(&cm), Some(cm));
                    }
                    Ok(watcher::Event::Delete(cm)) => {
                        changes.insert(key_of(&cm), None);
                    }
                    Err(e) => tracing::warn!("plugin ConfigMap watch: {e}"),
                }
            }
            for (key, change) in changes {
                match change {
                    Some(cm) => self.apply(cm).await,
                    None => self.deleted(&key).await,
                }
            }
            if lists_to_sync > 0 {
                lists_to_sync = lists_to_sync.saturating_sub(listed);
                if lists_to_sync == 0 {
                    self.synced.send_replace(true);
                }
            }
        }
    }

    /// One head ConfigMap created or changed.
    async fn apply(&self, cm: ConfigMap) {
        let key = key_of(&cm);
        let fp = fingerprint(&cm);
        {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            if s.fingerprint == Some(fp) {
                return;
            }
            s.fingerprint = Some(fp);
            s.uid = cm.uid();
        }
        let started = Instant::now();
        let result = self.load(&cm).await;
        if let Some(s) = self.sources().get_mut(&key) {
            s.compiling = None;
        }
        match result {
            Ok(loaded) => self.loaded(&key, &cm, loaded, started.elapsed()).await,
            Err(rejection) => self.rejected(&key, &cm, rejection).await,
        }
    }

    /// A new version passed every check: publish it (or roll it out, as
    /// its head asks).
    async fn loaded(&self, key: &(String, String), cm: &ConfigMap, l: Loaded, took: Duration) {
        match l.rollout {
            Some(package::HeadRollout::Start(mode)) => {
                return self.roll_out(key, cm, l, mode).await;
            }
            Some(package::HeadRollout::Aborted) => return self.keep_stable(key, cm, l).await,
            None => {}
        }
        let name = l.plugin.manifest().name.clone();
        let version = l.plugin.manifest().version.clone();
        let digest = l.plugin.digest();
        let (previous_name, previous_stored) = {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            let prev = s.plugin.replace(name.clone());
            s.desired = Some(digest);
            s.error = None;
            s.conflict = false;
            s.rollout = None;
            (prev, s.stored.replace(l.stored.clone()))
        };
        if let Some(prev) = previous_name.filter(|p| *p != name) {
            self.registry.withdraw(&prev);
        }
        self.registry.set_pinning(&name, l.pinning);
        let claimed = l
            .since
            .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().as_millisecond());
        self.registry.set_claimed_at(&name, claimed);
        if l.since.is_none() {
            self.annotate(key, json!({ANNOTATION_CLAIMED_AT: claimed.to_string()}))
                .await;
        }
        // A candidate being rolled out is promoted by serving it.
        self.registry.abort_rollout(&name);
        let replaced = self.registry.publish(l.plugin);
        drop(l.loading);
        if let Some(old) = previous_stored.filter(|o| Some(o.digest) == replaced) {
            self.archive_if_pinned(key, &name, &old).await;
        }
        self.metrics.plugin_load_latency(took);
        self.metrics
            .plugin_load(&name, "loaded", &format!("{:?}", l.source).to_lowercase());
        tracing::info!(
            configmap = %format!("{}/{}", key.0, key.1),
            plugin = %name, %version, %digest,
            replaced = ?replaced.map(|d| d.to_string()),
            compile = ?l.source, took_ms = took.as_millis() as u64,
            "plugin loaded from ConfigMap"
        );
        if cm.annotations().contains_key(ANNOTATION_ERROR) {
            self.annotate(key, json!({ANNOTATION_ERROR: null})).await;
        }
        self.publish_event(
            cm,
            "Normal",
            "PluginLoaded",
            &format!("plugin {name} {version} ({digest}) is serving"),
        )
        .await;
        self.write_status(key, &BTreeMap::new()).await;
        self.displaced(&name).await;
        self.retry_conflicts().await;
    }

    /// A version was refused: the previous one (if any) keeps serving.
    async fn rejected(&self, key: &(String, String), cm: &ConfigMap, rejection: Rejection) {
        let message = rejection.to_string();
        let conflict = matches!(rejection, Rejection::Conflict { .. });
        let plugin = self
            .sources()
            .get(key)
            .and_then(|s| s.plugin.clone())
            .or_else(|| cm.labels().get(LABEL_PLUGIN).cloned())
            .unwrap_or_default();
        {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            s.error = Some(message.clone());
            s.conflict = conflict;
            s.desired = Head::parse(cm).ok().and_then(|h| h.digest);
        }
        self.metrics
            .plugin_load(&plugin, "rejected", rejection.metric_label());
        tracing::warn!(
            configmap = %format!("{}/{}", key.0, key.1),
            reason = rejection.metric_label(),
            "plugin ConfigMap rejected, the previous version keeps serving: {message}"
        );
        self.annotate(key, json!({ANNOTATION_ERROR: message.clone()}))
            .await;
        let reason = if conflict {
            "PluginConflict"
        } else {
            "PluginRejected"
        };
        self.publish_event(cm, "Warning", reason, &message).await;
        self.write_status(key, &BTreeMap::new()).await;
    }

    /// After `winner` was published: tells the owners of other plugins that
    /// lost a task type to it (a higher priority, or the operator's choice).
    async fn displaced(&self, winner: &str) {
        let snap = self.registry.snapshot();
        let lost: Vec<_> = snap
            .conflicts()
            .values()
            .filter(|c| c.winner == winner)
            .cloned()
            .collect();
        for c in lost {
            for loser in &c.losers {
                let Some(key) = self.source_of(loser) else {
                    tracing::warn!(plugin = %loser, "{c}");
                    continue;
                };
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
                if let Ok(cm) = api.get(&key.1).await {
                    self.publish_event(&cm, "Warning", "PluginConflict", &c.to_string())
                        .await;
                }
                self.write_status(&key, &BTreeMap::new()).await;
            }
        }
    }

    /// The head ConfigMap that provides plugin `name`.
    fn source_of(&self, name: &str) -> Option<(String, String)> {
        self.sources()
            .iter()
            .find(|(_, s)| s.plugin.as_deref() == Some(name))
            .map(|(k, _)| k.clone())
    }

    /// Assemble, check and compile one head ConfigMap.
    async fn load(&self, cm: &ConfigMap) -> Result<Loaded, Rejection> {
        let (ns, name) = key_of(cm);
        let origin = format!("configmap {ns}/{name}");
        let head = Head::parse(cm)?;
        let manifest = Manifest::parse(&head.manifest, &origin)?;
        if let Some(other) = self
            .source_of(&manifest.name)
            .filter(|k| *k != (ns.clone(), name.clone()))
        {
            return Err(Rejection::Duplicate {
                name: manifest.name,
                other: format!("{}/{}", other.0, other.1),
            });
        }
        // Who claimed a task type first: when its plugin first served, as
        // recorded on its ConfigMap (creationTimestamp counts whole seconds,
        // too coarse for two pushes in a row); one that never served comes
        // after every plugin that does.
        let since = claimed_at(cm);
        if let Some(c) = self
            .registry
            .snapshot()
            .would_lose(&manifest, since.unwrap_or(i64::MAX))
        {
            let source_of_winner = self
                .source_of(&c.winner)
                .map(|(n, m)| format!(" (configmap {n}/{m})"))
                .unwrap_or_default();
            return Err(Rejection::Conflict {
                plugin: manifest.name,
                task_type: c.task_type,
                winner: c.winner,
                source_of_winner,
                why: c.why,
            });
        }
        // Its Secrets, as missing until read: a change to any of them loads
        // it again if this version is rejected.
        let named = crate::secrets::refs(&manifest.config)?;
        if let Some(s) = self.sources().get_mut(&(ns.clone(), name.clone())) {
            s.secrets = named
                .into_iter()
                .map(|(_, r)| ((ns.clone(), r.name), None))
                .collect();
        }
        // From here until it is published or rejected, work for its task
        // types waits for this version.
        let loading = self
            .registry
            .begin_loading(&manifest.name, &manifest.task_types);
        if let Some(d) = head.digest {
            let key = (ns.clone(), name.clone());
            if let Some(s) = self.sources().get_mut(&key) {
                s.compiling = Some((manifest.name.clone(), d));
            }
            self.write_status(&key, &BTreeMap::new()).await;
        }
        let packed = match head.body {
            Body::Inline(b) => b,
            Body::Parts(names) => self.fetch_parts(&ns, names).await?,
        };
        let engine = self.engine.clone();
        let cap = self.config.max_size;
        let digest = head.digest;
        let pinning = head.pinning;
        let rollout = head.rollout;
        let manifest_text = head.manifest.clone();
        let compiled = tokio::task::spawn_blocking(move || -> Result<_, Rejection> {
            let (bytes, digest) = package::unpack(&packed, digest, cap)?;
            let stored = Arc::new(Stored {
                manifest: manifest_text,
                digest,
                pinning,
                packed,
            });
            let (plugin, source) = Plugin::load(&engine, &bytes, manifest, &origin)?;
            Ok((plugin, source, stored))
        })
        .await
        .unwrap_or_else(|e| {
            Err(Rejection::Load(weft_plugin::plugin::LoadError {
                origin: format!("configmap {ns}/{name}"),
                problem: weft_plugin::plugin::LoadProblem::Compile(format!(
                    "compilation panicked: {e}"
                )),
            }))
        });
        let (plugin, source, stored) = compiled?;
        let (plugin, versions) = self.configure(&plugin, &ns).await?;
        if let Some(s) = self.sources().get_mut(&(ns.clone(), name.clone())) {
            s.secrets = versions;
        }
        Ok(Loaded {
            plugin,
            pinning,
            source,
            since,
            loading,
            stored,
            rollout,
        })
    }

    /// Reads the parts of a split component, under the size cap.
    async fn fetch_parts(&self, ns: &str, names: Vec<String>) -> Result<Vec<u8>, Rejection> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let mut packed = Vec::new();
        for part in names {
            let cm = api.get(&part).await.map_err(|source| Rejection::Fetch {
                name: part.clone(),
                source,
            })?;
            let bytes = package::part_bytes(&cm).ok_or_else(|| Problem::Part {
                name: part.clone(),
                problem: format!("no binaryData.{}", package::KEY_PART),
            })?;
            if packed.len() + bytes.len() > self.config.max_size {
                return Err(Problem::TooLarge {
                    limit: self.config.max_size,
                }
                .into());
            }
            packed.extend_from_slice(bytes);
        }
        Ok(packed)
    }

    /// Writes a replaced version that running workflows pin as an archive
    /// ConfigMap, so a restarted controller can still serve them (without
    /// it, after a restart only each plugin's current version would load and
    /// pinned workflows would move to it). Unpinned: nothing to keep.
    async fn archive_if_pinned(&self, key: &(String, String), plugin: &str, old: &Stored) {
        match self.pins().await {
            Ok(pins) if !pins.contains_key(&(plugin.to_string(), old.digest)) => return,
            Ok(_) => {}
            // Unknown: keep it; the next prune deletes it if nobody pins it.
            Err(e) => tracing::debug!("cannot list Workflows for plugin pins: {e}"),
        }
        self.write_archive(key, plugin, old).await;
    }

    /// Writes `old` of `plugin` (head `key`) as an archive ConfigMap, which
    /// the loader loads on start.
    async fn write_archive(&self, key: &(String, String), plugin: &str, old: &Stored) {
        if self.archives().contains_key(&old.digest) {
            return;
        }
        let packed = package::archive(&key.1, plugin, old);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let apply = PatchParams::apply(ARCHIVE_MANAGER).force();
        for cm in packed.parts.iter().chain([&packed.head]) {
            let name = cm.name_any();
            if let Err(e) = api.patch(&name, &apply, &Patch::Apply(cm)).await {
                tracing::warn!(configmap = %format!("{}/{name}", key.0), "cannot archive pinned plugin version {}: {e}", old.digest);
                return;
            }
            self.metrics.api_write("configmap");
        }
        tracing::info!(plugin, digest = %old.digest, configmap = %format!("{}/{}", key.0, packed.head.name_any()), "archived a plugin version its head no longer holds");
        self.archives()
            .insert(old.digest, (key.0.clone(), packed.head.name_any()));
    }

    fn archives(&self) -> std::sync::MutexGuard<'_, BTreeMap<Digest, (String, String)>> {
        self.archives.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At start: loads every archived version (kept, not served), so the
    /// workflows pinned to them before a restart finish on them.
    async fn load_archives(&self) {
        let namespaces: Vec<Option<String>> = if self.config.namespaces.is_empty() {
            vec![None]
        } else {
            self.config.namespaces.iter().cloned().map(Some).collect()
        };
        for ns in namespaces {
            let api: Api<ConfigMap> = match &ns {
                Some(ns) => Api::namespaced(self.client.clone(), ns),
                None => Api::all(self.client.clone()),
            };
            let list = match api.list(&ListParams::default().labels(LABEL_ARCHIVE)).await {
                Ok(l) => l.items,
                Err(e) => {
                    tracing::warn!("cannot list archived plugin versions: {e}");
                    continue;
                }
            };
            for cm in list {
                let key = key_of(&cm);
                match self.load_archive(&cm).await {
                    Ok(plugin) => {
                        let digest = plugin.digest();
                        tracing::info!(plugin = %plugin.manifest().name, %digest, configmap = %format!("{}/{}", key.0, key.1), "archived plugin version loaded for pinned workflows");
                        self.registry.retain(plugin);
                        self.archives().insert(digest, key);
                    }
                    Err(e) => {
                        tracing::warn!(configmap = %format!("{}/{}", key.0, key.1), "cannot load archived plugin version: {e}")
                    }
                }
            }
        }
    }

    async fn load_archive(&self, cm: &ConfigMap) -> Result<Plugin, Rejection> {
        let (ns, name) = key_of(cm);
        let origin = format!("configmap {ns}/{name}");
        let head = Head::parse(cm)?;
        let manifest = Manifest::parse(&head.manifest, &origin)?;
        let packed = match head.body {
            Body::Inline(b) => b,
            Body::Parts(names) => self.fetch_parts(&ns, names).await?,
        };
        let (engine, cap, digest) = (self.engine.clone(), self.config.max_size, head.digest);
        tokio::task::spawn_blocking(move || -> Result<Plugin, Rejection> {
            let (bytes, _) = package::unpack(&packed, digest, cap)?;
            Ok(Plugin::load(&engine, &bytes, manifest, &origin)?.0)
        })
        .await
        .map_err(|e| {
            Rejection::Load(weft_plugin::plugin::LoadError {
                origin: format!("configmap {ns}/{name}"),
                problem: weft_plugin::plugin::LoadProblem::Compile(format!("panicked: {e}")),
            })
        })?
    }

    /// Deletes the archives of versions no running workflow pins (a
    /// rollback target stays loaded in memory, but needs no archive: only
    /// pins must survive a restart).
    async fn prune_archives(&self, pins: &BTreeMap<(String, Digest), usize>) {
        let stable = self.rollout_stables();
        let gone: Vec<(Digest, (String, String))> = self
            .archives()
            .iter()
            .filter(|(d, _)| !pins.keys().any(|(_, p)| p == *d) && !stable.contains(*d))
            .map(|(d, k)| (*d, k.clone()))
            .collect();
        for (digest, (ns, name)) in gone {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
            // Part by part (list and delete, no deletecollection: the Role
            // grants only what the controller uses).
            let parts = ListParams::default().labels(&format!("{}={name}", package::LABEL_PART));
            for part in api.list(&parts).await.map(|l| l.items).unwrap_or_default() {
                let _ = api.delete(&part.name_any(), &Default::default()).await;
            }
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::debug!("cannot delete plugin archive {ns}/{name}: {e}");
                    continue;
                }
            }
            self.metrics.api_write("configmap");
            tracing::info!(%digest, configmap = %format!("{ns}/{name}"), "plugin archive deleted: no running workflow pins it");
            self.archives().remove(&digest);
        }
    }

    /// Loads again the ConfigMaps that lost a task-type conflict: the
    /// plugin that beat them may be gone.
    async fn retry_conflicts(&self) {
        let keys: Vec<_> = {
            let mut sources = self.sources();
            sources
                .iter_mut()
                .filter(|(_, s)| s.conflict)
                .map(|(k, s)| {
                    s.fingerprint = None;
                    k.clone()
                })
                .collect()
        };
        for key in keys {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
            if let Ok(cm) = api.get(&key.1).await {
                Box::pin(self.apply(cm)).await;
            }
        }
    }

    /// A head ConfigMap was deleted: new work no longer gets its plugin.
    async fn deleted(&self, key: &(String, String)) {
        let Some(source) = self.sources().remove(key) else {
            return;
        };
        if let Some(name) = source.plugin {
            if let Some(d) = self.registry.withdraw(&name) {
                tracing::info!(
                    configmap = %format!("{}/{}", key.0, key.1),
                    plugin = %name, digest = %d,
                    "plugin ConfigMap deleted: no longer serving new work; unloading once unpinned"
                );
            }
            self.retry_conflicts().await;
            self.prune().await;
        }
    }

    /// The breaker rolled a plugin back (or could not).
    async fn tripped(&self, trip: Trip) {
        if trip.rollout_aborted {
            return self.candidate_tripped(trip).await;
        }
        self.metrics.plugin_rollback(&trip.plugin);
        let key = self
            .sources()
            .iter()
            .find(|(_, s)| s.plugin.as_deref() == Some(trip.plugin.as_str()))
            .map(|(k, _)| k.clone());
        let message = match trip.to {
            Some(to) => format!(
                "plugin {} {} faulted {} times; rolled back to {to}: {}",
                trip.plugin, trip.from, trip.faults, trip.last_error
            ),
            None => format!(
                "plugin {} {} faulted {} times and has no earlier version to roll back to: {}",
                trip.plugin, trip.from, trip.faults, trip.last_error
            ),
        };
        let Some(key) = key else { return };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        if let Ok(cm) = api.get(&key.1).await {
            self.publish_event(&cm, "Warning", "PluginRolledBack", &message)
                .await;
        }
        self.write_status(&key, &BTreeMap::new()).await;
    }

    /// Unloads versions no running Workflow pins, and refreshes status.
    pub async fn prune(&self) {
        let pins = match self.pins().await {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("cannot list Workflows for plugin pins: {e}");
                return;
            }
        };
        for (name, digest) in self
            .registry
            .prune(|n, d| pins.contains_key(&(n.to_string(), d)))
        {
            let snap = self.registry.snapshot();
            if snap.version(digest).is_none() {
                self.engine.forget(digest);
            }
            self.metrics.plugin_unload(&name);
            tracing::info!(plugin = %name, %digest, "plugin version unloaded: no running workflow pins it");
        }
        self.prune_archives(&pins).await;
        let keys: Vec<_> = self.sources().keys().cloned().collect();
        for key in keys {
            self.write_status(&key, &pins).await;
        }
    }

    /// (plugin, digest) -> running Workflows whose nodes used it.
    async fn pins(&self) -> Result<BTreeMap<(String, Digest), usize>, kube::Error> {
        let api: Api<Workflow> = match &self.config.workflow_namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut pins = BTreeMap::new();
        for wf in api.list(&ListParams::default()).await? {
            let Some(status) = wf.status else { continue };
            if status.phase.is_terminal() {
                continue;
            }
            let used: BTreeSet<(String, Digest)> = status
                .nodes
                .values()
                .filter_map(|n| n.plugin.as_ref())
                .filter_map(|p| Some((p.name.clone(), Digest::parse(&p.digest)?)))
                .collect();
            for u in used {
                *pins.entry(u).or_insert(0) += 1;
            }
        }
        Ok(pins)
    }

    /// The status of the plugin of one head ConfigMap.
    pub fn status(
        &self,
        key: &(String, String),
        pins: &BTreeMap<(String, Digest), usize>,
    ) -> Option<PluginStatus> {
        let source = self.sources().get(key).cloned()?;
        let snap = self.registry.snapshot();
        let name = source
            .plugin
            .clone()
            .or_else(|| source.compiling.as_ref().map(|c| c.0.clone()))
            .unwrap_or_default();
        let conflict = snap
            .conflicts()
            .values()
            .find(|c| c.losers.contains(&name))
            .map(|c| c.to_string());
        let current = snap.plugins().get(&name);
        let pin = |d: Digest| pins.get(&(name.clone(), d)).copied().unwrap_or(0);
        let retained = snap
            .retained()
            .iter()
            .filter(|(_, p)| p.manifest().name == name)
            .map(|(d, p)| RetainedVersion {
                digest: d.to_string(),
                version: p.manifest().version.clone(),
                pins: pin(*d),
            })
            .collect();
        let trips = self.registry.trips();
        let rollout = snap.rollout(&name).map(|r| rollout::status(&snap, r));
        let state = if source.compiling.is_some() {
            "compiling"
        } else if source.conflict || conflict.is_some() {
            "conflict"
        } else if source.error.is_some() {
            "rejected"
        } else if let Some(r) = &rollout {
            if r.mode == weft_plugin::rollout::RolloutMode::Shadow {
                "shadow"
            } else {
                "canary"
            }
        } else if source.rollout == Some(package::HeadRollout::Aborted) {
            "aborted"
        } else if current.is_some() {
            "serving"
        } else {
            "withdrawn"
        };
        Some(PluginStatus {
            plugin: name.clone(),
            state: state.into(),
            rollout,
            conflict,
            version: current.map(|p| p.manifest().version.clone()),
            serving: current.map(|p| p.digest().to_string()),
            desired: source
                .compiling
                .map(|c| c.1)
                .or(source.desired)
                .map(|d| d.to_string()),
            pinning: match snap.pinning(&name) {
                Pinning::Pinned => "pinned".into(),
                Pinning::Latest => "latest".into(),
            },
            retained,
            pins: current.map(|p| pin(p.digest())).unwrap_or(0),
            error: source.error.clone(),
            breaker: trips.get(&name).map(|t| BreakerStatus {
                tripped: t.from.to_string(),
                rolled_back_to: t.to.map(|d| d.to_string()),
                faults: t.faults,
                last_error: t.last_error.clone(),
            }),
        })
    }

    async fn write_status(&self, key: &(String, String), pins: &BTreeMap<(String, Digest), usize>) {
        let Some(status) = self.status(key, pins) else {
            return;
        };
        let text = serde_json::to_string(&status).unwrap_or_default();
        if self.sources().get(key).and_then(|s| s.written.clone()) == Some(text.clone()) {
            return;
        }
        if self.annotate(key, json!({ANNOTATION_STATUS: text})).await
            && let Some(s) = self.sources().get_mut(key)
        {
            s.written = Some(text);
        }
    }

    async fn annotate(&self, key: &(String, String), annotations: serde_json::Value) -> bool {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let patch = json!({"metadata": {"annotations": annotations}});
        match api
            .patch(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.metrics.api_write("configmap");
                true
            }
            Err(e) => {
                tracing::debug!("cannot annotate configmap {}/{}: {e}", key.0, key.1);
                false
            }
        }
    }

    async fn publish_event(&self, cm: &ConfigMap, kind: &str, reason: &str, message: &str) {
        crate::events::record_event(&self.client, &self.metrics, cm, kind, reason, message).await;
    }
}

/// Reads the status annotations of every plugin ConfigMap in `namespace`
/// (all when `None`), for `weft plugin status`.
pub async fn read_status(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<(String, String, Option<PluginStatus>, Option<String>)>, kube::Error> {
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = api
        .list(&ListParams::default().labels(LABEL_PLUGIN))
        .await?;
    Ok(list
        .items
        .into_iter()
        .map(|cm| {
            let status = cm
                .annotations()
                .get(ANNOTATION_STATUS)
                .and_then(|s| serde_json::from_str(s).ok());
            let desired = cm
                .data
                .as_ref()
                .and_then(|d| d.get(package::KEY_DIGEST).cloned());
            (
                cm.namespace().unwrap_or_default(),
                cm.name_any(),
                status,
                desired,
            )
        })
        .collect())
}

/// The field manager of `weft plugin push`.
pub const PUSH_MANAGER: &str = "weft-plugin-push";

/// The field manager of the loader's archives of pinned versions.
pub const ARCHIVE_MANAGER: &str = "weft-plugin-archive";

/// Creates or updates the ConfigMap(s) of a plugin (server-side apply):
/// the parts first, then the head, so a head never references a missing
/// part; then the parts are made owned by the head (deleting it deletes
/// them) and parts of earlier pushes are deleted. What `weft plugin push` does.
pub async fn push(
    client: &Client,
    namespace: &str,
    name: &str,
    component: &[u8],
    manifest: &str,
    pinning: Pinning,
) -> anyhow::Result<package::Packed> {
    push_with(client, namespace, name, component, manifest, pinning, None).await
}

/// [`push`] as a shadow or canary of the serving version (`rollout`), or
/// plainly (`None`: it serves once loaded, promoting any candidate).
pub async fn push_with(
    client: &Client,
    namespace: &str,
    name: &str,
    component: &[u8],
    manifest: &str,
    pinning: Pinning,
    rollout: Option<weft_plugin::rollout::RolloutMode>,
) -> anyhow::Result<package::Packed> {
    use anyhow::Context as _;
    let parsed = Manifest::parse(manifest, "--manifest")?;
    let mut packed = package::pack(name, &parsed.name, component, manifest, pinning);
    if let Some(mode) = rollout {
        packed
            .head
            .data
            .get_or_insert_default()
            .extend(package::HeadRollout::data(mode));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let apply = PatchParams::apply(PUSH_MANAGER).force();
    for part in &packed.parts {
        let part_name = part.name_any();
        api.patch(&part_name, &apply, &Patch::Apply(part))
            .await
            .with_context(|| format!("writing configmap {namespace}/{part_name}"))?;
    }
    let head = api
        .patch(name, &apply, &Patch::Apply(&packed.head))
        .await
        .with_context(|| format!("writing configmap {namespace}/{name}"))?;
    let owner = package::owned_by(&head);
    let current: BTreeSet<String> = packed.parts.iter().map(|p| p.name_any()).collect();
    for part in api
        .list(&ListParams::default().labels(&format!("{}={name}", package::LABEL_PART)))
        .await?
    {
        let part_name = part.name_any();
        if current.contains(&part_name) {
            let patch = json!({"metadata": {"ownerReferences": [owner]}});
            api.patch(&part_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("owning configmap {namespace}/{part_name}"))?;
        } else {
            let _ = api.delete(&part_name, &Default::default()).await;
        }
    }
    Ok(packed)
}
