//! The compiled form of a workflow: what `crate::compile` makes of a
//! spec and the scheduler round runs. Types only, below both.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cel::Program;
use serde_json::{Map, Value};

use crate::problem::Problem;
use crate::spec::WorkflowSpec;

/// The most nodes one workflow may have; beyond it the status would not
/// fit a Kubernetes object.
pub const MAX_NODES: usize = 20_000;

/// What a node does.
#[derive(Debug, Clone)]
pub enum Kind {
    /// Runs one task.
    Task,
    /// Maps a task over a list.
    Array,
    /// Waits for a duration.
    Sleep(Duration),
    /// Waits for an approval.
    Approval,
    /// Runs a child Workflow.
    Workflow,
    /// Runs a task, then the nodes it generated.
    Dynamic,
}

/// Retry budgets and backoff, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// Retries after user failures.
    pub user: u32,
    /// Retries after system failures.
    pub system: u32,
    /// First delay.
    pub backoff: Duration,
    /// Largest delay.
    pub max_backoff: Duration,
}

impl Retries {
    /// The delay before attempt `n` (the first retry is n = 1).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

/// A node ready to schedule.
#[derive(Debug, Clone)]
pub struct CompiledNode {
    /// The node id.
    pub id: String,
    /// Indices of the nodes it depends on.
    pub deps: Vec<usize>,
    /// What it does.
    pub kind: Kind,
    /// Its condition, compiled.
    pub when: Option<Arc<Program>>,
    /// Per-attempt timeout.
    pub timeout: Option<Duration>,
    /// Retry budgets.
    pub retries: Retries,
}

/// A validated workflow: nodes in topological order plus the edges both ways.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Nodes, in the spec's order.
    pub nodes: Vec<CompiledNode>,
    /// Node id to index.
    pub index: HashMap<String, usize>,
    /// A topological order of node indices.
    pub order: Vec<usize>,
    /// For each node, the nodes that depend on it.
    pub dependents: Vec<Vec<usize>>,
    /// The workflow's active deadline.
    pub active_deadline: Option<Duration>,
    /// The values of the workflow's inputs (defaults, or what a launch bound).
    pub inputs: Map<String, Value>,
    /// The exit handler (`spec.onExit`) as a workflow of its own.
    pub on_exit: Option<Box<(WorkflowSpec, Compiled)>>,
}

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration like 30s or 10m: {e}"))
}

/// What a node check needs besides the node.
pub struct CheckContext<'a> {
    /// Whether some plugin serves a task type (the registry's answer).
    pub known_task_type: &'a dyn Fn(&str) -> bool,
    /// The nodes are an exit handler's: they may read `workflow.*`.
    pub exit: bool,
    /// Compiles a child spec (a sub-workflow's inline nodes) with the same
    /// task types: handed down by `compile`, so the node checks need not
    /// import it.
    pub compile: &'a dyn Fn(&WorkflowSpec) -> Result<Compiled, Vec<Problem>>,
}
