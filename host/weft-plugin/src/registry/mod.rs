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
    sync::Arc,
};

use arc_swap::ArcSwap;

mod dir;
mod faults;
mod snapshot;
mod versions;

pub use dir::{DirError, DirLoad, load_dir, load_file, load_file_with_manifest, manifest_path_for};
use snapshot::Versions;
pub use snapshot::{Conflict, Snapshot};

pub use crate::breaker::{BreakerConfig, Trip};
pub use crate::rollout::{Rollout, RolloutMode, ShadowStats};
use crate::{
    engine::Digest,
    plugin::{MiddlewarePlugin, Plugin, TaskPlugin},
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
}
