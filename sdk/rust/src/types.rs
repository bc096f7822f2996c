//! The typed values plugins see and return.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Everything the host tells a task plugin about a task.
///
/// The host sends `config`, `inputs` and `plugin_config` as JSON text; the
/// SDK parses them before the plugin sees them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskContext {
    /// Name of the owning Workflow resource.
    pub workflow: String,
    /// Namespace of the Workflow; the host forces every created resource into it.
    pub namespace: String,
    /// The node's id inside the workflow.
    pub node_id: String,
    /// Attempt number, starting at 0; retries increment it.
    pub attempt: u32,
    /// The task type the node asked for (e.g. `pod`).
    pub task_type: String,
    /// The node's `task.config`, a JSON object.
    pub config: Value,
    /// The node's resolved inputs, a JSON object.
    pub inputs: Value,
    /// The name to give the resource of this attempt: deterministic, a
    /// DNS-1123 label. Use it so a re-run after a crash finds the same
    /// resource instead of creating another.
    pub resource_name: String,
    /// Labels the host puts on every resource of this task.
    pub labels: BTreeMap<String, String>,
    /// The plugin's configuration: the manifest's `config` merged with the
    /// operator's overrides, a JSON object.
    pub plugin_config: Value,
}

impl TaskContext {
    /// The task config as a typed value. A config that does not fit is the
    /// user's mistake: a permanent error that names the problem.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use weft_plugin_sdk::{json, TaskContext};
    ///
    /// #[derive(Debug, Deserialize)]
    /// struct Config {
    ///     image: String,
    /// }
    ///
    /// let ctx = TaskContext { config: json!({"image": "alpine:3"}), ..TaskContext::default() };
    /// assert_eq!(ctx.config_as::<Config>().unwrap().image, "alpine:3");
    ///
    /// let ctx = TaskContext { config: json!({}), ..TaskContext::default() };
    /// let err = ctx.config_as::<Config>().unwrap_err();
    /// assert!(!err.retryable);
    /// assert!(err.message.contains("missing field `image`"));
    /// ```
    pub fn config_as<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        T::deserialize(&self.config)
            .map_err(|e| PluginError::permanent(format!("invalid task config: {e}")))
    }

    /// The task's inputs as a typed value (a permanent error if they do not fit).
    pub fn inputs_as<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        T::deserialize(&self.inputs)
            .map_err(|e| PluginError::permanent(format!("invalid task inputs: {e}")))
    }

    /// The plugin config as a typed value (a permanent error if it does not fit).
    pub fn plugin_config_as<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        T::deserialize(&self.plugin_config)
            .map_err(|e| PluginError::permanent(format!("invalid plugin config: {e}")))
    }
}

/// Where a task stands: flytepropeller's plugin phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The task cannot start yet.
    NotReady,
    /// The resource was accepted and waits to be scheduled.
    Queued,
    /// The resource waits for capacity (quota, nodes, executors).
    WaitingForResources,
    /// The resource was scheduled and is starting.
    Initializing,
    /// The task is running.
    Running,
    /// The task finished successfully.
    Success,
    /// The task failed in a way a new attempt may fix.
    RetryableFailure,
    /// The task failed in a way no retry will fix.
    PermanentFailure,
}

impl Phase {
    /// Whether the task is over (succeeded or failed).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Phase::Success | Phase::RetryableFailure | Phase::PermanentFailure
        )
    }
}

/// A link to logs or a UI for the task (Flyte's TaskLog).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLink {
    /// Human-readable name, e.g. `Pod logs`.
    pub name: String,
    /// Where to find it.
    pub uri: String,
}

/// The answer to "where does this task stand?", built with the
/// constructors below.
///
/// ```
/// use weft_plugin_sdk::{json, Phase, PhaseInfo};
///
/// let done = PhaseInfo::success(json!({"rows": 42}).as_object().cloned());
/// assert_eq!(done.phase, Phase::Success);
///
/// let oom = PhaseInfo::retryable("OOMKilled", "container main exited with 137")
///     .with_log_link("Pod logs", "kubectl logs -n team-a wf-train-0");
/// assert_eq!(oom.reason.as_deref(), Some("OOMKilled"));
///
/// // The platform's fault, not the task's: counted on the system retry budget.
/// let evicted = PhaseInfo::system("Evicted", "the node ran out of disk");
/// assert_eq!(evicted.phase, Phase::RetryableFailure);
/// assert_eq!(evicted.reason.as_deref(), Some("System:Evicted"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseInfo {
    /// The phase.
    pub phase: Phase,
    /// A short machine-readable reason, e.g. `OOMKilled`. A reason that
    /// starts with `System:` marks a platform failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Outputs of a successful task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Map<String, Value>>,
    /// Links to logs and UIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_links: Vec<LogLink>,
}

impl PhaseInfo {
    /// A bare phase, without reason, message, outputs or links.
    pub fn new(phase: Phase) -> Self {
        PhaseInfo {
            phase,
            reason: None,
            message: None,
            outputs: None,
            log_links: Vec::new(),
        }
    }

    /// The task cannot start yet, and why.
    pub fn not_ready(message: impl Into<String>) -> Self {
        Self::new(Phase::NotReady).with_message(message)
    }

    /// Accepted, waiting to be scheduled.
    pub fn queued() -> Self {
        Self::new(Phase::Queued)
    }

    /// Waiting for capacity, and why.
    pub fn waiting_for_resources(message: impl Into<String>) -> Self {
        Self::new(Phase::WaitingForResources).with_message(message)
    }

    /// Scheduled and starting.
    pub fn initializing() -> Self {
        Self::new(Phase::Initializing)
    }

    /// Running.
    pub fn running() -> Self {
        Self::new(Phase::Running)
    }

    /// Succeeded, with outputs (a JSON object) or none.
    pub fn success(outputs: Option<Map<String, Value>>) -> Self {
        PhaseInfo {
            outputs,
            ..Self::new(Phase::Success)
        }
    }

    /// A failure of the task that a new attempt may fix.
    pub fn retryable(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Phase::RetryableFailure)
            .with_reason(reason)
            .with_message(message)
    }

    /// A failure no retry will fix (bad image, invalid spec, the task's own deadline).
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Phase::PermanentFailure)
            .with_reason(reason)
            .with_message(message)
    }

    /// A failure of the platform (eviction, preemption, node loss): retryable,
    /// and counted on the system retry budget, not the task's. The reason
    /// gets the `System:` prefix the host looks for.
    pub fn system(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Phase::RetryableFailure)
            .with_reason(format!("System:{}", reason.into()))
            .with_message(message)
    }

    /// Sets the reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Adds a log link.
    pub fn with_log_link(mut self, name: impl Into<String>, uri: impl Into<String>) -> Self {
        self.log_links.push(LogLink {
            name: name.into(),
            uri: uri.into(),
        });
        self
    }

    /// Whether the reason marks a platform failure (`System:`).
    pub fn is_system_failure(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r.starts_with("System:"))
    }
}

/// An error a plugin returns on purpose (a trap is something else: a bug
/// or a broken limit).
///
/// ```
/// use weft_plugin_sdk::PluginError;
///
/// let bad_config = PluginError::permanent("config.image is required");
/// let api_down = PluginError::retryable("the quota service did not answer");
/// assert!(!bad_config.retryable && api_down.retryable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// What went wrong, for the user.
    pub message: String,
    /// Whether a new attempt may succeed.
    pub retryable: bool,
}

impl PluginError {
    /// An error no retry fixes (a bad config).
    pub fn permanent(message: impl Into<String>) -> Self {
        PluginError {
            message: message.into(),
            retryable: false,
        }
    }

    /// An error a new attempt may not have.
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

impl std::error::Error for PluginError {}

/// JSON that does not fit is permanent: the same input fails the same way.
impl From<serde_json::Error> for PluginError {
    fn from(e: serde_json::Error) -> Self {
        PluginError::permanent(e.to_string())
    }
}

/// What the host does with a task's resource when its workflow is aborted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AbortBehaviour {
    /// Delete it (the default).
    #[default]
    Delete,
    /// Leave it in place (a resource that cleans itself up).
    Leave,
}

/// Static facts about a task plugin, asked once per load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskProperties {
    /// What to do with the resource on abort.
    pub abort: AbortBehaviour,
    /// Whether the host deletes the resource once the task succeeded or failed.
    pub delete_on_finish: bool,
}

/// gRPC status codes a middleware may reject with (all but OK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The operation was cancelled.
    Cancelled,
    /// Unknown error.
    Unknown,
    /// The client sent something invalid.
    InvalidArgument,
    /// A deadline expired.
    DeadlineExceeded,
    /// Something was not found.
    NotFound,
    /// Something already exists.
    AlreadyExists,
    /// The caller may not do this.
    PermissionDenied,
    /// A quota or rate limit was hit.
    ResourceExhausted,
    /// The system is not in a state to do this.
    FailedPrecondition,
    /// The operation was aborted.
    Aborted,
    /// Out of range.
    OutOfRange,
    /// Not implemented.
    Unimplemented,
    /// An internal error.
    Internal,
    /// The service is unavailable; the caller may retry.
    Unavailable,
    /// Data was lost.
    DataLoss,
    /// The caller is not authenticated.
    Unauthenticated,
}

/// One incoming unary gRPC call, as a middleware sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Call {
    /// Full method path, e.g. `/weft.admin.v1.AdminService/GetExecution`.
    pub method: String,
    /// Request metadata (headers) with lower-case keys; binary values are
    /// left out, and of a repeated key the last value is kept.
    pub metadata: BTreeMap<String, String>,
    /// The peer's address, when known.
    pub peer: Option<String>,
    /// The request message as JSON, when the manifest asks for it
    /// (`middleware.requestBody: true`).
    pub request: Option<Value>,
    /// The plugin's configuration (a JSON object).
    pub plugin_config: Value,
}

/// A middleware's decision.
///
/// ```
/// use weft_plugin_sdk::{Code, Verdict};
///
/// let ok = Verdict::proceed_setting("x-weft-principal", "team:ml").and_remove("authorization");
/// let no = Verdict::reject(Code::Unauthenticated, "a bearer token is required");
/// assert!(matches!(ok, Verdict::Proceed { .. }));
/// assert!(matches!(no, Verdict::Reject { code: Code::Unauthenticated, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the call through, with edits to its metadata that later
    /// middleware and the service see.
    Proceed {
        /// Keys to set (replacing existing values).
        set: BTreeMap<String, String>,
        /// Keys to remove.
        remove: Vec<String>,
    },
    /// Answer the call with an error status; later middleware and the
    /// service do not run.
    Reject {
        /// The gRPC status code.
        code: Code,
        /// The status message.
        message: String,
    },
}

impl Verdict {
    /// Proceed without edits.
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

    /// Adds a metadata entry to set (no effect on a rejection).
    pub fn and_set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Verdict::Proceed { set, .. } = &mut self {
            set.insert(key.into(), value.into());
        }
        self
    }

    /// Adds a metadata key to remove (no effect on a rejection).
    pub fn and_remove(mut self, key: impl Into<String>) -> Self {
        if let Verdict::Proceed { remove, .. } = &mut self {
            remove.push(key.into());
        }
        self
    }

    /// Reject the call.
    pub fn reject(code: Code, message: impl Into<String>) -> Self {
        Verdict::Reject {
            code,
            message: message.into(),
        }
    }
}
