//! The middleware world (`weft:plugin/middleware-plugin`): a gRPC call as
//! a middleware sees it, its verdict, and a loaded middleware version.

use std::{fmt, sync::Arc};

use serde_json::{Map, Value};

use crate::bindings::middleware::MiddlewarePlugin as MiddlewareBindings;
use crate::call::{CallError, Common};
use crate::{
    bindings::middleware::{
        MiddlewarePluginPre,
        exports::weft::plugin::middleware::{self as wit_mw},
    },
    engine::Digest,
    host::HostState,
    manifest::{FailStrategy, Manifest},
    prepared::Spares,
};

/// A gRPC call as a middleware sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MiddlewareCall {
    /// Full method path.
    pub method: String,
    /// Request metadata, lower-case keys.
    pub metadata: Vec<(String, String)>,
    /// The peer's address.
    pub peer: Option<String>,
    /// The request as JSON; passed only when the manifest asks for it.
    pub request: Option<String>,
}

/// gRPC status codes a middleware may answer with.
pub use wit_mw::Code as RejectCode;

/// A middleware's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the call through with these metadata edits.
    Proceed {
        /// Keys to set.
        set: Vec<(String, String)>,
        /// Keys to remove.
        remove: Vec<String>,
    },
    /// Answer the call with an error.
    Reject {
        /// The gRPC code.
        code: RejectCode,
        /// The message.
        message: String,
    },
}

/// The numeric gRPC status code of a rejection code.
pub fn grpc_code(code: RejectCode) -> i32 {
    match code {
        RejectCode::Cancelled => 1,
        RejectCode::Unknown => 2,
        RejectCode::InvalidArgument => 3,
        RejectCode::DeadlineExceeded => 4,
        RejectCode::NotFound => 5,
        RejectCode::AlreadyExists => 6,
        RejectCode::PermissionDenied => 7,
        RejectCode::ResourceExhausted => 8,
        RejectCode::FailedPrecondition => 9,
        RejectCode::Aborted => 10,
        RejectCode::OutOfRange => 11,
        RejectCode::Unimplemented => 12,
        RejectCode::Internal => 13,
        RejectCode::Unavailable => 14,
        RejectCode::DataLoss => 15,
        RejectCode::Unauthenticated => 16,
    }
}

/// A loaded middleware plugin version.
#[derive(Clone)]
pub struct MiddlewarePlugin {
    pub(crate) common: Common,
    pub(crate) pre: MiddlewarePluginPre<HostState>,
    pub(crate) spares: Arc<Spares<MiddlewareBindings>>,
}

impl fmt::Debug for MiddlewarePlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MiddlewarePlugin({}@{} {:?})",
            self.common.name, self.common.manifest.version, self.common.digest
        )
    }
}

impl MiddlewarePlugin {
    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common.manifest
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.common.name
    }

    /// The component digest of this version.
    pub fn digest(&self) -> Digest {
        self.common.digest
    }

    /// What to do when this plugin faults.
    pub fn fail_strategy(&self) -> FailStrategy {
        self.common.manifest.middleware.fail_strategy
    }

    /// Replace the plugin configuration (see [`crate::task::TaskPlugin::set_config_overrides`]).
    pub fn set_config_overrides(&mut self, overrides: &Map<String, Value>) {
        self.common.set_config_overrides(overrides);
    }

    /// Replace the whole configuration (see [`crate::task::TaskPlugin::set_config`]).
    pub fn set_config(&mut self, config: Map<String, Value>) {
        self.common.set_config(config);
    }

    /// How many prepared instances are ready now (see [`crate::task::TaskPlugin::spares_ready`]).
    pub fn spares_ready(&self) -> usize {
        self.spares.ready()
    }

    /// Decide on one call. The request body is dropped unless the manifest asks for it.
    pub fn on_request(&self, call: &MiddlewareCall) -> Result<Verdict, CallError> {
        const CALL: &str = "on-request";
        let wcall = wit_mw::Call {
            method: call.method.clone(),
            metadata: call.metadata.clone(),
            peer: call.peer.clone(),
            request: if self.common.manifest.middleware.request_body {
                call.request.clone()
            } else {
                None
            },
            plugin_config: self.common.config_json.clone(),
        };
        let (mut store, instance) = self
            .common
            .fresh(&self.spares, CALL, |s| self.pre.instantiate(s));
        let result = instance.and_then(|i| {
            i.weft_plugin_middleware()
                .call_on_request(&mut *store, &wcall)
        });
        let verdict = match result {
            Ok(v) => v,
            Err(e) => return Err(self.common.classify(&mut store, CALL, e)),
        };
        store.data_mut().flush_stdio();
        drop(store);
        Ok(match verdict {
            wit_mw::Verdict::Proceed(edits) => Verdict::Proceed {
                set: edits.set,
                remove: edits.remove,
            },
            wit_mw::Verdict::Reject(r) => {
                self.common.check_output(CALL, &r.message)?;
                Verdict::Reject {
                    code: r.code,
                    message: r.message,
                }
            }
        })
    }
}
