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
    pub retries: Vec<crate::actions::RetryRecord>,
    /// The exit handler, once the main DAG ended (`spec.onExit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exit: Option<ExitStatus>,
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
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&json).map_err(|e| e.to_string())?;
    let bytes = gz.finish().map_err(|e| e.to_string())?;
    obj.remove("nodes");
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
    let nodes: Value = serde_json::from_slice(&json)
        .map_err(|e| format!("status.compressedNodes does not hold JSON: {e}"))?;
    obj.insert("nodes".into(), nodes);
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished workflow of `n` nodes, each with a small output, as the
    /// scheduler leaves it (one second apart).
    fn finished(n: usize) -> WorkflowStatus {
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_780_000_000);
        let nodes = (0..n)
            .map(|i| {
                let at = start + std::time::Duration::from_secs(i as u64);
                let node = NodeStatus {
                    phase: NodePhase::Succeeded,
                    started_at: Some(timestamp(at)),
                    finished_at: Some(timestamp(at + std::time::Duration::from_secs(3))),
                    outputs: Some(serde_json::json!({"rows": i}).as_object().cloned().unwrap()),
                    ..Default::default()
                };
                (format!("n-{}-{}", i / 100, i % 100), node)
            })
            .collect();
        WorkflowStatus {
            phase: WorkflowPhase::Succeeded,
            progress: Some(format!("{n}/{n}")),
            nodes,
            ..Default::default()
        }
    }

    #[test]
    fn small_statuses_keep_their_nodes_as_a_map() {
        let status = finished(100);
        let v = serde_json::to_value(&status).unwrap();
        assert!(v["nodes"]["n-0-7"]["outputs"]["rows"] == 7, "{v}");
        assert!(v.get("compressedNodes").is_none());
        assert_eq!(serde_json::from_value::<WorkflowStatus>(v).unwrap(), status);
    }

    #[test]
    fn a_10k_node_status_is_written_compressed_and_read_back_whole() {
        let status = finished(10_000);
        let plain = serde_json::to_vec(
            &WorkflowStatus::serialize(&status, serde_json::value::Serializer).unwrap(),
        )
        .unwrap();
        let written = serde_json::to_vec(&status).unwrap();
        eprintln!(
            "10,000 nodes: {} bytes as a map, {} bytes written",
            plain.len(),
            written.len()
        );
        assert!(written.len() <= 512 << 10, "{} bytes", written.len());
        let v: Value = serde_json::from_slice(&written).unwrap();
        assert!(
            v.get("nodes").is_none(),
            "nodes left beside compressedNodes"
        );
        assert_eq!(v["progress"], "10000/10000", "the rest stays readable");
        let back: WorkflowStatus = serde_json::from_slice(&written).unwrap();
        assert_eq!(back, status);
        assert_eq!(back.compressed_nodes, None);
    }

    #[test]
    fn unreadable_compressed_nodes_are_named() {
        let v = serde_json::json!({"phase": "Running", "compressedNodes": "not base64!"});
        let e = serde_json::from_value::<WorkflowStatus>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("status.compressedNodes is not base64"), "{e}");
        let v = serde_json::json!({"phase": "Running", "compressedNodes": "aGVsbG8="});
        let e = serde_json::from_value::<WorkflowStatus>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not gzip"), "{e}");
    }
}
