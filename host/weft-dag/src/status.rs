//! The Workflow status the controller writes: small enough that a finished
//! 10,000-node workflow stays far under etcd's object limit (every field is
//! omitted when empty; timestamps are RFC 3339 strings as Kubernetes writes
//! them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::spec::template::TemplateRecord;
use crate::spec::{WorkflowSpec, any_object};

pub mod shared;

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

// Serde goes through `compact` and `expand`: a status whose nodes
// serialize to more than `COMPRESS_NODES_ABOVE` bytes is written with them
// in `compressedNodes` instead of `nodes`, and reading one puts them back,
// so no code but these two ever sees the compressed form.
/// The status subresource of a Workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(rename = "WorkflowStatus")]
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
    // One copy shared by every status holding an equal spec (`shared.rs`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "shared::deserialize"
    )]
    #[schemars(schema_with = "any_object_opt")]
    pub resolved_spec: Option<Arc<WorkflowSpec>>,
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
    /// The nodes as gzip and base64, written instead of `nodes` when those
    /// are larger than 256 KiB (Argo's `compressedNodes`; `base64 -d |
    /// gunzip` shows them). weft, the admin API and the console read them
    /// as nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressed_nodes: Option<String>,
    /// Whether the workflow is suspended (`spec.suspend`): no node starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspended: bool,
    /// The retries carried out, oldest first (`weft retry`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<crate::spec::lifecycle::RetryRecord>,
    /// The exit handler, once the main DAG ended (`spec.onExit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exit: Option<ExitStatus>,
    /// History events (issue 43) written with the transitions that made
    /// them and not yet known to be in the history database: the
    /// controller's durable outbox (`crate::history`). Empty without a
    /// history database.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbox: Vec<HistoryEvent>,
    /// The workflow's own locks (`spec.synchronization` and the
    /// controller's parallelism): what it waits for before it starts,
    /// then what it holds until it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<SyncStatus>,
}

/// A workflow's own locks, as `mutex/db`, `semaphore/writers`,
/// `parallelism/namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// The locks it holds (held until it ends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holding: Vec<String>,
    /// The lock it waits for, while it waits `Pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// Above this many bytes of serialized nodes a status keeps them
/// compressed: a finished 10,000-node workflow's nodes are 1.2 MB as JSON,
/// close to the 1.5 MiB an etcd object may hold, and a tenth of that
/// compressed.
pub const COMPRESS_NODES_ABOVE: usize = 256 << 10;

/// Fewer nodes than this never reach [`COMPRESS_NODES_ABOVE`] in practice,
/// so their status is not even measured.
const MEASURE_NODES_FROM: usize = 500;

impl Serialize for WorkflowStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.nodes.len() < MEASURE_NODES_FROM {
            return WorkflowStatus::serialize(self, s);
        }
        let mut v = WorkflowStatus::serialize(self, serde_json::value::Serializer)
            .map_err(serde::ser::Error::custom)?;
        compact(&mut v).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}

impl<'de> Deserialize<'de> for WorkflowStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        expand(&mut v).map_err(serde::de::Error::custom)?;
        WorkflowStatus::deserialize(v).map_err(serde::de::Error::custom)
    }
}

/// Moves a serialized status's `nodes` into `compressedNodes` when they
/// are larger than [`COMPRESS_NODES_ABOVE`].
pub fn compact(status: &mut Value) -> Result<(), String> {
    use std::io::Write as _;
    let Some(obj) = status.as_object_mut() else {
        return Ok(());
    };
    let Some(nodes) = obj.get("nodes") else {
        return Ok(());
    };
    let json = serde_json::to_vec(nodes).map_err(|e| e.to_string())?;
    if json.len() <= COMPRESS_NODES_ABOVE {
        return Ok(());
    }
    let epoch = obj
        .get("startedAt")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut nodes = obj.remove("nodes").unwrap_or_default();
    let json = match epoch
        .as_deref()
        .and_then(|e| parse_timestamp(Some(e)).map(|t| (e, t)))
    {
        Some((text, at)) => {
            times_as_offsets(&mut nodes, at);
            if let Some(map) = nodes.as_object_mut() {
                map.insert(EPOCH_KEY.into(), text.into());
            }
            serde_json::to_vec(&nodes).map_err(|e| e.to_string())?
        }
        None => json,
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&json).map_err(|e| e.to_string())?;
    let bytes = gz.finish().map_err(|e| e.to_string())?;
    obj.insert(
        "compressedNodes".into(),
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes).into(),
    );
    Ok(())
}

/// Puts a serialized status's `compressedNodes` back into `nodes`; the
/// error names what is wrong with them.
pub fn expand(status: &mut Value) -> Result<(), String> {
    use std::io::Read as _;
    let Some(obj) = status.as_object_mut() else {
        return Ok(());
    };
    let Some(packed) = obj.remove("compressedNodes") else {
        return Ok(());
    };
    let Value::String(packed) = packed else {
        return Err("status.compressedNodes must be a string (base64 of gzip)".into());
    };
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, packed)
        .map_err(|e| format!("status.compressedNodes is not base64: {e}"))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_end(&mut json)
        .map_err(|e| format!("status.compressedNodes is not gzip: {e}"))?;
    let mut nodes: Value = serde_json::from_slice(&json)
        .map_err(|e| format!("status.compressedNodes does not hold JSON: {e}"))?;
    let epoch = nodes.as_object_mut().and_then(|m| m.remove(EPOCH_KEY));
    if let Some(epoch) = epoch {
        let at = parse_timestamp(epoch.as_str()).ok_or_else(|| {
            format!("status.compressedNodes: {EPOCH_KEY} {epoch} is not an RFC 3339 time")
        })?;
        times_as_text(&mut nodes, at);
    }
    obj.insert("nodes".into(), nodes);
    Ok(())
}

/// The entry of a compressed node map that holds the time its offsets
/// count from (no node id contains `$`).
const EPOCH_KEY: &str = "$epoch";

/// The time fields of nodes and of their items: in the compressed form
/// they are seconds after the workflow's start (an integer for a time
/// written to the second, a fraction for one written to the millisecond),
/// which gzip packs in a third of the room an RFC 3339 string takes and
/// lets 100,000 nodes fit one object.
const TIME_FIELDS: [&str; 5] = [
    "startedAt",
    "waitingSince",
    "attemptStartedAt",
    "finishedAt",
    "retryAt",
];

/// Calls `f` on every time field of every node and item.
fn each_time(nodes: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    let Some(nodes) = nodes.as_object_mut() else {
        return;
    };
    let mut fields = |record: &mut Map<String, Value>| {
        for (_, v) in record
            .iter_mut()
            .filter(|(k, _)| TIME_FIELDS.contains(&k.as_str()))
        {
            f(v);
        }
    };
    for node in nodes.values_mut().filter_map(Value::as_object_mut) {
        if let Some(Value::Array(items)) = node.get_mut("items") {
            items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(&mut fields);
        }
        fields(node);
    }
}

/// RFC 3339 strings -> offsets from `epoch`; unreadable ones stay text.
fn times_as_offsets(nodes: &mut Value, epoch: SystemTime) {
    let secs = |t: SystemTime| match t.duration_since(epoch) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    each_time(nodes, &mut |v| {
        let Some(text) = v.as_str() else { return };
        let Some(t) = parse_timestamp(Some(text)) else {
            return;
        };
        let s = secs(t);
        *v = if text.contains('.') {
            // Whole milliseconds, kept a float so that reading it back
            // writes the milliseconds again.
            serde_json::Number::from_f64((s * 1000.0).round() / 1000.0)
                .map_or(Value::Null, Value::Number)
        } else {
            Value::from(s.round() as i64)
        };
    });
}

/// Offsets from `epoch` -> RFC 3339 strings, as [`timestamp`] and
/// [`timestamp_millis`] wrote them.
fn times_as_text(nodes: &mut Value, epoch: SystemTime) {
    each_time(nodes, &mut |v| {
        let Value::Number(n) = &*v else { return };
        let at = |s: f64| {
            let d = std::time::Duration::from_millis((s.abs() * 1000.0).round() as u64);
            if s < 0.0 { epoch - d } else { epoch + d }
        };
        *v = match (n.as_i64(), n.as_f64()) {
            (Some(s), _) => timestamp(at(s as f64)).into(),
            (None, Some(s)) => timestamp_millis(at(s)).into(),
            (None, None) => return,
        };
    });
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
    /// Outputs too large for the Workflow object (over the controller's
    /// `--max-inline-outputs`), kept in the artifact repository as one
    /// JSON object: `${nodes.x.outputs.y}` and the admin API read them
    /// back. Set instead of `outputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs_ref: Option<crate::artifacts::ArtifactRef>,
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
    /// Name (in the workflow's namespace). For a web-API task, the
    /// idempotency key its plugin created the remote job with.
    pub name: String,
    /// A web-API task's `resource-meta`: what its plugin needs to find the
    /// remote job again (kept here before anything else, so a restarted
    /// controller polls the same job). At most 4 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<String>,
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

// The execution history's events (issue 43): their making is
// `crate::history`'s; they live here as part of the status (its outbox).

/// What an event is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum EventKind {
    /// The workflow's phase changed.
    Workflow,
    /// A node's phase changed.
    Node,
    /// A task node's attempt changed phase: the node event's plugin,
    /// child and log links, per attempt.
    Task,
}

impl EventKind {
    /// The name the database keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workflow => "workflow",
            Self::Node => "node",
            Self::Task => "task",
        }
    }
}

/// One event, kept in the outbox until the database has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEvent {
    /// What it is about.
    pub kind: EventKind,
    /// The node's id (empty for a workflow event).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// A node's attempt; a workflow's run (1, then 1 more per retry a
    /// user asked for).
    #[serde(default)]
    pub attempt: u32,
    /// The new phase (`Running`, `Succeeded`, ...).
    pub phase: String,
    /// When (RFC 3339).
    pub at: String,
    /// A machine-readable reason (`System:ArtifactStore`, `Timeout`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a user reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The plugin version that served the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginRef>,
    /// The child the attempt ran as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceRef>,
    /// Its log links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_links: Vec<LogLink>,
}

/// An event's identity within its workflow: with the workflow's uid, the
/// database's primary key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    /// What it is about.
    pub kind: EventKind,
    /// The node's id (empty for a workflow event).
    pub node: String,
    /// The attempt or run.
    pub attempt: u32,
    /// The new phase.
    pub phase: String,
}

impl HistoryEvent {
    /// Its identity.
    pub fn id(&self) -> EventId {
        EventId {
            kind: self.kind,
            node: self.node.clone(),
            attempt: self.attempt,
            phase: self.phase.clone(),
        }
    }
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

#[cfg(test)]
mod tests;
