//! Write [Weft](https://github.com/weft-dev/weft) plugins in Rust.
//!
//! A **task plugin** turns a workflow task into a Kubernetes resource and
//! says what the resource's state means (Flyte's `BuildResource` /
//! `GetTaskPhase`); a **web-API task plugin** runs a task as a job of a
//! web service it calls over HTTP (Flyte's async agents: create, get,
//! delete); a **middleware plugin** decides about one gRPC call of the
//! admin API (flyteadmin's `UnaryServiceMiddleware`). The host runs each
//! as a sandboxed WebAssembly component that implements one world of the
//! `weft:plugin` WIT package (`@0.1.0`; the web-API world is new in
//! `@0.2.0`). This crate hides the generated bindings behind typed values
//! (Kubernetes objects are [`serde_json::Value`]s) and gives one export
//! macro per world:
//!
//! | world                | feature      | implement            | export with                    |
//! |----------------------|--------------|----------------------|--------------------------------|
//! | `k8s-task-plugin`    | `task`       | [`TaskPlugin`]       | [`export_task_plugin!`]        |
//! | `middleware-plugin`  | `middleware` | [`MiddlewarePlugin`] | [`export_middleware_plugin!`]  |
//! | `webapi-task-plugin` | `webapi`     | `WebApiPlugin`       | `export_webapi_plugin!`        |
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
//! # A web-API task plugin
//!
//! With the `webapi` feature (`weft-plugin-sdk = { version = "0.1",
//! default-features = false, features = ["webapi"] }`), a plugin
//! implements `WebApiPlugin` and talks to its service with the blocking
//! client in `http` (`wasi:http` underneath, so still no WASI std). The
//! host calls `create` once per attempt and keeps the string it returns
//! (the *meta*: what identifies the remote job, at most 4 KiB), polls
//! `get` with it until a terminal phase, and calls `delete` on abort or
//! timeout. The host only lets requests through to what the manifest's
//! `egress.allow` (narrowed by the operator) allows, and adds credential
//! headers itself: a plugin never reads a Secret.
//!
//! ```
//! # #[cfg(feature = "webapi")]
//! # mod example {
//! use serde::Deserialize;
//! use weft_plugin_sdk::http::{encode_path_segment, Request};
//! use weft_plugin_sdk::{json, PhaseInfo, PluginError, TaskContext, Value, WebApiPlugin};
//!
//! /// The task's `config`, typed.
//! #[derive(Deserialize)]
//! struct Config {
//!     query: String,
//! }
//!
//! pub struct Batch;
//!
//! /// The service, from the plugin's config (manifest default or operator).
//! fn api(ctx: &TaskContext) -> Result<String, PluginError> {
//!     ctx.plugin_config["url"]
//!         .as_str()
//!         .map(|u| u.trim_end_matches('/').to_string())
//!         .ok_or_else(|| PluginError::permanent("the plugin config has no url"))
//! }
//!
//! impl WebApiPlugin for Batch {
//!     fn create(ctx: TaskContext, idempotency_key: &str) -> Result<String, PluginError> {
//!         let config: Config = ctx.config_as()?;
//!         // The key is the same for every create of this attempt: a create
//!         // repeated after a controller crash finds the job it started.
//!         let resp = Request::put(format!("{}/jobs/{}", api(&ctx)?, encode_path_segment(idempotency_key)))
//!             .with_json(&json!({"query": config.query}))
//!             .send()?; // transport failures are retryable, a denied URL is not
//!         if !resp.is_success() {
//!             let permanent = (400..500).contains(&resp.status);
//!             let message = format!("the service answered {}: {}", resp.status, resp.text());
//!             return Err(if permanent { PluginError::permanent(message) } else { PluginError::retryable(message) });
//!         }
//!         Ok(idempotency_key.to_string()) // the meta: all `get` and `delete` need
//!     }
//!
//!     fn get(ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
//!         let url = format!("{}/jobs/{}", api(&ctx)?, encode_path_segment(meta));
//!         let job: Value = Request::get(&url).send()?.json()?;
//!         Ok(match job["state"].as_str() {
//!             Some("DONE") => PhaseInfo::success(job["result"].as_object().cloned()),
//!             Some("FAILED") => PhaseInfo::permanent("Failed", job["error"].as_str().unwrap_or("")),
//!             Some("RUNNING") => PhaseInfo::running(),
//!             _ => PhaseInfo::queued(),
//!         }
//!         .with_log_link("Job", url))
//!     }
//!
//!     fn delete(ctx: TaskContext, meta: &str) -> Result<(), PluginError> {
//!         let resp = Request::delete(format!("{}/jobs/{}", api(&ctx)?, encode_path_segment(meta))).send()?;
//!         match resp.status {
//!             200..=299 | 404 => Ok(()), // gone already: nothing to stop
//!             status => Err(PluginError::retryable(format!("delete answered {status}"))),
//!         }
//!     }
//! }
//!
//! weft_plugin_sdk::export_webapi_plugin!(Batch);
//! # }
//! ```
//!
//! Natively, `http::native::set_responder` answers the plugin's requests,
//! so the whole create/get/delete flow is unit-tested with plain
//! `cargo test` against recorded exchanges. Its manifest says
//! `world: webapi-task-plugin` and, instead of resources, where it may
//! connect and how the host polls it:
//!
//! ```yaml
//! name: batch
//! version: 0.1.0
//! world: webapi-task-plugin
//! taskTypes: [batch]
//! limits: {deadline: 1s, memory: 64Mi}
//! egress:
//!   allow:
//!     - {host: batch.example.com, ports: [443], methods: [GET, PUT, DELETE], schemes: [https]}
//!   timeout: 30s        # one request, connection to last byte
//!   maxResponse: 1Mi    # a larger body fails with http::ErrorKind::TooLarge
//!   concurrency: 4
//! poll: {initial: 1s, max: 30s}
//! config: {url: "https://batch.example.com/v1"}
//! ```
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
//!
//! `webapi` (off by default) adds `WebApiPlugin`, `export_webapi_plugin!`
//! and the `http` client, with bindings generated from
//! `weft:plugin@0.2.0`. It is additive too: [`log`], [`clock`] and
//! [`state`] then call the imports of the world whose export a call
//! entered by (0.1 or 0.2), so each component imports only its own
//! world's interfaces. Without it a 0.1 component is byte-for-byte what it
//! was before the feature existed.

#![deny(missing_docs)]

mod alloc;
mod host;
mod types;

#[cfg(feature = "task")]
pub mod pods;

pub use alloc::OneCallAllocator;

#[doc(hidden)]
pub mod wit;

#[cfg(feature = "webapi")]
pub mod http;

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

/// A web-API task plugin: Flyte's async agent (create / get / delete).
/// Implement it on a unit struct and export it with
/// [`export_webapi_plugin!`]; talk to the service with [`http`].
///
/// Every call gets a fresh instance: what a later call needs must be in
/// the meta that `create` returns (or in [`state`]).
#[cfg(feature = "webapi")]
pub trait WebApiPlugin {
    /// Starts the job and answers its *meta*: what identifies it (a job
    /// id, a URL, a small JSON object as text), opaque to the host, which
    /// keeps it in the node's status (at most 4 KiB) and hands it to
    /// [`WebApiPlugin::get`] and [`WebApiPlugin::delete`].
    ///
    /// `idempotency_key` is the same for every create of this attempt,
    /// across controller restarts: give it to the service (as the job's
    /// id, an `Idempotency-Key` header) so that a create repeated after a
    /// crash finds the job instead of starting a second one.
    fn create(ctx: TaskContext, idempotency_key: &str) -> Result<String, PluginError>;

    /// Where the job stands: a phase, outputs on success, log links to
    /// the service's UI. An `Err` is about asking (retryable: the host
    /// polls again); a failed job is a failure phase.
    fn get(ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError>;

    /// Stops the job (workflow aborted, node timed out). Stopping one that
    /// already ended, or that the service no longer knows, is not an error.
    fn delete(ctx: TaskContext, meta: &str) -> Result<(), PluginError>;
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

/// Exports a type implementing [`WebApiPlugin`] as the component's
/// `weft:plugin/webapi-task@0.2.0` interface. Invoke it once, at the crate
/// root of a `cdylib`:
///
/// ```
/// use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, WebApiPlugin};
///
/// struct MyAgent;
///
/// impl WebApiPlugin for MyAgent {
///     fn create(_ctx: TaskContext, key: &str) -> Result<String, PluginError> {
///         Ok(key.to_string())
///     }
///     fn get(_ctx: TaskContext, _meta: &str) -> Result<PhaseInfo, PluginError> {
///         Ok(PhaseInfo::success(None))
///     }
///     fn delete(_ctx: TaskContext, _meta: &str) -> Result<(), PluginError> {
///         Ok(())
///     }
/// }
///
/// weft_plugin_sdk::export_webapi_plugin!(MyAgent);
/// ```
///
/// Natively it exports nothing, so the crate stays a plain library.
#[cfg(feature = "webapi")]
#[macro_export]
macro_rules! export_webapi_plugin {
    ($t:ty) => {
        #[doc(hidden)]
        pub struct __WeftWebApiExport;

        impl $crate::wit::webapi::exports::weft::plugin::webapi_task::Guest for __WeftWebApiExport {
            fn create(
                ctx: $crate::wit::webapi::weft::plugin::types::TaskContext,
                idempotency_key: ::std::string::String,
            ) -> ::core::result::Result<
                ::std::string::String,
                $crate::wit::webapi::weft::plugin::types::PluginError,
            > {
                $crate::wit::webapi_glue::create::<$t>(ctx, idempotency_key)
            }
            fn get(
                ctx: $crate::wit::webapi::weft::plugin::types::TaskContext,
                meta: ::std::string::String,
            ) -> ::core::result::Result<
                $crate::wit::webapi::weft::plugin::types::PhaseInfo,
                $crate::wit::webapi::weft::plugin::types::PluginError,
            > {
                $crate::wit::webapi_glue::get::<$t>(ctx, meta)
            }
            fn delete(
                ctx: $crate::wit::webapi::weft::plugin::types::TaskContext,
                meta: ::std::string::String,
            ) -> ::core::result::Result<(), $crate::wit::webapi::weft::plugin::types::PluginError>
            {
                $crate::wit::webapi_glue::delete::<$t>(ctx, meta)
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::wit::webapi::export!(__WeftWebApiExport with_types_in $crate::wit::webapi);
    };
}

#[cfg(test)]
mod tests;
