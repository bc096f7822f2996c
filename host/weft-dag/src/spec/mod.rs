//! The Workflow spec as users write it (`weft.dev/v1alpha1`).
//!
//! Field names follow Argo Workflows and Flyte where they overlap
//! (`dependsOn`, `retries`, `parallelism`, `failurePolicy`), so a user of
//! either reads a Weft workflow without a manual.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub mod artifacts;
pub mod cache;
pub mod inputs;
pub mod lifecycle;
pub mod sync;
pub mod template;

use inputs::Inputs;
use template::TemplateRef;

/// A free-form JSON object in the CRD schema: Kubernetes keeps its unknown
/// fields instead of pruning them.
pub(crate) fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Any JSON value in the CRD schema (a list, a string expression, ...).
pub(crate) fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A workflow: a DAG of nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// The nodes; order does not matter, `dependsOn` makes the edges.
    /// Empty when the workflow runs a template (`workflowTemplateRef`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeSpec>,
    /// Run a WorkflowTemplate with these input values instead of nodes of
    /// its own; resolved once, when the workflow starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_template_ref: Option<TemplateRef>,
    /// Workflow inputs, visible to expressions as `inputs`: by name, a
    /// declaration `{type, default, required, description}` (type one of
    /// string, integer, number, boolean, object, list) or a bare default.
    #[serde(default, skip_serializing_if = "Inputs::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub inputs: Inputs,
    /// Workflow outputs, by name: values or `${...}` expressions over the
    /// nodes (`${nodes.train.outputs.model}`), evaluated when the workflow
    /// succeeds and written to `status.outputs`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub outputs: Map<String, Value>,
    /// At most this many nodes run at once (unlimited when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// What a node failure does to the rest of the workflow.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// The whole workflow fails when it runs longer than this (e.g. `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline: Option<String>,
    /// Set to true to abort the workflow: running nodes are stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    /// Delete the Workflow (and through owner references its children)
    /// this long after it finished (Argo's `ttlStrategy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_strategy: Option<lifecycle::TtlStrategy>,
    /// Delete children early (Argo's `podGC`): their node status and
    /// outputs stay in the Workflow's status.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "podGC")]
    pub pod_gc: Option<lifecycle::PodGc>,
    /// When the artifacts its tasks stored are deleted (Argo's
    /// `artifactGC`; absent: never). An output artifact's own
    /// `artifactGC` overrides it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "artifactGC"
    )]
    pub artifact_gc: Option<artifacts::ArtifactGc>,
    /// Keep each task pod's main container log in the artifact repository
    /// when it ends, so `weft logs`, the admin API and the console serve it
    /// after the pod is gone (Argo's `archiveLogs`; absent: the
    /// controller's `--archive-logs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_logs: Option<bool>,
    /// Nodes that run after the main DAG ends, whatever its outcome (Argo's
    /// `onExit`): they see `workflow.phase`, `workflow.failures` (`[{node,
    /// message}]`) and `workflow.duration` (seconds) in `when` and `${...}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_exit: Vec<NodeSpec>,
    /// Among workflows waiting for the same lock, or for the controller's
    /// `--parallelism`, higher starts first; equal ones in creation order.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub priority: i32,
    /// Mutexes and semaphores the whole workflow holds while it runs (it
    /// waits `Pending` for them; Argo's workflow-level synchronization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<sync::Synchronization>,
    /// While true no new node starts; running nodes finish (`weft suspend`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Stop the workflow: `Stop` aborts running nodes then runs the exit
    /// handlers; `Terminate` (like `abort`) runs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<lifecycle::Shutdown>,
}

/// Flyte's failure policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// The first failed node aborts every running node and fails the workflow.
    #[default]
    FailFast,
    /// Nodes that do not depend on the failure run to completion first.
    FailAfterExecutableNodesComplete,
}

// The kinds other than `task`, and the options few nodes set, are boxed:
// the controller's cache holds every node of every running Workflow (the
// peers bench's 100,000-node tree), and unboxed a node took 1,184 bytes
// before its first string (a plain comment: doc comments become the CRD's
// descriptions).
/// One node of the DAG. Exactly one of `task`, `array`, `gate`,
/// `workflow` and `dynamic`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// Unique within the workflow: letters of either case, digits and '-'
    /// (Argo's task names); child resource names are derived from it.
    pub id: String,
    /// Nodes that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Run a task through the plugin that serves its type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskSpec>,
    /// The node's inputs; string values may hold `${...}` expressions.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub inputs: Map<String, Value>,
    /// A CEL condition; when false the node is skipped, and so is every node
    /// that depends only on skipped nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Retries after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<Box<RetrySpec>>,
    /// Each attempt fails when it runs longer than this (e.g. `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Map a task over a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<Box<ArraySpec>>,
    /// Wait for time to pass or for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Box<GateSpec>>,
    /// Run a workflow as a child Workflow (Flyte's sub-workflow and
    /// launch-plan nodes, Argo's templateRef): a template's, or nodes given
    /// here. Its outputs become this node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Box<SubWorkflowSpec>>,
    /// Run a task whose output `nodes` is a list of nodes, then run them as
    /// a child Workflow (Flyte's dynamic nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<Box<DynamicSpec>>,
    /// Reuse the outputs of an earlier successful run of the same task
    /// with the same inputs (Flyte's cache, Argo's memoize); task nodes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Box<cache::CacheSpec>>,
    /// Mutexes and semaphores the node holds from its start to its end
    /// (retries included); it waits `Pending` (`WaitingForLock`) for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<Box<sync::Synchronization>>,
}

/// What a node is, by which of its kind fields is set: one place that
/// knows, for the scheduler's callers, the admin API, the console's data
/// and the drawings (a new node kind adds a variant here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// `task`.
    Task,
    /// `array`.
    Array,
    /// `gate`.
    Gate,
    /// `dynamic`.
    Dynamic,
    /// `workflow`.
    Subworkflow,
}

impl NodeKind {
    /// The name the admin API and the console show.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Task => "task",
            NodeKind::Array => "array",
            NodeKind::Gate => "gate",
            NodeKind::Dynamic => "dynamic",
            NodeKind::Subworkflow => "subworkflow",
        }
    }
}

impl NodeSpec {
    /// Its kind. A spec that sets several (refused by `compile`) reads as
    /// the first of array, gate, dynamic, workflow; one that sets none, as
    /// a task.
    pub fn kind(&self) -> NodeKind {
        if self.array.is_some() {
            NodeKind::Array
        } else if self.gate.is_some() {
            NodeKind::Gate
        } else if self.dynamic.is_some() {
            NodeKind::Dynamic
        } else if self.workflow.is_some() {
            NodeKind::Subworkflow
        } else {
            NodeKind::Task
        }
    }
}

/// A list of free-form objects in the CRD schema (nodes inside nodes: the
/// schema cannot recurse).
pub(crate) fn any_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

/// A sub-workflow: exactly one of `templateRef` and `nodes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubWorkflowSpec {
    /// A WorkflowTemplate in the workflow's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<String>,
    /// The child's input values; string values may hold `${...}` over this
    /// workflow's inputs and the nodes this node depends on.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub inputs: Map<String, Value>,
    /// The child's nodes, when it is given here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "any_list")]
    pub nodes: Vec<NodeSpec>,
    /// The child's outputs, when it is given here.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub outputs: Map<String, Value>,
}

/// A dynamic node: its task decides what runs next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicSpec {
    /// The task; its outputs give `nodes` (a list of nodes, validated as a
    /// workflow's) and may give `outputs` (expressions over them).
    pub task: TaskSpec,
    /// The task of every generated node that names no kind of its own, so
    /// the task can emit just ids, inputs and edges (a pod's termination
    /// message holds 4 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_task: Option<TaskSpec>,
    /// The most nodes the task may generate (default 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
}

/// The default limit of generated nodes per dynamic node.
pub const DEFAULT_MAX_DYNAMIC_NODES: u32 = 10_000;

/// A task: its type picks the plugin, its config is the plugin's business.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskSpec {
    /// The task type, e.g. `pod` or `spark`.
    #[serde(rename = "type")]
    pub task_type: String,
    /// The plugin's task config.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub config: Map<String, Value>,
    /// Kubernetes Secrets the task gets, as Flyte's task secrets: for a
    /// pod, Weft's admission webhook mounts each key as an environment
    /// variable or a file; for a web-API task, the host sends it as a
    /// request header (`mountAs: header`), read as the plugin's
    /// ServiceAccount. Only these references pass through Weft; the values
    /// never reach a plugin, the Workflow's status or the logs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretRef>,
    /// Input artifacts, downloaded before the task runs (a pod's main
    /// container; see `docs/artifacts.md`).
    #[serde(default, skip_serializing_if = "artifacts::TaskInputs::is_empty")]
    pub inputs: artifacts::TaskInputs,
    /// Output artifacts and parameters read from files, after it exits 0.
    #[serde(default, skip_serializing_if = "artifacts::TaskOutputs::is_empty")]
    pub outputs: artifacts::TaskOutputs,
}

impl TaskSpec {
    /// Whether the task moves artifacts (and so needs the data plane).
    pub fn has_io(&self) -> bool {
        !self.inputs.is_empty() || !self.outputs.is_empty()
    }
}

/// One key of a Secret in the workflow's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// The key within it.
    pub key: String,
    /// `env` (the default): the variable `envName`; `file`: the file
    /// `/etc/weft/secrets/NAME/KEY` (both for pods); `header`: the request
    /// header `header` (web-API tasks).
    #[serde(default)]
    pub mount_as: MountAs,
    /// The variable's name for `env` (default `WEFT_SECRET_NAME_KEY`,
    /// upper case, other characters as `_`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
    /// The request header for `header`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderMount>,
}

/// How a web-API task's secret is sent: the host adds the header to the
/// plugin's requests to `hosts`; the guest never sees the value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderMount {
    /// The header, e.g. `Authorization`.
    pub name: String,
    /// Put before the value, e.g. `"Bearer "`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    /// The hosts it is sent to (patterns as in egress rules, e.g.
    /// `*.example.com`); empty: every host the plugin may reach, which is
    /// refused when its egress allows any host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// How a secret reaches a task's containers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MountAs {
    /// An environment variable.
    #[default]
    Env,
    /// A read-only file under `/etc/weft/secrets/NAME/`.
    File,
    /// A request header of a web-API task (`header` says which).
    Header,
}

/// Where file secrets are mounted: one directory per Secret.
pub const SECRETS_DIR: &str = "/etc/weft/secrets";

impl SecretRef {
    /// The environment variable an `env` secret is set as.
    pub fn env_var(&self) -> String {
        self.env_name.clone().unwrap_or_else(|| {
            format!("WEFT_SECRET_{}_{}", self.name, self.key)
                .chars()
                .map(|c| match c.is_ascii_alphanumeric() {
                    true => c.to_ascii_uppercase(),
                    false => '_',
                })
                .collect()
        })
    }

    /// The file a `file` secret is at.
    pub fn file_path(&self) -> String {
        format!("{SECRETS_DIR}/{}/{}", self.name, self.key)
    }
}

/// Retries, on two budgets as in Flyte: failures of the task itself count
/// against `limit`; failures of the platform (plugin traps, evictions, node
/// loss) against `systemLimit`, so a flaky cluster does not use up the
/// retries a flaky task needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetrySpec {
    /// Retries after user failures.
    #[serde(default)]
    pub limit: u32,
    /// Retries after system failures (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_limit: Option<u32>,
    /// Delay before the first retry, doubled for each further one (e.g. `10s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// Upper bound of the doubled delay (default 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff: Option<String>,
}

/// System retries when a node says nothing.
pub const DEFAULT_SYSTEM_RETRIES: u32 = 3;

/// Map a task over a list (Flyte's map task, Argo's `withParam`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArraySpec {
    /// The list: a JSON list, or a `${...}` expression that yields one.
    #[schemars(schema_with = "any_value")]
    pub over: Value,
    /// At most this many items run at once (unlimited when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// The node succeeds when at least this many items succeed (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_successes: Option<u32>,
    /// Or when at least this fraction of items succeed (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_ratio: Option<f64>,
    /// The task each item runs; it sees `item` and `index` in its inputs' expressions.
    pub task: TaskSpec,
}

/// A gate: exactly one of `sleep` and `approval`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateSpec {
    /// Wait this long (e.g. `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<String>,
    /// Wait until someone approves: the annotation
    /// `approve.weft.dev/<node-id>: "true"` on the Workflow (or the admin API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalSpec>,
}

/// An approval gate's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalSpec {
    /// What the approver is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The annotation that decides gate `node` of a Workflow: `true`
/// approves it, `false` rejects it (the gate fails).
pub fn approval_annotation(node: &str) -> String {
    format!("approve.weft.dev/{node}")
}

/// The annotation that holds why a gate was rejected (its approval
/// annotation then says `false`).
pub fn rejection_annotation(node: &str) -> String {
    format!("rejection.weft.dev/{node}")
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
