//! The generated bindings and the glue between them and the typed API.
//! Not part of the public API: plugins use the export macros.

#[cfg(all(
    target_arch = "wasm32",
    not(any(feature = "task", feature = "middleware"))
))]
compile_error!("enable the `task` or the `middleware` feature of weft-plugin-sdk");

// Natively (unit tests of a whole plugin workspace) both may be on: only
// the Wasm build exports a world.
#[cfg(all(target_arch = "wasm32", feature = "task", feature = "middleware"))]
compile_error!(
    "enable only one of the `task` and `middleware` features: a component implements one world"
);

/// Bindings of the `k8s-task-plugin` world.
#[cfg(feature = "task")]
#[allow(missing_docs, clippy::all)]
pub mod task {
    wit_bindgen::generate!({
        path: "../../wit/plugin",
        world: "k8s-task-plugin",
        pub_export_macro: true,
        default_bindings_module: "weft_plugin_sdk::wit::task",
    });
    pub use weft::plugin::{clock, log, state};
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
    });
    pub use weft::plugin::{clock, log, state};
}

#[cfg(all(feature = "middleware", not(feature = "task")))]
#[allow(unused_imports)]
pub(crate) use middleware as world;
/// The bindings whose imports this build uses.
#[cfg(feature = "task")]
#[allow(unused_imports)]
pub(crate) use task as world;

/// Glue for [`crate::export_task_plugin`].
#[cfg(feature = "task")]
pub mod glue {
    use super::task::exports::weft::plugin::k8s_task as wit_task;
    use super::task::weft::plugin::types as wit;
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
        crate::host::install_panic_hook();
        let obj = T::build_resource(context(ctx)?).map_err(error)?;
        Ok(obj.to_string())
    }

    #[doc(hidden)]
    pub fn get_task_phase<T: TaskPlugin>(
        ctx: wit::TaskContext,
        observed: String,
    ) -> Result<wit::PhaseInfo, wit::PluginError> {
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
