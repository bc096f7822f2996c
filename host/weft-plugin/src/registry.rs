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

use crate::{
    engine::{CompileSource, PluginEngine},
    manifest::{Manifest, World},
    plugin::{LoadError, MiddlewarePlugin, Plugin, TaskPlugin},
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
    /// Several enabled plugins serve the task type and none is configured as its default.
    #[error(
        "task type {task_type:?} is served by several plugins ({plugins}); choose one with defaultForTaskTypes"
    )]
    Ambiguous {
        /// The task type.
        task_type: String,
        /// The plugins that serve it.
        plugins: String,
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

/// How the operator configures the registry (Flyte's `tasks.task-plugins`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
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
}

/// One consistent view of the registry.
#[derive(Debug, Default)]
pub struct Snapshot {
    plugins: BTreeMap<String, Plugin>,
    task_types: BTreeMap<String, Arc<TaskPlugin>>,
    ambiguous: BTreeMap<String, Vec<String>>,
    slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>>,
    problems: Vec<Error>,
}

impl Snapshot {
    fn build(plugins: BTreeMap<String, Plugin>, config: &RegistryConfig) -> Snapshot {
        let enabled = |name: &str| config.enabled.as_ref().is_none_or(|e| e.contains(name));
        let mut claims: BTreeMap<String, Vec<Arc<TaskPlugin>>> = BTreeMap::new();
        let mut slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>> = BTreeMap::new();
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
        let mut ambiguous = BTreeMap::new();
        let mut problems = Vec::new();
        for (tt, list) in claims {
            if let Some(chosen) = config.default_for_task_types.get(&tt) {
                match list.iter().find(|p| p.name() == chosen) {
                    Some(p) => {
                        task_types.insert(tt, p.clone());
                    }
                    None => problems.push(Error::BadDefault {
                        task_type: tt,
                        plugin: chosen.clone(),
                    }),
                }
            } else if list.len() == 1 {
                task_types.insert(tt, list[0].clone());
            } else {
                ambiguous.insert(tt, list.iter().map(|p| p.name().to_string()).collect());
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
        Snapshot {
            plugins,
            task_types,
            ambiguous,
            slots,
            problems,
        }
    }

    /// The plugin that serves a task type.
    pub fn task_plugin(&self, task_type: &str) -> Result<Arc<TaskPlugin>, Error> {
        if let Some(p) = self.task_types.get(task_type) {
            return Ok(p.clone());
        }
        if let Some(list) = self.ambiguous.get(task_type) {
            return Err(Error::Ambiguous {
                task_type: task_type.into(),
                plugins: list.join(", "),
            });
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

    /// The middleware chain of a slot, in order (empty when none is registered).
    pub fn middleware(&self, slot: &str) -> &[Arc<MiddlewarePlugin>] {
        self.slots.get(slot).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every loaded plugin by name, enabled or not.
    pub fn plugins(&self) -> &BTreeMap<String, Plugin> {
        &self.plugins
    }

    /// Served task types.
    pub fn task_types(&self) -> impl Iterator<Item = &str> {
        self.task_types.keys().map(String::as_str)
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
        }
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
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut plugins = self.current.load().plugins.clone();
        let r = f(&mut plugins);
        self.current
            .store(Arc::new(Snapshot::build(plugins, &self.config)));
        r
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
