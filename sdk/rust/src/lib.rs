//! Write [Weft](https://github.com/weft-dev/weft) plugins in Rust.
//!
//! A task plugin turns a task into a Kubernetes resource and says what the
//! resource's state means (Flyte's `BuildResource` / `GetTaskPhase`); a
//! middleware plugin decides about one gRPC call of the admin API. The host
//! runs each as a sandboxed WebAssembly component; this crate hides the
//! generated bindings behind typed values (objects are `serde_json::Value`)
//! and one export macro per world.
//!
//! Enable exactly one feature, `task` or `middleware`: a component
//! implements one world.
//!
//! # A complete task plugin
//!
//! ```ignore
//! use serde_json::{json, Value};
//! use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin};
//!
//! struct Hello;
//!
//! impl TaskPlugin for Hello {
//!     fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
//!         let image = ctx.config["image"].as_str().ok_or_else(|| PluginError::permanent("config.image is required"))?;
//!         Ok(json!({
//!             "apiVersion": "v1", "kind": "Pod",
//!             "metadata": {"name": ctx.resource_name, "namespace": ctx.namespace},
//!             "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]},
//!         }))
//!     }
//!
//!     fn get_task_phase(_ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
//!         Ok(match observed["status"]["phase"].as_str() {
//!             Some("Succeeded") => PhaseInfo::success(None),
//!             Some("Failed") => PhaseInfo::retryable("Failed", "the pod failed"),
//!             Some("Running") => PhaseInfo::running(),
//!             _ => PhaseInfo::queued(),
//!         })
//!     }
//! }
//!
//! weft_plugin_sdk::export_task_plugin!(Hello);
//! ```
//!
//! Build it for `wasm32-unknown-unknown` and wrap it with
//! `wasm-tools component new`; see `plugins/README.md` in the Weft repo.
//! The crate also builds natively, where the host imports are replaced by
//! stand-ins (stderr logging, the system clock, an in-memory state), so a
//! plugin's logic can be unit-tested with plain `cargo test`.

#![deny(missing_docs)]

extern crate alloc;

mod host;
mod types;

#[doc(hidden)]
pub mod wit;

pub use host::{clock, log, state};
pub use serde_json::{self, json, Map, Value};
pub use types::*;

/// A task plugin: Flyte's `k8s.Plugin`.
pub trait TaskPlugin {
    /// Static properties, asked once per load.
    fn properties() -> TaskProperties {
        TaskProperties::default()
    }

    /// The Kubernetes object that runs this task (a JSON object). The host
    /// forces the namespace, owner reference and labels, and refuses kinds
    /// the manifest does not declare.
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError>;

    /// Where the task stands, given the object as last observed.
    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError>;
}

/// A middleware plugin: flyteadmin's `UnaryServiceMiddleware`.
pub trait MiddlewarePlugin {
    /// Decide about one call.
    fn on_request(call: Call) -> Verdict;
}

/// Export a type implementing [`TaskPlugin`] as the component's
/// `k8s-task` interface. Needs the `task` feature.
#[macro_export]
macro_rules! export_task_plugin {
    ($t:ty) => {
        #[doc(hidden)]
        pub struct __WeftTaskExport;

        impl $crate::wit::task::exports::weft::plugin::k8s_task::Guest for __WeftTaskExport {
            fn properties() -> $crate::wit::task::exports::weft::plugin::k8s_task::TaskProperties {
                $crate::wit::glue::properties::<$t>()
            }
            fn build_resource(
                ctx: $crate::wit::task::weft::plugin::types::TaskContext,
            ) -> ::core::result::Result<
                ::std::string::String,
                $crate::wit::task::weft::plugin::types::PluginError,
            > {
                $crate::wit::glue::build_resource::<$t>(ctx)
            }
            fn get_task_phase(
                ctx: $crate::wit::task::weft::plugin::types::TaskContext,
                observed: ::std::string::String,
            ) -> ::core::result::Result<
                $crate::wit::task::weft::plugin::types::PhaseInfo,
                $crate::wit::task::weft::plugin::types::PluginError,
            > {
                $crate::wit::glue::get_task_phase::<$t>(ctx, observed)
            }
        }

        // Natively the plugin is a plain library (for unit tests); only the
        // Wasm build exports the world.
        #[cfg(target_arch = "wasm32")]
        $crate::wit::task::export!(__WeftTaskExport with_types_in $crate::wit::task);
    };
}

/// Export a type implementing [`MiddlewarePlugin`] as the component's
/// `middleware` interface. Needs the `middleware` feature.
#[macro_export]
macro_rules! export_middleware_plugin {
    ($t:ty) => {
        #[doc(hidden)]
        pub struct __WeftMiddlewareExport;

        impl $crate::wit::middleware::exports::weft::plugin::middleware::Guest for __WeftMiddlewareExport {
            fn on_request(
                call: $crate::wit::middleware::exports::weft::plugin::middleware::Call,
            ) -> $crate::wit::middleware::exports::weft::plugin::middleware::Verdict {
                $crate::wit::mw_glue::on_request::<$t>(call)
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::wit::middleware::export!(__WeftMiddlewareExport with_types_in $crate::wit::middleware);
    };
}
