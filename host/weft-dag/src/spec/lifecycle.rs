//! A workflow's life after it runs, as its spec and status say it: TTL,
//! pod GC, stop and terminate, and the record of retries (the types; the
//! behaviour is `crate::ttl` and `crate::actions`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long a finished Workflow is kept, by how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TtlStrategy {
    /// Seconds after it finished, whatever the outcome (unless one of the
    /// two below applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_completion: Option<u64>,
    /// Seconds after it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_success: Option<u64>,
    /// Seconds after it failed or was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_failure: Option<u64>,
}

/// How a user stops a running workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Shutdown {
    /// Abort running nodes, then run the exit handlers.
    Stop,
    /// Abort running nodes; no exit handler runs.
    Terminate,
}

/// `spec.podGC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PodGc {
    /// When children are deleted.
    pub strategy: PodGcStrategy,
}

/// When a node's children are deleted (Argo's podGC strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PodGcStrategy {
    /// As soon as the node finishes, whatever its outcome.
    OnPodCompletion,
    /// As soon as the node succeeds.
    OnPodSuccess,
    /// When the workflow finishes.
    OnWorkflowCompletion,
    /// When the workflow succeeds.
    OnWorkflowSuccess,
}

/// One retry the controller carried out (`status.retries`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryRecord {
    /// The request's id (from the annotation).
    pub id: String,
    /// The node it restarted from, when one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// When it was carried out.
    pub at: String,
    /// The nodes it reset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Why it was refused, when it was (nothing was reset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
