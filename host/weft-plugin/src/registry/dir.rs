//! Plugins from a directory of components and manifests (the built-in
//! plugins, `weft run`'s and `weft dev`'s `target/plugins`).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use super::Registry;
use crate::{
    engine::{CompileSource, PluginEngine},
    manifest::{Manifest, World},
    plugin::{LoadError, Plugin},
};

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
