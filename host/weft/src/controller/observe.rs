//! What plugins' answers and children's statuses mean for a node's
//! attempt: read the same way by the executor (resource tasks, child
//! Workflows) and by the web-API tasks, so neither imports the other.

use super::children::CachedChild;
use serde_json::Value;
use weft_dag::WorkflowPhase;
use weft_dag::schedule::{TaskObservation, TaskState};
use weft_dag::status::{LogLink, PluginRef, ResourceRef};
use weft_plugin::{FailureKind, Phase, TaskPlugin};

pub(super) fn capitalise(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| {
                f.to_ascii_uppercase().to_string() + c.as_str()
            })
        })
        .collect()
}

pub(super) fn plugin_ref(p: &TaskPlugin) -> PluginRef {
    PluginRef {
        name: p.name().to_string(),
        digest: format!("sha256:{}", p.digest().hex()),
    }
}

pub(super) fn resource_ref(obj: &Value) -> ResourceRef {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    ResourceRef {
        api_version: s(&obj["apiVersion"]),
        kind: s(&obj["kind"]),
        name: s(&obj["metadata"]["name"]),
        meta: None,
    }
}

/// What a task plugin's answer (a `get-task-phase` or a web-API `get`)
/// means for the attempt.
pub(super) fn observation(info: weft_plugin::PhaseInfo) -> TaskObservation {
    let failed = |retryable| TaskState::Failed {
        retryable,
        system: info.failure_kind() == FailureKind::System,
    };
    let state = match info.phase {
        Phase::Success => TaskState::Succeeded,
        Phase::RetryableFailure => failed(true),
        Phase::PermanentFailure => failed(false),
        _ => TaskState::InProgress,
    };
    TaskObservation {
        state,
        task_phase: Some(info.phase.to_string()),
        reason: info.reason,
        message: info.message,
        outputs: info.outputs,
        outputs_ref: None,
        resource: None,
        plugin: None,
        log_links: info
            .log_links
            .into_iter()
            .map(|l| LogLink {
                name: l.name,
                uri: l.uri,
            })
            .collect(),
    }
}

/// The part of a child Workflow its parent reads: not its nodes nor its
/// resolved spec, which a parent of 100 children of 1,000 nodes would
/// otherwise decode (often decompress) for every child on every round.
#[derive(Default, serde::Deserialize)]
struct ChildView {
    #[serde(default)]
    status: ChildStatus,
}

/// [`ChildView`]'s status: the fields of `WorkflowStatus` it needs.
#[derive(Default, serde::Deserialize)]
struct ChildStatus {
    #[serde(default)]
    phase: WorkflowPhase,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    progress: Option<String>,
    #[serde(default)]
    outputs: Option<serde_json::Map<String, Value>>,
}

/// What a child Workflow's status means for its node.
pub(super) fn child_observation(name: &str, child: &CachedChild) -> TaskObservation {
    let status = child.parse::<ChildView>().unwrap_or_default().status;
    let msg = status.message.clone().unwrap_or_default();
    match status.phase {
        WorkflowPhase::Succeeded => TaskObservation::succeeded(status.outputs),
        WorkflowPhase::Failed => TaskObservation::failed(
            true,
            false,
            "WorkflowFailed",
            &format!("workflow {name} failed: {msg}"),
        ),
        WorkflowPhase::Aborted => TaskObservation::failed(
            false,
            false,
            "WorkflowAborted",
            &format!("workflow {name} was aborted: {msg}"),
        ),
        phase => {
            let progress = status.progress.unwrap_or_default();
            TaskObservation::in_progress(format!("{phase:?} {progress}").trim())
        }
    }
}
