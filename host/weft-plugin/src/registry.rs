//! The plugin registry, after Flyte's: task type -> plugin, with an enabled
//! list and a default per task type; and named middleware slots, like
//! flyteadmin's `RegisterDefault`/`Get`.
//!
//! The registry is an immutable snapshot behind an atomic pointer. Readers
//! take a snapshot (one atomic load) and keep using the plugin version they
//! got even while a new version is swapped in; writers build a new snapshot
//! and publish it in one step, so no reader ever sees half a change.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::Arc,
};

use arc_swap::ArcSwap;

pub use crate::breaker::{BreakerConfig, Trip};
pub use crate::rollout::{Rollout, RolloutMode, ShadowStats};
use crate::{
    engine::{CompileSource, Digest, PluginEngine},
    manifest::{Manifest, World},
    plugin::{CallError, LoadError, MiddlewarePlugin, Plugin, TaskPlugin},
    webapi::WebApiPlugin,
};

/// The middleware slot of the admin API's unary calls.
pub const UNARY_MIDDLEWARE: &str = "unary-middleware";

/// Registry lookups that fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No enabled plugin serves the task type.
    #[error("no plugin serves task type {task_type:?} (known task types: {known})")]
    UnknownTaskType {
        /// The task type asked for.
        task_type: String,
        /// The task types that are served, comma-separated.
        known: String,
    },
    /// A plugin is configured as the default for a task type it does not serve.
    #[error(
        "plugin {plugin:?} is configured as the default for task type {task_type:?} but is not loaded, enabled, or does not serve it"
    )]
    BadDefault {
        /// The task type.
        task_type: String,
        /// The plugin.
        plugin: String,
    },
}

/// How the operator configures the registry (Flyte's `tasks.task-plugins`
/// and per-plugin config): `weft controller --registry-config FILE`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryConfig {
    /// Plugins that may serve; `None` enables every loaded plugin.
    #[serde(default)]
    pub enabled: Option<BTreeSet<String>>,
    /// Which plugin serves a task type that several plugins claim.
    #[serde(default)]
    pub default_for_task_types: BTreeMap<String, String>,
    /// Ordered middleware per slot; plugins not listed run after, by name.
    #[serde(default)]
    pub middleware_order: BTreeMap<String, Vec<String>>,
    /// The operator's settings per plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSettings>,
}

/// The operator's settings for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSettings {
    /// Overrides of the manifest's `config`, key by key (top level); values
    /// may be Secret references (`valueFrom.secretKeyRef`), read from the
    /// controller's plugin namespace.
    #[serde(default)]
    pub config: serde_json::Map<String, serde_json::Value>,
}

/// Whether running workflows keep the plugin version they started with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Pinning {
    /// A workflow keeps the digest it first used until it finishes (the
    /// default): an upgrade never changes a running workflow's behaviour.
    #[default]
    Pinned,
    /// Every call uses the current version, running workflows included.
    Latest,
}

/// Loaded versions beyond the current ones: what pinned workflows and
/// rollbacks need. Cloned with each snapshot (it only holds `Arc`s).
#[derive(Debug, Default, Clone)]
struct Versions {
    /// Loaded versions that are not current, by digest.
    retained: BTreeMap<Digest, Plugin>,
    /// Earlier good versions per plugin name, oldest first (rollback targets).
    history: BTreeMap<String, Vec<Digest>>,
    /// Pinning policy per plugin name (absent: [`Pinning::Pinned`]).
    policies: BTreeMap<String, Pinning>,
    /// When each plugin name first claimed its task types (e.g. its
    /// ConfigMap's creation time, Unix milliseconds); absent: loaded at
    /// start, which counts as first.
    claimed_at: BTreeMap<String, i64>,
    /// The candidate version of a plugin being rolled out (shadow or
    /// canary), by plugin name; the candidate itself is in `retained`.
    rollouts: BTreeMap<String, Rollout>,
}

/// A task type that several enabled plugins claim, and which one owns it.
/// Ownership is decided the same way on every replica and after every
/// restart: the operator's `defaultForTaskTypes`, else the higher manifest
/// `priority`, else the plugin that claimed it first, else the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The task type.
    pub task_type: String,
    /// The plugin that serves it.
    pub winner: String,
    /// The plugins that claim it and do not serve it.
    pub losers: Vec<String>,
    /// Why the winner won, for messages.
    pub why: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "task type {:?} is claimed by {} and {}; {} serves it ({})",
            self.task_type,
            self.winner,
            self.losers.join(", "),
            self.winner,
            self.why
        )
    }
}

/// One claimant of a task type, ranked.
#[derive(Debug, Clone)]
struct Claim {
    name: String,
    priority: i32,
    since: i64,
}

impl Claim {
    /// Ordering key: the best claim is the smallest.
    fn key(&self) -> (std::cmp::Reverse<i32>, i64, &str) {
        (std::cmp::Reverse(self.priority), self.since, &self.name)
    }
}

/// Picks the owner of `task_type` among `claims` (non-empty); `Err` when
/// the operator named a default that does not claim it.
fn decide(
    task_type: &str,
    claims: &[Claim],
    config: &RegistryConfig,
) -> Result<(usize, String), Error> {
    if let Some(chosen) = config.default_for_task_types.get(task_type) {
        return match claims.iter().position(|c| &c.name == chosen) {
            Some(i) => Ok((i, "the operator's defaultForTaskTypes".into())),
            None => Err(Error::BadDefault {
                task_type: task_type.into(),
                plugin: chosen.clone(),
            }),
        };
    }
    let (i, best) = claims
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.key().cmp(&b.1.key()))
        .expect("at least one claim");
    let why = if claims
        .iter()
        .any(|c| c.name != best.name && c.priority < best.priority)
    {
        format!("higher priority {}", best.priority)
    } else if claims
        .iter()
        .any(|c| c.name != best.name && c.since > best.since)
    {
        "it was loaded first".to_string()
    } else {
        "same priority and load time: first by name".to_string()
    };
    Ok((i, why))
}

impl Versions {
    fn claim(&self, m: &Manifest) -> Claim {
        Claim {
            name: m.name.clone(),
            priority: m.priority,
            since: self.claimed_at.get(&m.name).copied().unwrap_or(i64::MIN),
        }
    }
}

/// One consistent view of the registry.
#[derive(Debug, Default)]
pub struct Snapshot {
    plugins: BTreeMap<String, Plugin>,
    versions: Versions,
    task_types: BTreeMap<String, Arc<TaskPlugin>>,
    /// Task types served by web-API plugins (none a k8s-task plugin serves).
    webapi: BTreeMap<String, Arc<WebApiPlugin>>,
    conflicts: BTreeMap<String, Conflict>,
    config: RegistryConfig,
    slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>>,
    problems: Vec<Error>,
}

impl Snapshot {
    fn build(
        plugins: BTreeMap<String, Plugin>,
        versions: Versions,
        config: &RegistryConfig,
    ) -> Snapshot {
        let enabled = |name: &str| config.enabled.as_ref().is_none_or(|e| e.contains(name));
        let mut claims: BTreeMap<String, Vec<Arc<TaskPlugin>>> = BTreeMap::new();
        let mut slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>> = BTreeMap::new();
        let mut webapi: BTreeMap<String, Arc<WebApiPlugin>> = BTreeMap::new();
        for (name, p) in &plugins {
            if !enabled(name) {
                continue;
            }
            match p {
                Plugin::Task(t) => {
                    for tt in &t.manifest().task_types {
                        claims.entry(tt.clone()).or_default().push(t.clone());
                    }
                }
                Plugin::Middleware(m) => {
                    slots
                        .entry(UNARY_MIDDLEWARE.into())
                        .or_default()
                        .push(m.clone());
                }
                Plugin::WebApi(w) => {
                    // The highest priority serves, then the first by name.
                    for tt in &w.manifest().task_types {
                        let e = webapi.entry(tt.clone()).or_insert_with(|| w.clone());
                        if w.manifest().priority > e.manifest().priority {
                            *e = w.clone();
                        }
                    }
                }
            }
        }
        for (slot, list) in &mut slots {
            let order = config.middleware_order.get(slot);
            let rank = |n: &str| {
                order
                    .and_then(|o| o.iter().position(|x| x == n))
                    .unwrap_or(usize::MAX)
            };
            list.sort_by(|a, b| {
                rank(a.name())
                    .cmp(&rank(b.name()))
                    .then(a.name().cmp(b.name()))
            });
        }
        let mut task_types = BTreeMap::new();
        let mut conflicts = BTreeMap::new();
        let mut problems = Vec::new();
        for (tt, list) in claims {
            let ranked: Vec<Claim> = list.iter().map(|p| versions.claim(p.manifest())).collect();
            match decide(&tt, &ranked, config) {
                Ok((i, why)) => {
                    if list.len() > 1 {
                        let losers = ranked
                            .iter()
                            .filter(|c| c.name != ranked[i].name)
                            .map(|c| c.name.clone())
                            .collect();
                        conflicts.insert(
                            tt.clone(),
                            Conflict {
                                task_type: tt.clone(),
                                winner: ranked[i].name.clone(),
                                losers,
                                why,
                            },
                        );
                    }
                    task_types.insert(tt, list[i].clone());
                }
                Err(e) => problems.push(e),
            }
        }
        for (tt, plugin) in &config.default_for_task_types {
            if !task_types.contains_key(tt)
                && !problems
                    .iter()
                    .any(|p| matches!(p, Error::BadDefault { task_type, .. } if task_type == tt))
            {
                problems.push(Error::BadDefault {
                    task_type: tt.clone(),
                    plugin: plugin.clone(),
                });
            }
        }
        // A k8s-task plugin claiming the same type serves it.
        webapi.retain(|tt, _| !task_types.contains_key(tt));
        Snapshot {
            plugins,
            versions,
            task_types,
            webapi,
            conflicts,
            config: config.clone(),
            slots,
            problems,
        }
    }

    /// The task type a plugin with `manifest`, claiming since `since`, would
    /// not own if it were published now (`None`: it would own all of its
    /// task types). A name that already claims keeps its claim time (an
    /// upgrade is not a newcomer); a newcomer that never served passes
    /// `i64::MAX`, so it loses any tie to a plugin that serves. A new
    /// version that would lose a task type is rejected by the hot loader,
    /// so an upgrade never takes work away silently.
    pub fn would_lose(&self, manifest: &Manifest, since: i64) -> Option<Conflict> {
        let enabled = |name: &str| {
            self.config
                .enabled
                .as_ref()
                .is_none_or(|e| e.contains(name))
        };
        if manifest.world != World::K8sTaskPlugin || !enabled(&manifest.name) {
            return None;
        }
        let mut me = self.versions.claim(manifest);
        me.since = self
            .versions
            .claimed_at
            .get(&manifest.name)
            .copied()
            .unwrap_or(since);
        for tt in &manifest.task_types {
            let mut ranked = vec![me.clone()];
            for (name, p) in &self.plugins {
                if *name == manifest.name || !enabled(name) {
                    continue;
                }
                if let Plugin::Task(t) = p
                    && t.manifest().task_types.contains(tt)
                {
                    ranked.push(self.versions.claim(t.manifest()));
                }
            }
            if ranked.len() == 1 {
                continue;
            }
            if let Ok((i, why)) = decide(tt, &ranked, &self.config)
                && i != 0
            {
                return Some(Conflict {
                    task_type: tt.clone(),
                    winner: ranked[i].name.clone(),
                    losers: vec![manifest.name.clone()],
                    why,
                });
            }
        }
        None
    }

    /// Task types several plugins claim, with their owner.
    pub fn conflicts(&self) -> &BTreeMap<String, Conflict> {
        &self.conflicts
    }

    /// The plugin that serves a task type.
    pub fn task_plugin(&self, task_type: &str) -> Result<Arc<TaskPlugin>, Error> {
        if let Some(p) = self.task_types.get(task_type) {
            return Ok(p.clone());
        }
        let known: Vec<&str> = self.task_types.keys().map(String::as_str).collect();
        Err(Error::UnknownTaskType {
            task_type: task_type.into(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        })
    }

    /// The plugin that serves a task type for a workflow that already used
    /// the versions `pins` (most specific first: the node's own version,
    /// then the workflow's). A pinned version still loaded wins unless its
    /// plugin is set to [`Pinning::Latest`]; otherwise the current one serves.
    /// A pinned version serves even after its ConfigMap was deleted, so a
    /// running workflow finishes on what it started with.
    pub fn task_plugin_pinned(
        &self,
        task_type: &str,
        pins: &[Digest],
    ) -> Result<Arc<TaskPlugin>, Error> {
        for digest in pins {
            let Some(Plugin::Task(p)) = self.version(*digest) else {
                continue;
            };
            if self.pinning(p.name()) == Pinning::Pinned
                && p.manifest().task_types.iter().any(|t| t == task_type)
            {
                return Ok(p);
            }
        }
        self.task_plugin(task_type)
    }

    /// [`Snapshot::task_plugin_pinned`] for the workflow `uid`: a new
    /// workflow (no pin for the plugin) runs on a canary candidate when the
    /// roll-out takes it (see [`Rollout::takes`]).
    pub fn task_plugin_for(
        &self,
        task_type: &str,
        pins: &[Digest],
        uid: &str,
    ) -> Result<Arc<TaskPlugin>, Error> {
        let current = self.task_plugin_pinned(task_type, pins)?;
        let Some(r) = self.versions.rollouts.get(current.name()) else {
            return Ok(current);
        };
        if pins.contains(&current.digest()) || !r.takes(uid) {
            return Ok(current);
        }
        match self.version(r.candidate) {
            Some(Plugin::Task(c)) if c.manifest().task_types.iter().any(|t| t == task_type) => {
                Ok(c)
            }
            _ => Ok(current),
        }
    }

    /// The roll-out of a plugin, if one is under way.
    pub fn rollout(&self, name: &str) -> Option<&Rollout> {
        self.versions.rollouts.get(name)
    }

    /// The shadow candidate of a plugin, if it has one.
    pub fn shadow(&self, name: &str) -> Option<(Arc<TaskPlugin>, &Rollout)> {
        let r = self
            .rollout(name)
            .filter(|r| r.mode == RolloutMode::Shadow)?;
        match self.version(r.candidate)? {
            Plugin::Task(t) => Some((t, r)),
            _ => None,
        }
    }

    /// A loaded version by digest, current or retained.
    pub fn version(&self, digest: Digest) -> Option<Plugin> {
        self.versions.retained.get(&digest).cloned().or_else(|| {
            self.plugins
                .values()
                .find(|p| p.digest() == digest)
                .cloned()
        })
    }

    /// Every loaded version that is not current, by digest.
    pub fn retained(&self) -> &BTreeMap<Digest, Plugin> {
        &self.versions.retained
    }

    /// The earlier good versions of a plugin a rollback may return to, oldest first.
    pub fn history(&self, name: &str) -> &[Digest] {
        self.versions
            .history
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The pinning policy of a plugin.
    pub fn pinning(&self, name: &str) -> Pinning {
        self.versions
            .policies
            .get(name)
            .copied()
            .unwrap_or_default()
    }

    /// The middleware chain of a slot, in order (empty when none is registered).
    pub fn middleware(&self, slot: &str) -> &[Arc<MiddlewarePlugin>] {
        self.slots.get(slot).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every loaded plugin by name, enabled or not.
    pub fn plugins(&self) -> &BTreeMap<String, Plugin> {
        &self.plugins
    }

    /// Served task types, by either kind of task plugin.
    pub fn task_types(&self) -> impl Iterator<Item = &str> {
        self.task_types
            .keys()
            .chain(self.webapi.keys())
            .map(String::as_str)
    }

    /// The web-API plugin that serves a task type, preferring a version in
    /// `pins` that still serves it (a running workflow keeps its version).
    pub fn webapi_plugin_for(&self, task_type: &str, pins: &[Digest]) -> Option<Arc<WebApiPlugin>> {
        for digest in pins {
            if let Some(Plugin::WebApi(p)) = self.version(*digest)
                && p.manifest().task_types.iter().any(|t| t == task_type)
            {
                return Some(p);
            }
        }
        self.webapi.get(task_type).cloned()
    }

    /// Configuration problems (defaults pointing at plugins that do not serve).
    pub fn problems(&self) -> &[Error] {
        &self.problems
    }
}

/// The live registry.
#[derive(Debug)]
pub struct Registry {
    current: ArcSwap<Snapshot>,
    config: RegistryConfig,
    /// Serialises writers so two concurrent swaps never lose one another.
    write: std::sync::Mutex<()>,
    breaker: crate::breaker::Breakers,
    /// Plugins being loaded (compiled) now, by task type: work for those
    /// types waits for the new version instead of failing or silently
    /// running the old one.
    loading: std::sync::Mutex<BTreeMap<String, BTreeMap<String, usize>>>,
}

/// Marks a plugin's task types as loading until dropped
/// (see [`Registry::begin_loading`]).
#[derive(Debug)]
pub struct Loading {
    registry: Arc<Registry>,
    name: String,
    task_types: Vec<String>,
}

impl Drop for Loading {
    fn drop(&mut self) {
        let mut loading = self
            .registry
            .loading
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for tt in &self.task_types {
            if let Some(by_plugin) = loading.get_mut(tt) {
                if let Some(n) = by_plugin.get_mut(&self.name) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        by_plugin.remove(&self.name);
                    }
                }
                if by_plugin.is_empty() {
                    loading.remove(tt);
                }
            }
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(RegistryConfig::default())
    }
}

impl Registry {
    /// An empty registry.
    pub fn new(config: RegistryConfig) -> Self {
        Registry {
            current: ArcSwap::from_pointee(Snapshot::default()),
            config,
            write: std::sync::Mutex::new(()),
            breaker: crate::breaker::Breakers::default(),
            loading: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Marks `name`'s task types as loading until the guard drops: call it
    /// before compiling a new version, keep the guard until it is published
    /// or rejected.
    pub fn begin_loading(self: &Arc<Self>, name: &str, task_types: &[String]) -> Loading {
        let mut loading = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        for tt in task_types {
            *loading
                .entry(tt.clone())
                .or_default()
                .entry(name.to_string())
                .or_default() += 1;
        }
        Loading {
            registry: self.clone(),
            name: name.to_string(),
            task_types: task_types.to_vec(),
        }
    }

    /// The plugin loading a version that serves `task_type` now, if any.
    pub fn loading(&self, task_type: &str) -> Option<String> {
        let loading = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        loading
            .get(task_type)
            .and_then(|by_plugin| by_plugin.keys().next().cloned())
    }

    /// Records when `name` first claimed its task types (Unix
    /// milliseconds; the hot loader uses its ConfigMap's creation time, so
    /// every replica and every restart decides conflicts alike).
    pub fn set_claimed_at(&self, name: &str, since: i64) {
        if self.snapshot().versions.claimed_at.get(name) == Some(&since) {
            return;
        }
        self.update_versions(|_, versions| {
            versions.claimed_at.insert(name.to_string(), since);
        });
    }

    /// How the operator configured it.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// The current snapshot; hold it for as long as one decision needs a consistent view.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The plugin that serves a task type now.
    pub fn task_plugin(&self, task_type: &str) -> Result<Arc<TaskPlugin>, Error> {
        self.current.load().task_plugin(task_type)
    }

    /// Add or replace a plugin (by name) atomically. Returns the version it replaced.
    pub fn upsert(&self, plugin: Plugin) -> Option<Plugin> {
        self.update(|plugins| plugins.insert(plugin.manifest().name.clone(), plugin))
    }

    /// Remove a plugin by name atomically. Returns what was removed.
    pub fn remove(&self, name: &str) -> Option<Plugin> {
        self.update(|plugins| plugins.remove(name))
    }

    /// flyteadmin's `RegisterDefault`: put a middleware in a slot unless the
    /// operator already registered one of that name.
    pub fn register_default(&self, plugin: Arc<MiddlewarePlugin>) -> bool {
        let name = plugin.name().to_string();
        self.update(|plugins| match plugins.entry(name) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Plugin::Middleware(plugin));
                true
            }
        })
    }

    fn update<R>(&self, f: impl FnOnce(&mut BTreeMap<String, Plugin>) -> R) -> R {
        self.update_versions(|plugins, _| f(plugins))
    }

    fn update_versions<R>(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, Plugin>, &mut Versions) -> R,
    ) -> R {
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current.load();
        let mut plugins = old.plugins.clone();
        let mut versions = old.versions.clone();
        let r = f(&mut plugins, &mut versions);
        self.current
            .store(Arc::new(Snapshot::build(plugins, versions, &self.config)));
        r
    }

    /// The plugin that serves a task type for a workflow pinned to `pins`
    /// (see [`Snapshot::task_plugin_pinned`]).
    pub fn task_plugin_pinned(
        &self,
        task_type: &str,
        pins: &[Digest],
    ) -> Result<Arc<TaskPlugin>, Error> {
        self.current.load().task_plugin_pinned(task_type, pins)
    }

    /// [`Snapshot::webapi_plugin_for`] on the current snapshot.
    pub fn webapi_plugin_for(&self, task_type: &str, pins: &[Digest]) -> Option<Arc<WebApiPlugin>> {
        self.current.load().webapi_plugin_for(task_type, pins)
    }

    /// [`Snapshot::task_plugin_for`] on the current snapshot.
    pub fn task_plugin_for(
        &self,
        task_type: &str,
        pins: &[Digest],
        uid: &str,
    ) -> Result<Arc<TaskPlugin>, Error> {
        self.current.load().task_plugin_for(task_type, pins, uid)
    }

    /// Load `candidate` beside its plugin's serving version as a shadow or
    /// canary (replacing any earlier candidate). The plugin must be serving
    /// already: a roll-out compares with, or splits from, something.
    pub fn start_rollout(&self, candidate: Plugin, mode: RolloutMode) -> Result<(), String> {
        let name = candidate.manifest().name.clone();
        if matches!(candidate, Plugin::Middleware(_)) {
            return Err(format!(
                "plugin {name:?} is a middleware: roll-outs are for task plugins"
            ));
        }
        let digest = candidate.digest();
        self.update_versions(|plugins, versions| {
            let Some(current) = plugins.get(&name) else {
                return Err(format!(
                    "plugin {name:?} has no serving version to roll out beside: push it without a roll-out first"
                ));
            };
            if current.digest() == digest {
                return Err(format!("plugin {name:?} already serves {digest}"));
            }
            if versions.rollouts.get(&name).is_some_and(|r| r.candidate == digest && r.mode == mode) {
                return Ok(());
            }
            versions.retained.insert(digest, candidate);
            versions.rollouts.insert(name, Rollout::new(digest, mode));
            Ok(())
        })
    }

    /// End a plugin's roll-out without promoting it (the candidate stays
    /// loaded while workflows pin it). Returns what it was.
    pub fn abort_rollout(&self, name: &str) -> Option<Rollout> {
        self.snapshot().versions.rollouts.get(name)?;
        self.update_versions(|_, versions| versions.rollouts.remove(name))
    }

    /// Make a plugin's candidate its serving version. Returns its digest.
    pub fn promote(&self, name: &str) -> Option<Digest> {
        let snap = self.snapshot();
        let r = snap.versions.rollouts.get(name)?;
        let candidate = snap.version(r.candidate)?;
        self.abort_rollout(name);
        self.publish(candidate);
        Some(r.candidate)
    }

    /// Make `plugin` the current version of its name, atomically, keeping
    /// the version it replaces loaded (for workflows pinned to it and as the
    /// rollback target). Publishing the current digest again changes nothing.
    /// Returns the digest it replaced.
    pub fn publish(&self, plugin: Plugin) -> Option<Digest> {
        let name = plugin.manifest().name.clone();
        let digest = plugin.digest();
        self.update_versions(|plugins, versions| {
            versions.retained.remove(&digest);
            if let Some(h) = versions.history.get_mut(&name) {
                h.retain(|d| *d != digest);
            }
            let old = plugins.insert(name.clone(), plugin)?;
            let old_digest = old.digest();
            if old_digest == digest {
                return None;
            }
            versions.retained.insert(old_digest, old);
            versions.history.entry(name).or_default().push(old_digest);
            Some(old_digest)
        })
    }

    /// Keep a version loaded without serving it to new work: a version
    /// that running workflows pin, loaded again after a restart. Returns
    /// false when that digest is loaded already.
    pub fn retain(&self, plugin: Plugin) -> bool {
        let d = plugin.digest();
        self.update_versions(|plugins, versions| {
            if plugins.values().any(|p| p.digest() == d) || versions.retained.contains_key(&d) {
                return false;
            }
            versions.retained.insert(d, plugin);
            true
        })
    }

    /// Stop serving a plugin's task types to new work, atomically. Its
    /// versions stay loaded for pinned workflows until [`Registry::prune`]
    /// finds them unpinned. Returns the digest that was current.
    pub fn withdraw(&self, name: &str) -> Option<Digest> {
        self.update_versions(|plugins, versions| {
            let old = plugins.remove(name)?;
            let d = old.digest();
            versions.retained.insert(d, old);
            versions.history.remove(name);
            versions.claimed_at.remove(name);
            Some(d)
        })
    }

    /// Set a plugin's pinning policy.
    pub fn set_pinning(&self, name: &str, pinning: Pinning) {
        if self.snapshot().pinning(name) == pinning {
            return;
        }
        self.update_versions(|_, versions| {
            versions.policies.insert(name.to_string(), pinning);
        });
    }

    /// Unload retained versions that are neither pinned (`pinned(name,
    /// digest)` says so) nor the latest rollback target of a current plugin.
    /// Returns the unloaded versions.
    pub fn prune(&self, pinned: impl Fn(&str, Digest) -> bool) -> Vec<(String, Digest)> {
        let snap = self.snapshot();
        let drop: Vec<(String, Digest)> = snap
            .versions
            .retained
            .iter()
            .filter(|(d, p)| {
                let name = &p.manifest().name;
                let rollback =
                    snap.plugins.contains_key(name) && snap.history(name).last() == Some(*d);
                let candidate = snap.rollout(name).is_some_and(|r| r.candidate == **d);
                !rollback && !candidate && !pinned(name, **d)
            })
            .map(|(d, p)| (p.manifest().name.clone(), *d))
            .collect();
        if drop.is_empty() {
            return drop;
        }
        self.update_versions(|_, versions| {
            for (name, d) in &drop {
                versions.retained.remove(d);
                if let Some(h) = versions.history.get_mut(name) {
                    h.retain(|x| x != d);
                }
            }
        });
        drop
    }

    /// Return a plugin to its latest earlier good version, atomically; the
    /// version it replaces is unloaded (pinned workflows move off it too).
    /// Returns `(from, to)`, or `None` when there is nothing to return to.
    pub fn rollback(&self, name: &str) -> Option<(Digest, Digest)> {
        self.update_versions(|plugins, versions| {
            let history = versions.history.get_mut(name)?;
            let to = loop {
                let d = history.pop()?;
                if versions.retained.contains_key(&d) {
                    break d;
                }
            };
            let good = versions.retained.remove(&to)?;
            let bad = plugins.insert(name.to_string(), good)?;
            Some((bad.digest(), to))
        })
    }

    /// Configure the circuit breaker (see [`crate::breaker`]).
    pub fn set_breaker(&self, config: BreakerConfig) {
        self.breaker.configure(config);
    }

    /// Be told of every trip of the breaker (called on the calling thread, keep it short).
    pub fn on_trip(&self, observer: impl Fn(&Trip) + Send + Sync + 'static) {
        self.breaker.observe(Box::new(observer));
    }

    /// The breaker's state of each plugin that tripped, by name.
    pub fn trips(&self) -> BTreeMap<String, Trip> {
        self.breaker.trips()
    }

    /// Record the outcome of one call of a task plugin version. Sandbox
    /// faults ([`CallError::is_fault`]) count against that version; past the
    /// configured number in the window, the plugin is rolled back to its
    /// previous good version (when it still is the current one).
    pub fn record_call(&self, plugin: &TaskPlugin, error: Option<&CallError>) {
        self.record(plugin.name(), plugin.digest(), error);
    }

    /// [`Registry::record_call`] for a middleware: a version that keeps
    /// faulting is rolled back the same way. When it has no earlier version,
    /// its circuit opens for the breaker's window ([`Registry::circuit_open`]):
    /// the chain then applies the plugin's failStrategy without calling it,
    /// so a broken policy costs no deadline per request.
    pub fn record_middleware_call(&self, plugin: &MiddlewarePlugin, error: Option<&CallError>) {
        self.record(plugin.name(), plugin.digest(), error);
    }

    /// Whether the breaker tripped this version within its window and had
    /// nothing to roll back to.
    pub fn circuit_open(&self, digest: Digest) -> bool {
        self.breaker.is_open(digest)
    }

    fn record(&self, name: &str, digest: Digest, error: Option<&CallError>) {
        let Some(e) = error else { return };
        if !e.is_fault() {
            return;
        }
        let Some(faults) = self.breaker.fault(digest) else {
            return;
        };
        if self
            .snapshot()
            .rollout(name)
            .is_some_and(|r| r.candidate == digest)
        {
            // A failing candidate: the serving version never stopped
            // serving; only the roll-out ends.
            self.abort_rollout(name);
            self.breaker.trip(Trip {
                plugin: name.to_string(),
                from: digest,
                to: None,
                faults,
                last_error: e.to_string(),
                rollout_aborted: true,
            });
            return;
        }
        let is_current = self
            .snapshot()
            .plugins
            .get(name)
            .is_some_and(|p| p.digest() == digest);
        if !is_current {
            return;
        }
        let to = match self.rollback(name) {
            Some((from, to)) if from == digest => Some(to),
            Some((from, to)) => {
                // Raced with a swap: the bad version was no longer current.
                tracing::warn!(plugin = name, %from, %to, "breaker rolled back a newer version");
                Some(to)
            }
            None => None,
        };
        self.breaker.trip(Trip {
            plugin: name.to_string(),
            from: digest,
            to,
            faults,
            last_error: e.to_string(),
            rollout_aborted: false,
        });
    }
}

/// The result of loading a directory: what loaded, and what did not (each
/// error names its file) — one bad plugin never stops the others.
#[derive(Debug, Default)]
pub struct DirLoad {
    /// Loaded plugins with their files and where the compilation came from.
    pub loaded: Vec<(PathBuf, Plugin, CompileSource)>,
    /// Files that failed.
    pub errors: Vec<DirError>,
}

/// A file of a plugin directory that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The directory could not be read.
    #[error("cannot read plugin directory {path}: {source}")]
    ReadDir {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A component could not be read.
    #[error("cannot read plugin {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A component has no manifest beside it.
    #[error("plugin {path} has no manifest: expected {expected} beside it")]
    NoManifest {
        /// The component.
        path: String,
        /// The manifest path looked for.
        expected: String,
    },
    /// The manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// The component is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The manifest's name differs from another plugin's in the same directory.
    #[error("plugin {path}: name {name:?} is already used by {other}")]
    Duplicate {
        /// The component.
        path: String,
        /// The name.
        name: String,
        /// The other file.
        other: String,
    },
}

/// Finds the manifest of `x.wasm`: `x.yaml`, `x.yml` or `x.json` beside it.
pub fn manifest_path_for(component: &Path) -> Option<PathBuf> {
    ["yaml", "yml", "json"]
        .iter()
        .map(|ext| component.with_extension(ext))
        .find(|p| p.is_file())
}

/// Load one component file with the manifest beside it.
pub fn load_file(engine: &PluginEngine, path: &Path) -> Result<(Plugin, CompileSource), DirError> {
    let manifest_path = manifest_path_for(path).ok_or_else(|| DirError::NoManifest {
        path: path.display().to_string(),
        expected: path.with_extension("yaml").display().to_string(),
    })?;
    load_file_with_manifest(engine, path, &manifest_path)
}

/// Load one component file with an explicit manifest file.
pub fn load_file_with_manifest(
    engine: &PluginEngine,
    path: &Path,
    manifest_path: &Path,
) -> Result<(Plugin, CompileSource), DirError> {
    let manifest = Manifest::from_path(manifest_path)?;
    let bytes = std::fs::read(path).map_err(|source| DirError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(Plugin::load(
        engine,
        &bytes,
        manifest,
        &path.display().to_string(),
    )?)
}

/// Load every `*.wasm` in a directory (not recursive), each with its manifest.
pub fn load_dir(engine: &PluginEngine, dir: &Path) -> DirLoad {
    let mut out = DirLoad::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(source) => {
            out.errors.push(DirError::ReadDir {
                path: dir.display().to_string(),
                source,
            });
            return out;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.sort();
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in files {
        match load_file(engine, &path) {
            Ok((plugin, source)) => {
                let name = plugin.manifest().name.clone();
                if let Some(other) = names.get(&name) {
                    out.errors.push(DirError::Duplicate {
                        path: path.display().to_string(),
                        name,
                        other: other.display().to_string(),
                    });
                    continue;
                }
                names.insert(name, path.clone());
                out.loaded.push((path, plugin, source));
            }
            Err(e) => out.errors.push(e),
        }
    }
    out
}

impl Registry {
    /// Load a directory into the registry; returns the errors (the good plugins are in).
    pub fn load_dir(&self, engine: &PluginEngine, dir: &Path) -> Vec<DirError> {
        let DirLoad { loaded, errors } = load_dir(engine, dir);
        self.update(|plugins| {
            for (_, p, _) in loaded {
                plugins.insert(p.manifest().name.clone(), p);
            }
        });
        errors
    }

    /// The world each loaded plugin implements, by name (for status output).
    pub fn worlds(&self) -> BTreeMap<String, World> {
        self.snapshot()
            .plugins
            .iter()
            .map(|(n, p)| (n.clone(), p.manifest().world))
            .collect()
    }
}
