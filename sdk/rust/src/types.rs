//! The typed values plugins see and return.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Everything the host tells a task plugin about a task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskContext {
    /// The owning Workflow's name.
    pub workflow: String,
    /// Its namespace (the host forces every resource into it).
    pub namespace: String,
    /// The node's id (with `-<index>` for an array item).
    pub node_id: String,
    /// Attempt number from 0.
    pub attempt: u32,
    /// The task type.
    pub task_type: String,
    /// The node's task config.
    pub config: Value,
    /// The node's resolved inputs.
    pub inputs: Value,
    /// The deterministic name to give the resource (a DNS-1123 label).
    pub resource_name: String,
    /// Labels the host sets on the resource.
    pub labels: BTreeMap<String, String>,
    /// The plugin's configuration: manifest defaults merged with overrides.
    pub plugin_config: Value,
}

impl TaskContext {
    /// The task config as a typed value, or a permanent error naming the problem.
    pub fn config_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, PluginError> {
        serde_json::from_value(self.config.clone())
            .map_err(|e| PluginError::permanent(format!("invalid task config: {e}")))
    }

    /// The plugin config as a typed value.
    pub fn plugin_config_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, PluginError> {
        serde_json::from_value(self.plugin_config.clone())
            .map_err(|e| PluginError::permanent(format!("invalid plugin config: {e}")))
    }
}

/// Flyte's plugin phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Cannot start yet.
    NotReady,
    /// Accepted, waiting to be scheduled.
    Queued,
    /// Waiting for capacity.
    WaitingForResources,
    /// Starting.
    Initializing,
    /// Running.
    Running,
    /// Done, successfully.
    Success,
    /// Failed; a retry may help.
    RetryableFailure,
    /// Failed for good.
    PermanentFailure,
}

/// A link to logs or a UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLink {
    /// Display name.
    pub name: String,
    /// Where.
    pub uri: String,
}

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseInfo {
    /// The phase.
    pub phase: Phase,
    /// Machine-readable reason; `System:` marks a platform failure.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// Outputs of a successful task.
    pub outputs: Option<Map<String, Value>>,
    /// Log links.
    pub log_links: Vec<LogLink>,
}

impl PhaseInfo {
    fn of(phase: Phase) -> Self {
        PhaseInfo {
            phase,
            reason: None,
            message: None,
            outputs: None,
            log_links: Vec::new(),
        }
    }

    /// Waiting to be scheduled.
    pub fn queued() -> Self {
        Self::of(Phase::Queued)
    }

    /// Waiting for capacity, with why.
    pub fn waiting_for_resources(message: impl Into<String>) -> Self {
        Self::of(Phase::WaitingForResources).with_message(message)
    }

    /// Starting.
    pub fn initializing() -> Self {
        Self::of(Phase::Initializing)
    }

    /// Running.
    pub fn running() -> Self {
        Self::of(Phase::Running)
    }

    /// Succeeded, with outputs.
    pub fn success(outputs: Option<Map<String, Value>>) -> Self {
        PhaseInfo {
            outputs,
            ..Self::of(Phase::Success)
        }
    }

    /// A failure of the task that a retry may fix.
    pub fn retryable(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Phase::RetryableFailure)
            .with_reason(reason)
            .with_message(message)
    }

    /// A failure no retry will fix.
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Phase::PermanentFailure)
            .with_reason(reason)
            .with_message(message)
    }

    /// A failure of the platform (eviction, node loss): retryable, counted
    /// on the system budget (the reason gets the `System:` prefix).
    pub fn system(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Phase::RetryableFailure)
            .with_reason(format!("System:{}", reason.into()))
            .with_message(message)
    }

    /// Set the reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Set the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Add a log link.
    pub fn with_log_link(mut self, name: impl Into<String>, uri: impl Into<String>) -> Self {
        self.log_links.push(LogLink {
            name: name.into(),
            uri: uri.into(),
        });
        self
    }
}

/// An error a plugin returns on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// What went wrong.
    pub message: String,
    /// Whether a new attempt may succeed.
    pub retryable: bool,
}

impl PluginError {
    /// An error no retry fixes (bad config).
    pub fn permanent(message: impl Into<String>) -> Self {
        PluginError {
            message: message.into(),
            retryable: false,
        }
    }

    /// An error a retry may fix.
    pub fn retryable(message: impl Into<String>) -> Self {
        PluginError {
            message: message.into(),
            retryable: true,
        }
    }
}

impl core::fmt::Display for PluginError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What the host does with a task's resource on abort.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AbortBehaviour {
    /// Delete it.
    #[default]
    Delete,
    /// Leave it.
    Leave,
}

/// Static facts about a task plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskProperties {
    /// On abort.
    pub abort: AbortBehaviour,
    /// Delete the resource once the task finished.
    pub delete_on_finish: bool,
}

/// gRPC status codes a middleware can reject with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Code {
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

/// A gRPC call as a middleware sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Call {
    /// `/package.Service/Method`.
    pub method: String,
    /// Request metadata (lower-case keys).
    pub metadata: BTreeMap<String, String>,
    /// The peer address, when known.
    pub peer: Option<String>,
    /// The request as JSON, when the manifest asks for it.
    pub request: Option<Value>,
    /// The plugin's configuration.
    pub plugin_config: Value,
}

/// A middleware's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the call through, editing its metadata.
    Proceed {
        /// Metadata to set.
        set: BTreeMap<String, String>,
        /// Metadata keys to remove.
        remove: Vec<String>,
    },
    /// Refuse it.
    Reject {
        /// The gRPC code.
        code: Code,
        /// The message.
        message: String,
    },
}

impl Verdict {
    /// Proceed with no edits.
    pub fn proceed() -> Self {
        Verdict::Proceed {
            set: BTreeMap::new(),
            remove: Vec::new(),
        }
    }

    /// Proceed, setting one metadata entry (chain [`Verdict::and_set`] for more).
    pub fn proceed_setting(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::proceed().and_set(key, value)
    }

    /// Add a metadata entry to a proceed verdict.
    pub fn and_set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Verdict::Proceed { set, .. } = &mut self {
            set.insert(key.into(), value.into());
        }
        self
    }

    /// Reject.
    pub fn reject(code: Code, message: impl Into<String>) -> Self {
        Verdict::Reject {
            code,
            message: message.into(),
        }
    }
}
