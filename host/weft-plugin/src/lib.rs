//! Weft's plugin host: runs sandboxed WebAssembly task, middleware and
//! web-API plugins.
//!
//! This crate knows nothing of Kubernetes clients or gRPC servers (it only
//! speaks JSON objects and plain Rust types), so the controller, the admin
//! API and the `weft plugin` CLI all share one sandbox.
//!
//! The pieces, in the order a plugin meets them:
//! - [`manifest`]: what a plugin declares (world, task types, kinds, limits).
//! - [`engine`]: one wasmtime engine with the pooling allocator, an epoch
//!   ticker for deadlines, and compilation cached by sha256 digest.
//! - [`plugin`]: loading a component (every check once) into a [`Plugin`]
//!   of one of three worlds, each in its own module: [`task`] (Kubernetes
//!   task plugins), [`middleware`] (gRPC hooks) and [`webapi`] (web-API
//!   tasks), all calling through [`call`]'s skeleton (a fresh store per
//!   call, prepared ahead of time by `prepared`; traps, deadlines and
//!   memory exhaustion become typed [`CallError`]s).
//! - [`registry`]: task type -> plugin and middleware slots, swapped atomically;
//!   earlier versions kept for pinned workflows and rollbacks.
//! - [`breaker`]: counts sandbox faults per version, for automatic rollback.
//!
//! ```no_run
//! use weft_plugin::{engine::{EngineConfig, PluginEngine}, registry::Registry};
//! let engine = PluginEngine::new(EngineConfig::default())?;
//! let registry = Registry::default();
//! for err in registry.load_dir(&engine, "target/plugins".as_ref()) {
//!     eprintln!("{err}");
//! }
//! let pod = registry.task_plugin("pod")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[doc(hidden)]
pub mod bindings;
pub mod breaker;
pub mod call;
pub mod conformance;
pub mod egress;
pub mod engine;
pub mod fuzz;
mod host;
pub mod manifest;
pub mod middleware;
pub mod outbound;
pub mod plugin;
mod prepared;
pub mod quantity;
pub mod registry;
pub mod rollout;
pub mod task;
pub mod webapi;

pub use engine::{Digest, EngineConfig, PluginEngine, PreparerPriority};
pub use host::{StateLimits, StateStore};

/// The tracing target of what plugins log (the `log` import and a WASI
/// guest's stdout and stderr), so an operator can set its level apart
/// from the host's: `RUST_LOG=warn,plugin=debug`. `weft` shows it at info
/// by default. At the crate's root: the host and the outbound hooks both
/// log to it.
pub const PLUGIN_LOG_TARGET: &str = "plugin";
pub use manifest::Manifest;
pub use plugin::{
    CallError, FailureKind, MiddlewareCall, MiddlewarePlugin, Phase, PhaseInfo, Plugin,
    TaskContext, TaskPlugin, Verdict, WarmTaskInstance, resource_name,
};
pub use registry::{Pinning, PluginSettings, Registry, RegistryConfig};
pub use webapi::WebApiPlugin;
