//! Write [Weft](https://github.com/weft-dev/weft) plugins in Rust.
//!
//! A **task plugin** turns a workflow task into a Kubernetes resource and
//! says what the resource's state means (Flyte's `BuildResource` /
//! `GetTaskPhase`); a **middleware plugin** decides about one gRPC call of
//! the admin API (flyteadmin's `UnaryServiceMiddleware`). The host runs each
//! as a sandboxed WebAssembly component that implements one world of the
//! `weft:plugin@0.1.0` WIT package. This crate hides the generated bindings
//! behind typed values (Kubernetes objects are [`serde_json::Value`]s) and
//! gives one export macro per world:
//!
//! | world               | implement           | export with                    |
//! |---------------------|---------------------|--------------------------------|
//! | `k8s-task-plugin`   | [`TaskPlugin`]      | [`export_task_plugin!`]        |
//! | `middleware-plugin` | [`MiddlewarePlugin`]| [`export_middleware_plugin!`]  |
//!
//! The host's imports are plain functions: [`log`], [`clock`] and
//! [`state`] (a small key/value store per plugin: instances are fresh for
//! every call, so it is the only memory that outlives one). A panic is
//! logged through the host at error level before the instance traps, so
//! the host's error says why the plugin died.
//!
//! # A complete task plugin
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "hello-plugin"
//! version = "0.1.0"
//! edition = "2021"
//!
//! [lib]
//! crate-type = ["cdylib", "rlib"]  # cdylib: the component; rlib: native unit tests
//!
//! [dependencies]
//! weft-plugin-sdk = "0.1"
//! serde = { version = "1", features = ["derive"] }
//!
//! [profile.release]
//! opt-level = "s"
//! lto = true
//! codegen-units = 1
//! panic = "abort"
//! strip = true
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use serde::Deserialize;
//! use weft_plugin_sdk::{json, log, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};
//!
//! /// The task's `config`, typed.
//! #[derive(Deserialize)]
//! struct Config {
//!     image: String,
//!     #[serde(default)]
//!     command: Vec<String>,
//! }
//!
//! pub struct Hello;
//!
//! impl TaskPlugin for Hello {
//!     fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
//!         // A bad config is the user's error: `config_as` makes it permanent.
//!         let config: Config = ctx.config_as()?;
//!         log::info(&format!("building {} for node {}", ctx.resource_name, ctx.node_id));
//!         Ok(json!({
//!             "apiVersion": "v1",
//!             "kind": "Pod",
//!             // Use the host's name: a re-run after a crash finds the same Pod.
//!             "metadata": {"name": ctx.resource_name, "namespace": ctx.namespace, "labels": ctx.labels},
//!             "spec": {
//!                 "restartPolicy": "Never",
//!                 "containers": [{"name": "main", "image": config.image, "command": config.command}],
//!             },
//!         }))
//!     }
//!
//!     fn get_task_phase(_ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
//!         // Must answer for any object, even one without a status yet.
//!         Ok(match observed["status"]["phase"].as_str() {
//!             Some("Succeeded") => PhaseInfo::success(None),
//!             Some("Failed") => PhaseInfo::retryable("Failed", "the pod failed"),
//!             Some("Running") => PhaseInfo::running(),
//!             _ if observed["status"]["reason"] == "Evicted" => {
//!                 // Not the task's fault: counted on the platform's retry budget.
//!                 PhaseInfo::system("Evicted", "the node evicted the pod")
//!             }
//!             _ => PhaseInfo::queued(),
//!         })
//!     }
//! }
//!
//! weft_plugin_sdk::export_task_plugin!(Hello);
//! # let ctx = TaskContext { config: json!({}), ..TaskContext::default() };
//! # assert!(!Hello::build_resource(ctx).unwrap_err().retryable);
//! ```
//!
//! Its logic is unit-tested natively with plain `cargo test` (see
//! [Natively](#natively)), e.g. in `src/lib.rs`:
//!
//! ```ignore
//! #[test]
//! fn a_missing_image_is_a_permanent_error() {
//!     let ctx = TaskContext { config: json!({}), ..TaskContext::default() };
//!     assert!(!Hello::build_resource(ctx).unwrap_err().retryable);
//! }
//! ```
//!
//! Its manifest, `weft-plugin.yaml`, shipped beside the component:
//!
//! ```yaml
//! name: hello
//! version: 0.1.0
//! world: k8s-task-plugin
//! taskTypes: [hello]
//! resources:
//!   - {apiVersion: v1, kind: Pod}   # the only kinds the host lets it create
//! limits: {deadline: 1s, memory: 64Mi}
//! config: {}                        # defaults of TaskContext::plugin_config
//! ```
//!
//! Build the core module for `wasm32-unknown-unknown` (no WASI needed) and
//! wrap it into a component:
//!
//! ```sh
//! cargo build --release --target wasm32-unknown-unknown
//! wasm-tools component new target/wasm32-unknown-unknown/release/hello_plugin.wasm -o hello.wasm
//! weft plugin test hello.wasm --task task.json     # run it in the real sandbox
//! ```
//!
//! # A middleware plugin
//!
//! ```
//! use weft_plugin_sdk::{state, Call, Code, MiddlewarePlugin, Verdict};
//!
//! /// Lets a call through only with an `x-team` header, and tells the
//! /// service how many calls that team made in the last minute.
//! pub struct RequireTeam;
//!
//! impl MiddlewarePlugin for RequireTeam {
//!     fn on_request(call: Call) -> Verdict {
//!         let Some(team) = call.metadata.get("x-team") else {
//!             return Verdict::reject(Code::PermissionDenied, "the x-team header is required");
//!         };
//!         // Instances are fresh per call: counters live in the host's state.
//!         let key = format!("calls/{team}");
//!         let calls = state::get(&key)
//!             .and_then(|v| String::from_utf8(v).ok()?.parse::<u64>().ok())
//!             .unwrap_or(0)
//!             + 1;
//!         let _ = state::set(&key, calls.to_string().as_bytes(), Some(60_000));
//!         Verdict::proceed_setting("x-weft-principal", format!("team:{team}"))
//!             .and_set("x-team-calls-last-minute", calls.to_string())
//!     }
//! }
//!
//! weft_plugin_sdk::export_middleware_plugin!(RequireTeam);
//! ```
//!
//! Its manifest says `world: middleware-plugin` and, instead of task types
//! and resources, `middleware: {requestBody: false, failStrategy: closed}`.
//!
//! # Natively
//!
//! The crate also builds for the machine's own target, where the host
//! imports are stand-ins (log lines go to stderr, the clock is the system
//! clock, state is an in-memory map) and the export macros export nothing,
//! so a plugin's logic can be unit-tested and benchmarked with plain
//! `cargo test`.
//!
//! # Features
//!
//! `task` and `middleware` (both on by default) carry each world's trait
//! glue and export macro. They are additive: a component exports only the
//! world whose export macro it invokes, so one workspace may build task and
//! middleware plugins in a single cargo invocation.

#![deny(missing_docs)]

mod host;
mod types;

#[doc(hidden)]
pub mod wit;

pub use host::{clock, log, state};
pub use serde_json::{self, json, Map, Value};
pub use types::*;

/// A task plugin: Flyte's `k8s.Plugin`. Implement it on a unit struct and
/// export it with [`export_task_plugin!`].
pub trait TaskPlugin {
    /// Static properties, asked once per load. The default deletes the
    /// resource on abort and keeps it once the task finished.
    fn properties() -> TaskProperties {
        TaskProperties::default()
    }

    /// The Kubernetes object that runs this task (a JSON object with
    /// `apiVersion`, `kind`, `metadata`, `spec`). The host forces the
    /// namespace, adds the owner reference and labels, and refuses kinds
    /// the manifest does not declare.
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError>;

    /// [`TaskPlugin::build_resource`] as the JSON text that crosses to the
    /// host. Override it only to write the text yourself, e.g. a large
    /// object sized up front: the default holds the object twice (as a
    /// `Value` and as text) and grows the text as it writes it.
    fn build_resource_json(ctx: TaskContext) -> Result<String, PluginError> {
        Self::build_resource(ctx).map(|v| v.to_string())
    }

    /// Where the task stands, given the object as last observed in the
    /// cluster. Must answer a phase for any object, even a partial one.
    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError>;
}

/// A middleware plugin: flyteadmin's `UnaryServiceMiddleware`. Implement
/// it on a unit struct and export it with [`export_middleware_plugin!`].
pub trait MiddlewarePlugin {
    /// Decide about one call: proceed (with metadata edits) or reject.
    fn on_request(call: Call) -> Verdict;
}

/// Exports a type implementing [`TaskPlugin`] as the component's
/// `weft:plugin/k8s-task@0.1.0` interface. Invoke it once, at the crate
/// root of a `cdylib`:
///
/// ```
/// use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};
///
/// struct MyPlugin;
///
/// impl TaskPlugin for MyPlugin {
///     fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
///         Err(PluginError::permanent(format!("{} is not implemented", ctx.task_type)))
///     }
///     fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
///         Ok(PhaseInfo::queued())
///     }
/// }
///
/// weft_plugin_sdk::export_task_plugin!(MyPlugin);
/// ```
///
/// Natively it exports nothing, so the crate stays a plain library.
#[cfg(feature = "task")]
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
                ctx: $crate::wit::host::types::TaskContext,
            ) -> ::core::result::Result<::std::string::String, $crate::wit::host::types::PluginError>
            {
                $crate::wit::glue::build_resource::<$t>(ctx)
            }
            fn get_task_phase(
                ctx: $crate::wit::host::types::TaskContext,
                observed: ::std::string::String,
            ) -> ::core::result::Result<
                $crate::wit::host::types::PhaseInfo,
                $crate::wit::host::types::PluginError,
            > {
                $crate::wit::glue::get_task_phase::<$t>(ctx, observed)
            }
        }

        // Only the Wasm build exports the world; natively the plugin is a
        // plain library (unit tests, benchmarks, several plugins linked
        // into one test binary).
        #[cfg(target_arch = "wasm32")]
        $crate::wit::task::export!(__WeftTaskExport with_types_in $crate::wit::task);
    };
}

/// Exports a type implementing [`MiddlewarePlugin`] as the component's
/// `weft:plugin/middleware@0.1.0` interface. Invoke it once, at the crate
/// root of a `cdylib`:
///
/// ```
/// use weft_plugin_sdk::{Call, MiddlewarePlugin, Verdict};
///
/// struct MyMiddleware;
///
/// impl MiddlewarePlugin for MyMiddleware {
///     fn on_request(_call: Call) -> Verdict {
///         Verdict::proceed()
///     }
/// }
///
/// weft_plugin_sdk::export_middleware_plugin!(MyMiddleware);
/// ```
#[cfg(feature = "middleware")]
#[macro_export]
macro_rules! export_middleware_plugin {
    ($t:ty) => {
        #[doc(hidden)]
        pub struct __WeftMiddlewareExport;

        impl $crate::wit::middleware::exports::weft::plugin::middleware::Guest
            for __WeftMiddlewareExport
        {
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

#[cfg(test)]
mod tests;
