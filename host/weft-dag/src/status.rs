//! The Workflow status the controller writes: small enough that a finished
//! 10,000-node workflow stays far under etcd's object limit (every field is
//! omitted when empty; timestamps are RFC 3339 strings as Kubernetes writes
//! them).

use std::collections::BTreeMap;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::spec::{WorkflowSpec, any_object};
use crate::template::TemplateRecord;

/// Where a workflow stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum WorkflowPhase {
    /// Accepted, nothing started yet.
    #[default]
    Pending,
    /// Nodes are running or waiting.
    Running,
    /// Every node succeeded or was skipped.
    Succeeded,
    /// A node failed (or the spec was invalid, or the deadline passed).
    Failed,
    /// Aborted by the user.
    Aborted,
}

impl WorkflowPhase {
    /// Whether the workflow is done.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Aborted)
    }
}

/// Where a node stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum NodePhase {
    /// Waiting for its dependencies (or for a parallelism slot).
    #[default]
    Pending,
    /// Started: a task attempt is running, an array has items running, a gate waits.
    Running,
    /// Failed and waiting for its backoff before the next attempt.
    Retrying,
    /// Done.
    Succeeded,
    /// Failed for good.
    Failed,
    /// Not run: its condition was false, or it depends only on skipped nodes,
    /// or an upstream node failed.
    Skipped,
    /// Stopped because the workflow was aborted or failed fast.
    Aborted,
}

impl NodePhase {
    /// Whether the node is done.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Skipped | Self::Aborted
        )
    }
}

/// The status subresource of a Workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatus {
    /// The workflow's phase.
    #[serde(default)]
    pub phase: WorkflowPhase,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the first round ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the workflow reached a terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Why the workflow is where it is (validation problems, the failed node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Finished nodes over all nodes, e.g. `3/7` (a printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The template the workflow runs, as it was when the workflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateRecord>,
    /// The spec resolved from the template with the launch's values bound:
    /// what the workflow runs to its end, whatever happens to the template
    /// (Argo's `storedWorkflowTemplateSpec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object_opt")]
    pub resolved_spec: Option<WorkflowSpec>,
    /// The values the workflow runs with (its inputs' defaults, or what
    /// its launch gave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object_opt")]
    pub inputs: Option<Map<String, Value>>,
    /// The workflow's outputs (`spec.outputs`), once it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object_opt")]
    pub outputs: Option<Map<String, Value>>,
    /// Per-node status, by node id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeStatus>,
    /// Whether the workflow is suspended (`spec.suspend`): no node starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspended: bool,
    /// The retries carried out, oldest first (`weft retry`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<crate::actions::RetryRecord>,
    /// The exit handler, once the main DAG ended (`spec.onExit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exit: Option<ExitStatus>,
}

/// The exit handler's run: the main DAG's outcome it was given, and its
/// own nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExitStatus {
    /// How the main DAG ended (`workflow.phase`).
    pub phase: WorkflowPhase,
    /// Why, when it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The exit nodes, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeStatus>,
}

/// One node's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The node's phase.
    #[serde(default)]
    pub phase: NodePhase,
    /// Attempts started so far; absent means at most one (most nodes, and
    /// 13 bytes each at 10,000 nodes): a started node has had one.
    #[serde(default, skip_serializing_if = "at_most_one")]
    pub attempts: u32,
    /// Failed attempts that were the task's fault.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub user_failures: u32,
    /// Failed attempts that were the platform's fault.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_failures: u32,
    /// When the node started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Since when a node that could start waits for its plugin to load
    /// (phase Pending, reason `WaitingForPlugin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// When the current attempt started (timeouts count from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_started_at: Option<String>,
    /// When the node finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// When the next attempt may start (phase Retrying).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    /// The plugin's phase of the current attempt (e.g. `initializing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_phase: Option<String>,
    /// Machine-readable reason of the last transition (e.g. `OOMKilled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Outputs of a successful node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object_opt")]
    pub outputs: Option<Map<String, Value>>,
    /// The outputs came from the cache: nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The Workflow whose run produced the cached outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<String>,
    /// The child resource of the current attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceRef>,
    /// The plugin version that served the node (pinned while the workflow runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginRef>,
    /// Links to logs of the current attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_links: Vec<LogLink>,
    /// Array nodes: one entry per item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemStatus>,
}

fn any_object_opt(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    any_object(g)
}

fn at_most_one(n: &u32) -> bool {
    *n <= 1
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One item of an array node, kept small: there may be thousands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemStatus {
    /// The item's phase.
    #[serde(default)]
    pub phase: NodePhase,
    /// Attempts started.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Failed attempts that were the task's fault.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub user_failures: u32,
    /// Failed attempts that were the platform's fault.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_failures: u32,
    /// When the current attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_started_at: Option<String>,
    /// When the next attempt may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    /// Message of the last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Outputs of the item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object_opt")]
    pub outputs: Option<Map<String, Value>>,
}

/// A child resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name (in the workflow's namespace).
    pub name: String,
}

/// The plugin version that served a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginRef {
    /// Plugin name.
    pub name: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
}

/// A link to logs or a UI.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogLink {
    /// Display name.
    pub name: String,
    /// Where.
    pub uri: String,
}

/// Formats a time as Kubernetes does (RFC 3339, UTC, seconds).
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Formats a time with milliseconds (retry times, where a second matters).
pub fn timestamp_millis(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Parses an RFC 3339 timestamp; `None` when absent or unreadable.
pub fn parse_timestamp(s: Option<&str>) -> Option<SystemTime> {
    s.and_then(|s| humantime::parse_rfc3339_weak(s).ok())
}
