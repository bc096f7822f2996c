//! Loading a component as a plugin, and calling it safely.
//!
//! Loading checks everything once (wasm header, compilation, world, imports,
//! properties); every call runs in a fresh `Store` made from the version's
//! `InstancePre` (ahead of time when a spare is ready, see [`crate::prepared`]),
//! so no data survives from one call to the next and a trap poisons nothing.

//!
//! The worlds live beside this file, one each ([`crate::task`],
//! [`crate::middleware`], [`crate::webapi`]), over the call skeleton of
//! [`crate::call`]; their types are re-exported here by their old paths.

use std::{fmt, sync::Arc};

use serde_json::{Map, Value};

use crate::{
    bindings::{middleware::MiddlewarePluginPre, task::K8sTaskPluginPre},
    engine::{CompileSource, Digest, PluginEngine},
    manifest::{Manifest, World},
};

pub use crate::call::{CallError, CallStats, FailureKind};
pub(crate) use crate::call::{Common, prepare};
pub use crate::middleware::{MiddlewareCall, MiddlewarePlugin, Verdict, grpc_code};
use crate::task::warm_task_instance;
pub use crate::task::{
    AbortBehaviour, LABEL_ATTEMPT, LABEL_NODE, LABEL_WORKFLOW, LogLink, MANAGED_BY,
    OWNER_API_VERSION, OWNER_KIND, Phase, PhaseInfo, TaskContext, TaskPlugin, TaskProperties,
    WarmTaskInstance, resource_name,
};

/// Why a component could not be loaded as a plugin. Always names the origin.
#[derive(Debug, thiserror::Error)]
#[error("plugin {origin}: {problem}")]
pub struct LoadError {
    /// Where the component came from (a file path, a ConfigMap).
    pub origin: String,
    /// What is wrong.
    pub problem: LoadProblem,
}

/// What is wrong with a component.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly binary (no \\0asm header)")]
    NotWasm,
    /// A core module where a component was expected.
    #[error(
        "is a core WebAssembly module, not a component; wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// wasmtime could not compile it.
    #[error("invalid component: {0}")]
    Compile(String),
    /// It does not export what its manifest's world requires.
    #[error("does not implement world {expected}: it exports [{found}], not {export}")]
    WrongWorld {
        /// The world the manifest names.
        expected: World,
        /// The export that world requires.
        export: &'static str,
        /// What the component does export.
        found: String,
    },
    /// It needs imports the host does not provide, or its exports have the wrong types.
    #[error("cannot be linked against the host: {0}")]
    Link(String),
    /// Its manifest asks for more than the host allows.
    #[error("manifest asks for {asked} bytes of memory, more than the host's limit of {limit}")]
    MemoryOverLimit {
        /// What the manifest asked for.
        asked: u64,
        /// The engine's limit.
        limit: u64,
    },
    /// Asking the plugin for its properties failed.
    #[error("properties() failed: {0}")]
    Properties(Box<CallError>),
    /// The manifest names a world this host reads but does not run (none
    /// today: every world is served; kept for a world added to the WIT
    /// before its host).
    #[error("world {0} is not served by this version of the host")]
    Unserved(World),
}

/// A loaded plugin version of one of the three worlds.
#[derive(Clone)]
pub enum Plugin {
    /// A task plugin.
    Task(Arc<TaskPlugin>),
    /// A middleware plugin.
    Middleware(Arc<MiddlewarePlugin>),
    /// A web-API task plugin.
    WebApi(Arc<crate::webapi::WebApiPlugin>),
}

impl Plugin {
    /// The same version with another whole configuration (see
    /// [`TaskPlugin::set_config`]); the compiled code is shared.
    pub fn with_config(&self, config: Map<String, Value>) -> Plugin {
        match self {
            Plugin::Task(t) => {
                let mut t = TaskPlugin::clone(t);
                t.set_config(config);
                Plugin::Task(Arc::new(t))
            }
            Plugin::Middleware(m) => {
                let mut m = MiddlewarePlugin::clone(m);
                m.set_config(config);
                Plugin::Middleware(Arc::new(m))
            }
            Plugin::WebApi(w) => {
                let mut w = crate::webapi::WebApiPlugin::clone(w);
                w.set_config(config);
                Plugin::WebApi(Arc::new(w))
            }
        }
    }

    /// Load a component with its manifest. Blocking (may compile): call it off the async runtime.
    pub fn load(
        engine: &PluginEngine,
        bytes: &[u8],
        manifest: Manifest,
        origin: &str,
    ) -> Result<(Plugin, CompileSource), LoadError> {
        let fail = |problem| LoadError {
            origin: origin.to_string(),
            problem,
        };
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(fail(LoadProblem::CoreModule)),
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(fail(LoadProblem::NotWasm)),
        }
        if manifest.limits.memory > engine.inner.max_memory {
            return Err(fail(LoadProblem::MemoryOverLimit {
                asked: manifest.limits.memory,
                limit: engine.inner.max_memory,
            }));
        }
        let digest = Digest::of(bytes);
        let (component, source) = engine
            .compile(digest, bytes)
            .map_err(|e| fail(LoadProblem::Compile(format!("{e:#}"))))?;
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&engine.inner.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let export = manifest.world.export_name();
        if !exports.iter().any(|e| e == export) {
            return Err(fail(LoadProblem::WrongWorld {
                expected: manifest.world,
                export,
                found: exports.join(", "),
            }));
        }
        if manifest.world != World::WebapiTaskPlugin {
            let imports = ty
                .imports(&engine.inner.engine)
                .map(|(name, _)| name.to_string());
            if let Some(http) = imports.into_iter().find(|i| i.starts_with("wasi:http/")) {
                return Err(fail(LoadProblem::Link(format!(
                    "it imports {http}, but only a webapi-task-plugin may make outbound HTTP (this is a {})",
                    manifest.world
                ))));
            }
        }
        let pre = engine
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
        let common = Common {
            name: manifest.name.clone().into(),
            state: engine.state_of(&manifest.name),
            config_json: Value::Object(manifest.config_without_secret_refs()).to_string(),
            manifest: Arc::new(manifest),
            digest,
            size: bytes.len(),
            engine: engine.clone(),
            outbound: None,
        };
        let plugin = match common.manifest.world {
            World::K8sTaskPlugin => {
                let pre = K8sTaskPluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                let spares = common.spares(prepare(&common, &pre, warm_task_instance));
                let mut plugin = TaskPlugin {
                    common,
                    pre,
                    spares,
                    properties: TaskProperties {
                        abort: AbortBehaviour::Delete,
                        delete_on_finish: false,
                    },
                };
                plugin.properties = plugin
                    .call_properties()
                    .map_err(|e| fail(LoadProblem::Properties(Box::new(e))))?;
                Plugin::Task(Arc::new(plugin))
            }
            World::WebapiTaskPlugin => {
                let pre = crate::bindings::webapi::WebapiTaskPluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                Plugin::WebApi(Arc::new(crate::webapi::WebApiPlugin::new(common, pre)))
            }
            World::MiddlewarePlugin => {
                let pre = MiddlewarePluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                let spares = common.spares(prepare(&common, &pre, |p, s| p.instantiate(s)));
                Plugin::Middleware(Arc::new(MiddlewarePlugin {
                    common,
                    pre,
                    spares,
                }))
            }
        };
        Ok((plugin, source))
    }

    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common().manifest
    }

    /// The component's digest.
    pub fn digest(&self) -> Digest {
        self.common().digest
    }

    /// The component's size in bytes.
    pub fn size(&self) -> usize {
        self.common().size
    }

    fn common(&self) -> &Common {
        match self {
            Plugin::Task(p) => &p.common,
            Plugin::Middleware(p) => &p.common,
            Plugin::WebApi(p) => &p.common,
        }
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.common();
        write!(f, "{}@{} ({:?})", c.name, c.manifest.version, c.digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::label_value;

    #[test]
    fn resource_names_are_deterministic_valid_labels() {
        assert_eq!(resource_name("hello", "greet", 0), "hello-greet-0");
        let long = "w".repeat(80);
        let a = resource_name(&long, "node", 1);
        let b = resource_name(&long, "node", 2);
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b, "attempts differ even when cut");
        assert_eq!(a, resource_name(&long, "node", 1));
        let odd = resource_name("My_Flow", "Step.1", 0);
        assert!(crate::manifest::check_dns_label(&odd).is_ok(), "{odd}");
        assert_ne!(
            odd,
            resource_name("my-flow", "step-1", 0),
            "no collision after cleaning"
        );
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("train"), "train");
        let v = label_value(&"x/".repeat(50));
        assert!(v.len() <= 63 && !v.contains('/'), "{v}");
    }
}
