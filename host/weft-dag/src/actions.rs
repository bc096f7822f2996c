//! What users do to a workflow after submitting it (the `argo` CLI's
//! verbs): stop or terminate it, collect its pods early, retry it. Each is
//! spec (what the user asked, written by the CLI or the admin API) plus
//! status (what the controller did), so `kubectl` shows both and a
//! restarted controller carries on.

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::compiled::Compiled;
use crate::status::{NodePhase, NodeStatus, WorkflowPhase, WorkflowStatus, timestamp};

pub use crate::spec::lifecycle::{PodGc, PodGcStrategy, RetryRecord, Shutdown};

impl PodGcStrategy {
    /// Whether a node that just reached `phase` loses its children now.
    pub fn node_done(self, phase: NodePhase) -> bool {
        match self {
            Self::OnPodCompletion => phase.is_terminal(),
            Self::OnPodSuccess => phase == NodePhase::Succeeded,
            _ => false,
        }
    }

    /// Whether a workflow that just reached `phase` loses its children now.
    pub fn workflow_done(self, phase: WorkflowPhase) -> bool {
        match self {
            Self::OnWorkflowCompletion => phase.is_terminal(),
            Self::OnWorkflowSuccess => phase == WorkflowPhase::Succeeded,
            _ => false,
        }
    }
}

/// The annotation a user sets to ask for a retry: `<id>` or `<id>:<node>`
/// (a fresh id per request, so a repeated request is done once).
pub const RETRY_ANNOTATION: &str = "weft.dev/retry";

/// A retry request, read from the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryRequest {
    /// Its id.
    pub id: String,
    /// Restart from this node and its descendants too.
    pub node: Option<String>,
}

impl RetryRequest {
    /// Reads `<id>` or `<id>:<node>`.
    pub fn parse(value: &str) -> Self {
        match value.split_once(':') {
            Some((id, node)) if !node.is_empty() => Self {
                id: id.into(),
                node: Some(node.into()),
            },
            _ => Self {
                id: value.trim_end_matches(':').into(),
                node: None,
            },
        }
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        match &self.node {
            Some(n) => format!("{}:{n}", self.id),
            None => self.id.clone(),
        }
    }

    /// Whether the controller already carried it out.
    pub fn done(&self, status: &WorkflowStatus) -> bool {
        status.retries.iter().any(|r| r.id == self.id)
    }
}

/// Makes a Failed or Aborted workflow run again from its failed, aborted
/// and skipped nodes (and, with `from`, that node and every node after
/// it), keeping the other nodes and their outputs. A reset node keeps its
/// attempt count and start time, so its next attempt's child gets a new
/// name instead of finding the failed one.
pub fn retry(
    compiled: &Compiled,
    status: &mut WorkflowStatus,
    req: &RetryRequest,
    now: SystemTime,
) -> Result<Vec<String>, String> {
    if !matches!(status.phase, WorkflowPhase::Failed | WorkflowPhase::Aborted) {
        return Err(format!(
            "only a Failed or Aborted workflow can be retried; this one is {:?}",
            status.phase
        ));
    }
    let mut reset: BTreeSet<usize> = compiled
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            status
                .nodes
                .get(&n.id)
                .is_none_or(|s| s.phase != NodePhase::Succeeded)
        })
        .map(|(i, _)| i)
        .collect();
    if let Some(id) = &req.node {
        let &i = compiled
            .index
            .get(id)
            .ok_or_else(|| format!("--node {id:?}: the workflow has no such node"))?;
        descendants(compiled, i, &mut reset);
    }
    let ids: Vec<String> = reset
        .iter()
        .map(|&i| compiled.nodes[i].id.clone())
        .collect();
    for id in &ids {
        let st = status.nodes.entry(id.clone()).or_default();
        *st = NodeStatus {
            attempts: st.attempts,
            started_at: st.started_at.take(),
            items: std::mem::take(&mut st.items)
                .into_iter()
                .map(|i| crate::status::ItemStatus {
                    attempts: i.attempts,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
    }
    status.phase = WorkflowPhase::Running;
    status.message = None;
    status.finished_at = None;
    status.outputs = None;
    status.on_exit = None;
    status.retries.push(RetryRecord {
        id: req.id.clone(),
        node: req.node.clone(),
        at: timestamp(now),
        nodes: ids.clone(),
        error: None,
    });
    Ok(ids)
}

fn descendants(compiled: &Compiled, i: usize, out: &mut BTreeSet<usize>) {
    let mut seen = BTreeSet::new();
    let mut stack = vec![i];
    while let Some(j) = stack.pop() {
        if seen.insert(j) {
            out.insert(j);
            stack.extend(&compiled.dependents[j]);
        }
    }
}
