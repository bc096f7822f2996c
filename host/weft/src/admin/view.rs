//! Workflows as the admin API shows them ([`pb::Execution`],
//! [`pb::NodeExecution`]): one mapping that the gRPC service and the
//! console both use.

use kube::ResourceExt;
use weft_dag::{NodePhase, NodeSpec};

use crate::admin::pb;
use crate::api::Workflow;

pub(super) fn terminal_phase(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed" | "Aborted")
}

/// What a watcher is told about: the workflow's and its nodes' phases.
pub(super) fn fingerprint(ex: &pb::Execution) -> String {
    let mut key = format!("{}|{}", ex.phase, ex.message);
    for n in &ex.nodes {
        key.push_str(&format!(
            "|{}={}#{}:{}/{}/{}:{}",
            n.id,
            n.phase,
            n.attempts,
            n.items_succeeded,
            n.items_failed,
            n.items_running,
            n.task_phase
        ));
    }
    key
}

pub(super) fn phase_name<T: serde::Serialize>(p: &T) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One node as the API shows it: its record, and from its spec the
/// edges and kind the console draws.
pub(super) fn node_execution(n: &NodeSpec, s: Option<&weft_dag::NodeStatus>) -> pb::NodeExecution {
    let text = |f: fn(&weft_dag::NodeStatus) -> Option<&String>| {
        s.and_then(f).cloned().unwrap_or_default()
    };
    let items = s.map_or(&[][..], |s| s.items.as_slice());
    let count = |p: NodePhase| items.iter().filter(|i| i.phase == p).count() as u32;
    let task_type = n
        .task
        .as_ref()
        .or(n.array.as_ref().map(|a| &a.task))
        .or(n.dynamic.as_ref().map(|d| &d.task))
        .map(|t| t.task_type.clone())
        .unwrap_or_default();
    pb::NodeExecution {
        id: n.id.clone(),
        phase: phase_name(&s.map_or(NodePhase::Pending, |s| s.phase)),
        // The status leaves out an attempt count of one.
        attempts: s.map_or(0, |s| match s.attempts {
            0 if s.started_at.is_some() => 1,
            n => n,
        }),
        message: text(|s| s.message.as_ref()),
        outputs: s
            .and_then(|s| s.outputs.as_ref())
            .map(|o| serde_json::Value::Object(o.clone()).to_string())
            .unwrap_or_default(),
        cached: s.is_some_and(|s| s.cached),
        depends_on: n.depends_on.clone(),
        kind: n.kind().name().into(),
        started_at: text(|s| s.started_at.as_ref()),
        finished_at: text(|s| s.finished_at.as_ref()),
        reason: text(|s| s.reason.as_ref()),
        task_type,
        plugin: s
            .and_then(|s| s.plugin.as_ref())
            .map(|p| p.name.clone())
            .unwrap_or_default(),
        plugin_digest: s
            .and_then(|s| s.plugin.as_ref())
            .map(|p| p.digest.clone())
            .unwrap_or_default(),
        resource: s
            .and_then(|s| s.resource.as_ref())
            .map(|r| pb::ResourceRef {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
            }),
        log_links: s.map_or(Vec::new(), |s| {
            s.log_links
                .iter()
                .map(|l| pb::LogLink {
                    name: l.name.clone(),
                    uri: l.uri.clone(),
                })
                .collect()
        }),
        items_total: items.len() as u32,
        items_succeeded: count(NodePhase::Succeeded),
        items_failed: count(NodePhase::Failed),
        items_running: count(NodePhase::Running),
        task_phase: text(|s| s.task_phase.as_ref()),
    }
}

/// A Workflow as the API shows it.
pub fn execution(wf: &Workflow) -> pb::Execution {
    let status = wf.status.as_ref();
    let spec = status
        .and_then(|s| s.resolved_spec.as_deref())
        .unwrap_or(&wf.spec.spec);
    let json = |m: Option<&serde_json::Map<String, serde_json::Value>>| {
        m.map(|o| serde_json::Value::Object(o.clone()).to_string())
            .unwrap_or_default()
    };
    let exit = status.and_then(|s| s.on_exit.as_ref());
    let exit_nodes = spec
        .on_exit
        .iter()
        .filter(|_| exit.is_some())
        .map(|n| node_execution(n, exit.and_then(|e| e.nodes.get(&n.id))))
        .collect();
    let nodes = spec
        .nodes
        .iter()
        .map(|n| node_execution(n, status.and_then(|s| s.nodes.get(&n.id))))
        .collect();
    // What a finished workflow held, it gave back.
    let sync = status
        .filter(|s| !s.phase.is_terminal())
        .and_then(|s| s.synchronization.as_ref());
    pb::Execution {
        archived: false,
        events: Vec::new(),
        holding: sync.map(|s| s.holding.clone()).unwrap_or_default(),
        waiting_for: sync.and_then(|s| s.waiting.clone()).unwrap_or_default(),
        exit_nodes,
        suspended: status.is_some_and(|s| s.suspended),
        shutdown: wf
            .spec
            .spec
            .shutdown
            .as_ref()
            .map(phase_name)
            .unwrap_or_default(),
        retries: status.map_or(0, |s| {
            s.retries.iter().filter(|r| r.error.is_none()).count() as u32
        }),
        id: Some(pb::ExecutionId {
            namespace: wf.namespace().unwrap_or_default(),
            name: wf.name_any(),
            ..Default::default()
        }),
        uid: wf.uid().unwrap_or_default(),
        labels: wf.labels().clone().into_iter().collect(),
        phase: status.map(|s| phase_name(&s.phase)).unwrap_or_default(),
        message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        created_at: wf
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        started_at: status
            .and_then(|s| s.started_at.clone())
            .unwrap_or_default(),
        finished_at: status
            .and_then(|s| s.finished_at.clone())
            .unwrap_or_default(),
        nodes,
        abort_requested: wf.spec.spec.abort,
        resource_version: wf.resource_version().unwrap_or_default(),
        inputs: json(status.and_then(|s| s.inputs.as_ref())),
        outputs: json(status.and_then(|s| s.outputs.as_ref())),
        template: wf
            .spec
            .spec
            .workflow_template_ref
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default(),
    }
}
