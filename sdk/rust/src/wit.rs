//! The generated bindings and the glue between them and the typed API.
//! Not part of the public API: plugins use the export macros.
//!
//! Both worlds can be compiled into one crate (a workspace build unifies
//! the features): with `pub_export_macro`, wit-bindgen describes only a
//! world's *imports* where `generate!` runs, and its exports where its
//! `export!` macro is invoked. A component therefore exports exactly the
//! world whose export macro the plugin crate invoked.

/// The host's imports on their own (log, clock, state, and every shared
/// type), generated once for both worlds.
#[allow(missing_docs, clippy::all)]
pub mod host {
    wit_bindgen::generate!({
        inline: "
            package weft:sdk;
            world host {
                import weft:plugin/log@0.1.0;
                import weft:plugin/clock@0.1.0;
                import weft:plugin/state@0.1.0;
            }
        ",
        path: "../../wit/plugin",
        world: "weft:sdk/host",
        generate_unused_types: true,
        generate_all,
    });
    pub use weft::plugin::{clock, log, state, types};
}

/// Bindings of the `k8s-task-plugin` world.
#[cfg(feature = "task")]
#[allow(missing_docs, clippy::all)]
pub mod task {
    wit_bindgen::generate!({
        path: "../../wit/plugin",
        world: "k8s-task-plugin",
        pub_export_macro: true,
        default_bindings_module: "weft_plugin_sdk::wit::task",
        with: {
            "weft:plugin/types@0.1.0": crate::wit::host::types,
            "weft:plugin/log@0.1.0": crate::wit::host::log,
            "weft:plugin/clock@0.1.0": crate::wit::host::clock,
            "weft:plugin/state@0.1.0": crate::wit::host::state,
        },
    });
}

/// Bindings of the `middleware-plugin` world.
#[cfg(feature = "middleware")]
#[allow(missing_docs, clippy::all)]
pub mod middleware {
    wit_bindgen::generate!({
        path: "../../wit/plugin",
        world: "middleware-plugin",
        pub_export_macro: true,
        default_bindings_module: "weft_plugin_sdk::wit::middleware",
        with: {
            "weft:plugin/types@0.1.0": crate::wit::host::types,
            "weft:plugin/log@0.1.0": crate::wit::host::log,
            "weft:plugin/clock@0.1.0": crate::wit::host::clock,
            "weft:plugin/state@0.1.0": crate::wit::host::state,
        },
    });
}

/// Glue for [`crate::export_task_plugin`].
#[cfg(feature = "task")]
pub mod glue {
    use super::host::types as wit;
    use super::task::exports::weft::plugin::k8s_task as wit_task;
    use crate::{AbortBehaviour, Phase, PhaseInfo, PluginError, TaskContext, TaskPlugin};

    fn context(ctx: wit::TaskContext) -> Result<TaskContext, wit::PluginError> {
        let parse = |what: &str, s: &str| {
            serde_json::from_str(s).map_err(|e| wit::PluginError {
                message: format!("the host sent {what} that is not JSON: {e}"),
                retryable: false,
            })
        };
        Ok(TaskContext {
            config: parse("a config", &ctx.config)?,
            inputs: parse("inputs", &ctx.inputs)?,
            plugin_config: parse("a plugin config", &ctx.plugin_config)?,
            workflow: ctx.workflow,
            namespace: ctx.namespace,
            node_id: ctx.node_id,
            attempt: ctx.attempt,
            task_type: ctx.task_type,
            resource_name: ctx.resource_name,
            labels: ctx.labels.into_iter().collect(),
        })
    }

    fn error(e: PluginError) -> wit::PluginError {
        wit::PluginError {
            message: e.message,
            retryable: e.retryable,
        }
    }

    #[doc(hidden)]
    pub fn properties<T: TaskPlugin>() -> wit_task::TaskProperties {
        #[cfg(all(feature = "webapi", target_arch = "wasm32"))]
        crate::host::world::enter(&super::V01_IMPORTS);
        crate::host::install_panic_hook();
        let p = T::properties();
        wit_task::TaskProperties {
            abort: match p.abort {
                AbortBehaviour::Delete => wit_task::AbortBehaviour::Delete,
                AbortBehaviour::Leave => wit_task::AbortBehaviour::Leave,
            },
            delete_on_finish: p.delete_on_finish,
        }
    }

    #[doc(hidden)]
    pub fn build_resource<T: TaskPlugin>(
        ctx: wit::TaskContext,
    ) -> Result<String, wit::PluginError> {
        #[cfg(all(feature = "webapi", target_arch = "wasm32"))]
        crate::host::world::enter(&super::V01_IMPORTS);
        crate::host::install_panic_hook();
        T::build_resource_json(context(ctx)?).map_err(error)
    }

    #[doc(hidden)]
    pub fn get_task_phase<T: TaskPlugin>(
        ctx: wit::TaskContext,
        observed: String,
    ) -> Result<wit::PhaseInfo, wit::PluginError> {
        #[cfg(all(feature = "webapi", target_arch = "wasm32"))]
        crate::host::world::enter(&super::V01_IMPORTS);
        crate::host::install_panic_hook();
        let observed = serde_json::from_str(&observed).map_err(|e| wit::PluginError {
            message: format!("the observed resource is not JSON: {e}"),
            retryable: false,
        })?;
        let info: PhaseInfo = T::get_task_phase(context(ctx)?, observed).map_err(error)?;
        Ok(wit::PhaseInfo {
            phase: match info.phase {
                Phase::NotReady => wit::Phase::NotReady,
                Phase::Queued => wit::Phase::Queued,
                Phase::WaitingForResources => wit::Phase::WaitingForResources,
                Phase::Initializing => wit::Phase::Initializing,
                Phase::Running => wit::Phase::Running,
                Phase::Success => wit::Phase::Success,
                Phase::RetryableFailure => wit::Phase::RetryableFailure,
                Phase::PermanentFailure => wit::Phase::PermanentFailure,
            },
            reason: info.reason,
            message: info.message,
            outputs: info
                .outputs
                .map(|o| serde_json::Value::Object(o).to_string()),
            log_links: info
                .log_links
                .into_iter()
                .map(|l| wit::LogLink {
                    name: l.name,
                    uri: l.uri,
                })
                .collect(),
        })
    }
}

/// Glue for [`crate::export_middleware_plugin`].
#[cfg(feature = "middleware")]
pub mod mw_glue {
    use super::middleware::exports::weft::plugin::middleware as wit;
    use crate::{Call, Code, MiddlewarePlugin, Verdict};

    fn code(c: Code) -> wit::Code {
        match c {
            Code::Cancelled => wit::Code::Cancelled,
            Code::Unknown => wit::Code::Unknown,
            Code::InvalidArgument => wit::Code::InvalidArgument,
            Code::DeadlineExceeded => wit::Code::DeadlineExceeded,
            Code::NotFound => wit::Code::NotFound,
            Code::AlreadyExists => wit::Code::AlreadyExists,
            Code::PermissionDenied => wit::Code::PermissionDenied,
            Code::ResourceExhausted => wit::Code::ResourceExhausted,
            Code::FailedPrecondition => wit::Code::FailedPrecondition,
            Code::Aborted => wit::Code::Aborted,
            Code::OutOfRange => wit::Code::OutOfRange,
            Code::Unimplemented => wit::Code::Unimplemented,
            Code::Internal => wit::Code::Internal,
            Code::Unavailable => wit::Code::Unavailable,
            Code::DataLoss => wit::Code::DataLoss,
            Code::Unauthenticated => wit::Code::Unauthenticated,
        }
    }

    #[doc(hidden)]
    pub fn on_request<T: MiddlewarePlugin>(call: wit::Call) -> wit::Verdict {
        #[cfg(all(feature = "webapi", target_arch = "wasm32"))]
        crate::host::world::enter(&super::V01_IMPORTS);
        crate::host::install_panic_hook();
        let typed = Call {
            method: call.method,
            metadata: call.metadata.into_iter().collect(),
            peer: call.peer,
            request: call.request.and_then(|r| serde_json::from_str(&r).ok()),
            plugin_config: serde_json::from_str(&call.plugin_config).unwrap_or_default(),
        };
        match T::on_request(typed) {
            Verdict::Proceed { set, remove } => wit::Verdict::Proceed(wit::MetadataEdits {
                set: set.into_iter().collect(),
                remove,
            }),
            Verdict::Reject { code: c, message } => wit::Verdict::Reject(wit::Rejection {
                code: code(c),
                message,
            }),
        }
    }
}

/// Bindings of the `webapi-task-plugin` world of `weft:plugin@0.2.0`:
/// its own types, log, clock and state, `wasi:http` (types and
/// outgoing-handler) and what they use of `wasi:io` and `wasi:clocks`.
#[cfg(feature = "webapi")]
#[allow(missing_docs, clippy::all)]
pub mod webapi {
    wit_bindgen::generate!({
        path: "../../wit/plugin-0.2",
        world: "webapi-task-plugin",
        pub_export_macro: true,
        default_bindings_module: "weft_plugin_sdk::wit::webapi",
        generate_all,
    });
}

/// The host imports of the 0.1 worlds, as the table that
/// [`crate::host::world`] dispatches through once `webapi` is on.
#[cfg(all(
    feature = "webapi",
    target_arch = "wasm32",
    any(feature = "task", feature = "middleware")
))]
pub(crate) static V01_IMPORTS: crate::host::world::Imports = crate::host::world::Imports {
    log: host::log::log,
    now_millis: host::clock::now_millis,
    monotonic_nanos: host::clock::monotonic_nanos,
    get: host::state::get,
    set: host::state::set,
    delete: host::state::delete,
};

/// The host imports of the web-API world (`weft:plugin/*@0.2.0`).
#[cfg(all(feature = "webapi", target_arch = "wasm32"))]
pub(crate) static V02_IMPORTS: crate::host::world::Imports = crate::host::world::Imports {
    log: |level, message| {
        use host::types::Level as V01;
        use webapi::weft::plugin::types::Level as L;
        let level = match level {
            V01::Trace => L::Trace,
            V01::Debug => L::Debug,
            V01::Info => L::Info,
            V01::Warn => L::Warn,
            V01::Error => L::Error,
        };
        webapi::weft::plugin::log::log(level, message)
    },
    now_millis: webapi::weft::plugin::clock::now_millis,
    monotonic_nanos: webapi::weft::plugin::clock::monotonic_nanos,
    get: webapi::weft::plugin::state::get,
    set: webapi::weft::plugin::state::set,
    delete: webapi::weft::plugin::state::delete,
};

/// Glue for [`crate::export_webapi_plugin`].
#[cfg(feature = "webapi")]
pub mod webapi_glue {
    use super::webapi::weft::plugin::types as wit;
    use crate::{Phase, PhaseInfo, PluginError, TaskContext, WebApiPlugin};

    /// Every call enters here: the SDK's log, clock and state go to this
    /// world's imports, and a panic is logged through them.
    fn enter() {
        #[cfg(target_arch = "wasm32")]
        crate::host::world::enter(&super::V02_IMPORTS);
        crate::host::install_panic_hook();
    }

    fn context(ctx: wit::TaskContext) -> Result<TaskContext, wit::PluginError> {
        let parse = |what: &str, s: &str| {
            serde_json::from_str(s).map_err(|e| wit::PluginError {
                message: format!("the host sent {what} that is not JSON: {e}"),
                retryable: false,
            })
        };
        Ok(TaskContext {
            config: parse("a config", &ctx.config)?,
            inputs: parse("inputs", &ctx.inputs)?,
            plugin_config: parse("a plugin config", &ctx.plugin_config)?,
            workflow: ctx.workflow,
            namespace: ctx.namespace,
            node_id: ctx.node_id,
            attempt: ctx.attempt,
            task_type: ctx.task_type,
            resource_name: ctx.resource_name,
            labels: ctx.labels.into_iter().collect(),
        })
    }

    fn error(e: PluginError) -> wit::PluginError {
        wit::PluginError {
            message: e.message,
            retryable: e.retryable,
        }
    }

    fn phase_info(info: PhaseInfo) -> wit::PhaseInfo {
        wit::PhaseInfo {
            phase: match info.phase {
                Phase::NotReady => wit::Phase::NotReady,
                Phase::Queued => wit::Phase::Queued,
                Phase::WaitingForResources => wit::Phase::WaitingForResources,
                Phase::Initializing => wit::Phase::Initializing,
                Phase::Running => wit::Phase::Running,
                Phase::Success => wit::Phase::Success,
                Phase::RetryableFailure => wit::Phase::RetryableFailure,
                Phase::PermanentFailure => wit::Phase::PermanentFailure,
            },
            reason: info.reason,
            message: info.message,
            outputs: info
                .outputs
                .map(|o| serde_json::Value::Object(o).to_string()),
            log_links: info
                .log_links
                .into_iter()
                .map(|l| wit::LogLink {
                    name: l.name,
                    uri: l.uri,
                })
                .collect(),
        }
    }

    #[doc(hidden)]
    pub fn create<T: WebApiPlugin>(
        ctx: wit::TaskContext,
        idempotency_key: String,
    ) -> Result<String, wit::PluginError> {
        enter();
        T::create(context(ctx)?, &idempotency_key).map_err(error)
    }

    #[doc(hidden)]
    pub fn get<T: WebApiPlugin>(
        ctx: wit::TaskContext,
        meta: String,
    ) -> Result<wit::PhaseInfo, wit::PluginError> {
        enter();
        T::get(context(ctx)?, &meta).map(phase_info).map_err(error)
    }

    #[doc(hidden)]
    pub fn delete<T: WebApiPlugin>(
        ctx: wit::TaskContext,
        meta: String,
    ) -> Result<(), wit::PluginError> {
        enter();
        T::delete(context(ctx)?, &meta).map_err(error)
    }
}
