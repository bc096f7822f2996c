//! The scheduler: one reconcile round moves every node as far as it can go.
//!
//! A round is a pure function of the spec, the last status, the clock and
//! what the [`Executor`] reports about tasks; it mutates the status in place
//! and says when it wants to run again. The controller implements
//! [`Executor`] with plugin calls and Kubernetes resources; tests implement
//! it with a script.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use crate::compile::{Compiled, CompiledNode, Kind, Retries};
use crate::expr::{self, Scope};
use crate::spec::{ArraySpec, FailurePolicy, NodeSpec, TaskSpec, WorkflowSpec};
use crate::status::{
    ItemStatus, LogLink, NodePhase, NodeStatus, PluginRef, ResourceRef, WorkflowPhase,
    WorkflowStatus, parse_timestamp, timestamp, timestamp_millis,
};

/// One attempt of a task, as the executor is asked about it.
#[derive(Debug)]
pub struct TaskRequest<'a> {
    /// The node id.
    pub node_id: &'a str,
    /// The item index, for an array node's task.
    pub item: Option<usize>,
    /// The attempt, from 0.
    pub attempt: u32,
    /// The task.
    pub task: &'a TaskSpec,
    /// The resolved inputs.
    pub inputs: &'a Map<String, Value>,
    /// The plugin version the node is pinned to, once it has started.
    pub plugin: Option<&'a PluginRef>,
    /// The attempt's resource, once known.
    pub resource: Option<&'a ResourceRef>,
}

/// How an attempt ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Still going (queued, initializing, running...).
    InProgress,
    /// Finished well.
    Succeeded,
    /// Finished badly.
    Failed {
        /// Whether another attempt may help.
        retryable: bool,
        /// Whether the platform failed (counted on the system budget).
        system: bool,
    },
}

/// What the executor knows about an attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskObservation {
    /// The verdict.
    pub state: TaskState,
    /// The plugin's phase name (e.g. `initializing`).
    pub task_phase: Option<String>,
    /// Reason.
    pub reason: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// Outputs, when it succeeded.
    pub outputs: Option<Map<String, Value>>,
    /// The resource that runs it.
    pub resource: Option<ResourceRef>,
    /// The plugin version that served it.
    pub plugin: Option<PluginRef>,
    /// Log links.
    pub log_links: Vec<LogLink>,
}

impl TaskObservation {
    /// An attempt in progress with a plugin phase.
    pub fn in_progress(task_phase: &str) -> Self {
        Self::with_state(TaskState::InProgress, Some(task_phase.into()))
    }

    /// A successful attempt.
    pub fn succeeded(outputs: Option<Map<String, Value>>) -> Self {
        Self {
            outputs,
            ..Self::with_state(TaskState::Succeeded, Some("success".into()))
        }
    }

    /// A failed attempt.
    pub fn failed(retryable: bool, system: bool, reason: &str, message: &str) -> Self {
        Self {
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Self::with_state(TaskState::Failed { retryable, system }, None)
        }
    }

    fn with_state(state: TaskState, task_phase: Option<String>) -> Self {
        Self {
            state,
            task_phase,
            reason: None,
            message: None,
            outputs: None,
            resource: None,
            plugin: None,
            log_links: Vec::new(),
        }
    }
}

/// Whether a task node may start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Start it.
    Ready,
    /// Keep it `Pending` with this reason and message (e.g. its plugin is
    /// being loaded), for at most `timeout` from the first wait; then it
    /// fails as the platform's fault.
    Wait {
        /// Machine-readable reason, e.g. `WaitingForPlugin`.
        reason: String,
        /// What it waits for.
        message: String,
        /// How long it may wait in all.
        timeout: Duration,
    },
}

/// Starts, observes and stops task attempts. Implementations must be
/// idempotent: `task` for an attempt that already exists observes it.
pub trait Executor {
    /// Whether a task node may start now (asked before its first attempt).
    fn ready(&mut self, _task: &TaskSpec) -> Readiness {
        Readiness::Ready
    }
    /// Make sure the attempt runs (create its resource when missing) and say
    /// where it stands.
    fn task(&mut self, req: &TaskRequest<'_>) -> TaskObservation;
    /// Stop the attempt (abort, timeout, fail-fast).
    fn abort(&mut self, req: &TaskRequest<'_>);
}

/// What a round knows besides the spec and status.
#[derive(Debug)]
pub struct RoundInput<'a> {
    /// The clock.
    pub now: SystemTime,
    /// The Workflow's `metadata.generation`.
    pub generation: Option<i64>,
    /// Approved gate node ids.
    pub approvals: &'a HashSet<String>,
    /// The Workflow is being deleted: stop everything.
    pub deleting: bool,
}

/// A node's phase change, for Events and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// Node id.
    pub node: String,
    /// Old phase.
    pub from: NodePhase,
    /// New phase.
    pub to: NodePhase,
    /// Why.
    pub message: Option<String>,
}

/// What a round did.
#[derive(Debug, Default)]
pub struct RoundOutcome {
    /// Node transitions, in the order they happened.
    pub transitions: Vec<Transition>,
    /// The earliest time the workflow needs another round even if nothing
    /// changes (a backoff ends, a timeout or deadline passes, a sleep ends).
    pub wake_at: Option<SystemTime>,
    /// The workflow's phase changed.
    pub workflow_changed: bool,
}

impl RoundOutcome {
    fn wake(&mut self, at: SystemTime) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
}

/// Marks a workflow invalid: Failed with the problems, nothing started.
pub fn fail_invalid(
    status: &mut WorkflowStatus,
    now: SystemTime,
    message: String,
    generation: Option<i64>,
) {
    status.phase = WorkflowPhase::Failed;
    status.message = Some(format!("invalid workflow:\n{message}"));
    status.finished_at = Some(timestamp(now));
    status.observed_generation = generation;
}

struct Round<'a, E: Executor> {
    spec: &'a WorkflowSpec,
    compiled: &'a Compiled,
    input: &'a RoundInput<'a>,
    exec: &'a mut E,
    out: RoundOutcome,
    running: usize,
    failed_fast: Option<String>,
    /// Node phases by index, kept current during the pass.
    phases: Vec<NodePhase>,
}

/// Runs one reconcile round over a validated workflow.
pub fn reconcile<E: Executor>(
    spec: &WorkflowSpec,
    compiled: &Compiled,
    status: &mut WorkflowStatus,
    input: &RoundInput<'_>,
    exec: &mut E,
) -> RoundOutcome {
    let before = status.phase;
    status.observed_generation = input.generation;
    if status.phase.is_terminal() {
        return RoundOutcome::default();
    }
    let now = input.now;
    if status.started_at.is_none() {
        status.started_at = Some(timestamp(now));
        if !compiled.inputs.is_empty() {
            status.inputs = Some(compiled.inputs.clone());
        }
    }
    status.phase = WorkflowPhase::Running;
    // One lookup per node per round; after this the pass reads phases by index.
    let mut phases = Vec::with_capacity(compiled.nodes.len());
    for n in &compiled.nodes {
        let st = match status.nodes.get_mut(&n.id) {
            Some(st) => st,
            None => status.nodes.entry(n.id.clone()).or_default(),
        };
        // `attempts` is omitted from the stored status when it is one.
        if matches!(st.phase, NodePhase::Running | NodePhase::Retrying)
            && matches!(n.kind, Kind::Task)
        {
            st.attempts = st.attempts.max(1);
        }
        phases.push(st.phase);
    }
    let mut round = Round {
        spec,
        compiled,
        input,
        exec,
        out: RoundOutcome::default(),
        running: 0,
        failed_fast: None,
        phases,
    };

    // Stopping: the user asked, the Workflow is going away, or its deadline passed.
    let started = parse_timestamp(status.started_at.as_deref()).unwrap_or(now);
    let stop = if input.deleting {
        Some((
            WorkflowPhase::Aborted,
            "the workflow is being deleted".to_string(),
        ))
    } else if spec.abort {
        Some((
            WorkflowPhase::Aborted,
            "aborted by the user (spec.abort)".to_string(),
        ))
    } else if let Some(d) = compiled.active_deadline {
        if now >= started + d {
            Some((
                WorkflowPhase::Failed,
                format!(
                    "exceeded its active deadline of {}",
                    humantime::format_duration(d)
                ),
            ))
        } else {
            round.out.wake(started + d);
            None
        }
    } else {
        None
    };
    if let Some((phase, why)) = stop {
        round.stop_all(status, &why);
        finish(status, phase, Some(why), now, &mut round.out);
        round.out.workflow_changed = before != status.phase;
        return round.out;
    }

    round.running = compiled
        .nodes
        .iter()
        .zip(&round.phases)
        .filter(|(n, p)| {
            !matches!(n.kind, Kind::Sleep(_) | Kind::Approval) && **p == NodePhase::Running
        })
        .count();
    for &i in &compiled.order {
        round.step(status, i);
    }
    if let Some(why) = round.failed_fast.clone() {
        round.stop_all(status, &format!("stopped because {why} (FailFast)"));
    }

    let total = compiled.nodes.len();
    let done = if round.failed_fast.is_some() {
        status
            .nodes
            .values()
            .filter(|s| s.phase.is_terminal())
            .count()
    } else {
        round.phases.iter().filter(|p| p.is_terminal()).count()
    };
    status.progress = Some(format!("{done}/{total}"));
    if done == total {
        let failed: Vec<&String> = status
            .nodes
            .iter()
            .filter(|(_, s)| s.phase == NodePhase::Failed)
            .map(|(id, _)| id)
            .collect();
        if failed.is_empty() {
            match workflow_outputs(spec, compiled, status) {
                Ok(outputs) => {
                    status.outputs = outputs;
                    finish(status, WorkflowPhase::Succeeded, None, now, &mut round.out);
                }
                Err(why) => finish(
                    status,
                    WorkflowPhase::Failed,
                    Some(why),
                    now,
                    &mut round.out,
                ),
            }
        } else {
            let first = failed[0];
            let msg = status.nodes[first].message.clone().unwrap_or_default();
            let names: Vec<&str> = failed.iter().map(|s| s.as_str()).collect();
            finish(
                status,
                WorkflowPhase::Failed,
                Some(format!("node {} failed: {msg}", names.join(", "))),
                now,
                &mut round.out,
            );
        }
    }
    round.out.workflow_changed = before != status.phase;
    round.out
}

/// `spec.outputs` evaluated over every node (none when it declares none).
fn workflow_outputs(
    spec: &WorkflowSpec,
    compiled: &Compiled,
    status: &WorkflowStatus,
) -> Result<Option<Map<String, Value>>, String> {
    if spec.outputs.is_empty() {
        return Ok(None);
    }
    let nodes = status
        .nodes
        .iter()
        .map(|(id, st)| {
            let v = json!({"phase": st.phase, "outputs": st.outputs.clone().unwrap_or_default()});
            (id.clone(), v)
        })
        .collect();
    let scope = Scope {
        inputs: compiled.inputs.clone(),
        nodes,
        item: None,
        index: None,
    };
    let mut out = Map::new();
    for (name, v) in &spec.outputs {
        let value = expr::resolve(v, &scope).map_err(|e| format!("outputs.{name}: {e}"))?;
        out.insert(name.clone(), value);
    }
    Ok(Some(out))
}

fn finish(
    status: &mut WorkflowStatus,
    phase: WorkflowPhase,
    message: Option<String>,
    now: SystemTime,
    out: &mut RoundOutcome,
) {
    let total = status.nodes.len();
    let done = status
        .nodes
        .values()
        .filter(|s| s.phase.is_terminal())
        .count();
    status.progress = Some(format!("{done}/{total}"));
    status.phase = phase;
    status.message = message;
    status.finished_at = Some(timestamp(now));
    out.wake_at = None;
}

fn node_spec<'a>(spec: &'a WorkflowSpec, id: &str, index: usize) -> &'a NodeSpec {
    let n = &spec.nodes[index];
    debug_assert_eq!(n.id, id);
    n
}

impl<E: Executor> Round<'_, E> {
    fn transition(
        &mut self,
        id: &str,
        st: &mut NodeStatus,
        to: NodePhase,
        message: Option<String>,
    ) {
        if st.phase != to {
            self.out.transitions.push(Transition {
                node: id.to_string(),
                from: st.phase,
                to,
                message: message.clone(),
            });
        }
        st.phase = to;
        if message.is_some() {
            st.message = message;
        }
        if to.is_terminal() {
            // What only matters while a node runs goes, so a finished
            // 10k-node status stays small.
            st.finished_at = Some(timestamp(self.input.now));
            st.retry_at = None;
            st.attempt_started_at = None;
            st.task_phase = None;
        }
    }

    /// Stops every started node and closes every pending one.
    fn stop_all(&mut self, status: &mut WorkflowStatus, why: &str) {
        for (i, n) in self.compiled.nodes.iter().enumerate() {
            let spec = node_spec(self.spec, &n.id, i);
            let st = status.nodes.get_mut(&n.id).expect("present");
            match st.phase {
                NodePhase::Running | NodePhase::Retrying => {
                    self.abort_node(spec, n, st);
                    self.transition(&n.id, st, NodePhase::Aborted, Some(why.to_string()));
                }
                NodePhase::Pending => {
                    self.transition(&n.id, st, NodePhase::Skipped, Some(why.to_string()));
                }
                _ => {}
            }
        }
    }

    fn abort_node(&mut self, spec: &NodeSpec, n: &CompiledNode, st: &mut NodeStatus) {
        let empty = Map::new();
        match (&n.kind, &spec.task, &spec.array) {
            (Kind::Task, Some(task), _) if st.phase == NodePhase::Running && st.attempts > 0 => {
                self.exec.abort(&TaskRequest {
                    node_id: &n.id,
                    item: None,
                    attempt: st.attempts - 1,
                    task,
                    inputs: &empty,
                    plugin: st.plugin.as_ref(),
                    resource: st.resource.as_ref(),
                });
            }
            (Kind::Array, _, Some(array)) => {
                for (idx, item) in st.items.iter_mut().enumerate() {
                    if item.phase == NodePhase::Running && item.attempts > 0 {
                        self.exec.abort(&TaskRequest {
                            node_id: &n.id,
                            item: Some(idx),
                            attempt: item.attempts - 1,
                            task: &array.task,
                            inputs: &empty,
                            plugin: st.plugin.as_ref(),
                            resource: None,
                        });
                    }
                    if !item.phase.is_terminal() {
                        item.phase = NodePhase::Aborted;
                    }
                }
            }
            _ => {}
        }
    }

    fn scope(&self, status: &WorkflowStatus, n: &CompiledNode) -> Scope {
        let mut nodes = Map::new();
        for &d in &n.deps {
            let id = &self.compiled.nodes[d].id;
            let st = &status.nodes[id];
            nodes.insert(
                id.clone(),
                json!({
                    "phase": st.phase,
                    "outputs": st.outputs.clone().unwrap_or_default(),
                }),
            );
        }
        Scope {
            inputs: self.compiled.inputs.clone(),
            nodes,
            item: None,
            index: None,
        }
    }

    fn step(&mut self, status: &mut WorkflowStatus, i: usize) {
        if self.phases[i].is_terminal() {
            return;
        }
        self.step_open(status, i);
        let n = &self.compiled.nodes[i];
        self.phases[i] = status.nodes[&n.id].phase;
    }

    fn step_open(&mut self, status: &mut WorkflowStatus, i: usize) {
        let n = &self.compiled.nodes[i];
        let spec = node_spec(self.spec, &n.id, i);
        match self.phases[i] {
            NodePhase::Pending => self.maybe_start(status, i),
            NodePhase::Running | NodePhase::Retrying => {
                let scope = self.scope(status, n);
                let mut st = std::mem::take(status.nodes.get_mut(&n.id).expect("present"));
                match n.kind {
                    Kind::Task => self.drive_task(spec, n, &mut st, &scope),
                    Kind::Array => self.drive_array(spec, n, &mut st, &scope),
                    Kind::Sleep(d) => self.drive_sleep(n, &mut st, d),
                    Kind::Approval => self.drive_approval(n, &mut st),
                }
                *status.nodes.get_mut(&n.id).expect("present") = st;
            }
            _ => {}
        }
    }

    fn maybe_start(&mut self, status: &mut WorkflowStatus, i: usize) {
        let n = &self.compiled.nodes[i];
        let spec = node_spec(self.spec, &n.id, i);
        let mut all_skipped = !n.deps.is_empty();
        let mut failed_dep = None;
        for &d in &n.deps {
            let dep = &self.compiled.nodes[d].id;
            match self.phases[d] {
                NodePhase::Succeeded => all_skipped = false,
                NodePhase::Skipped => {}
                NodePhase::Failed | NodePhase::Aborted => {
                    all_skipped = false;
                    failed_dep.get_or_insert(dep.clone());
                }
                _ => return, // not ready
            }
        }
        let mut st = std::mem::take(status.nodes.get_mut(&n.id).expect("present"));
        if let Some(dep) = failed_dep {
            self.transition(
                &n.id,
                &mut st,
                NodePhase::Skipped,
                Some(format!("upstream node {dep} did not succeed")),
            );
        } else if all_skipped {
            self.transition(
                &n.id,
                &mut st,
                NodePhase::Skipped,
                Some("every node it depends on was skipped".into()),
            );
        } else if self.failed_fast.is_some() {
            // Leave it; stop_all closes it after the pass.
        } else {
            let scope = self.scope(status, n);
            let go = match (&n.when, &spec.when) {
                (Some(p), Some(src)) => expr::eval_bool(p, src, &scope),
                _ => Ok(true),
            };
            match go {
                Ok(false) => {
                    let src = spec.when.as_deref().unwrap_or_default();
                    self.transition(
                        &n.id,
                        &mut st,
                        NodePhase::Skipped,
                        Some(format!("condition {src:?} is false")),
                    );
                }
                Err(e) => self.fail(&n.id, &mut st, "ConditionError", format!("when: {e}")),
                Ok(true) if self.waits(spec, n, &mut st) => {}
                Ok(true) => {
                    let takes_slot = matches!(n.kind, Kind::Task | Kind::Array);
                    if takes_slot
                        && self
                            .spec
                            .parallelism
                            .is_some_and(|p| self.running >= p as usize)
                    {
                        // Waits for a slot; a later round starts it.
                    } else {
                        if takes_slot {
                            self.running += 1;
                        }
                        st.started_at = Some(timestamp(self.input.now));
                        self.transition(&n.id, &mut st, NodePhase::Running, None);
                        match n.kind {
                            Kind::Task => self.start_attempt(spec, n, &mut st, &scope),
                            Kind::Array => self.start_array(spec, n, &mut st, &scope),
                            Kind::Sleep(d) => self.drive_sleep(n, &mut st, d),
                            Kind::Approval => self.drive_approval(n, &mut st),
                        }
                    }
                }
            }
        }
        *status.nodes.get_mut(&n.id).expect("present") = st;
    }

    /// Whether a node that could start must wait for its executor (a
    /// plugin being loaded). It stays `Pending` with the reason; past the
    /// executor's timeout it fails on the system budget.
    fn waits(&mut self, spec: &NodeSpec, n: &CompiledNode, st: &mut NodeStatus) -> bool {
        let task = match (&spec.task, &spec.array) {
            (Some(t), _) => t,
            (None, Some(a)) => &a.task,
            _ => return false,
        };
        let Readiness::Wait {
            reason,
            message,
            timeout,
        } = self.exec.ready(task)
        else {
            if st.waiting_since.take().is_some() {
                st.reason = None;
                st.message = None;
            }
            return false;
        };
        let now = self.input.now;
        let since = parse_timestamp(st.waiting_since.as_deref()).unwrap_or(now);
        if now >= since + timeout {
            st.waiting_since = None;
            st.system_failures += 1;
            let waited = humantime::format_duration(timeout);
            self.fail(
                &n.id,
                st,
                "PluginNotReady",
                format!("{message}, and it was still not ready after {waited}"),
            );
            return true;
        }
        st.waiting_since
            .get_or_insert_with(|| timestamp_millis(now));
        st.reason = Some(reason);
        st.message = Some(message);
        self.out
            .wake((now + Duration::from_secs(1)).min(since + timeout));
        true
    }

    fn fail(&mut self, id: &str, st: &mut NodeStatus, reason: &str, message: String) {
        st.reason = Some(reason.into());
        self.transition(id, st, NodePhase::Failed, Some(message.clone()));
        self.node_failed(id, &message);
    }

    fn node_failed(&mut self, id: &str, message: &str) {
        if self.spec.failure_policy == FailurePolicy::FailFast && self.failed_fast.is_none() {
            self.failed_fast = Some(format!("node {id} failed: {message}"));
        }
    }

    fn resolve_inputs(&self, spec: &NodeSpec, scope: &Scope) -> Result<Map<String, Value>, String> {
        match expr::resolve(&Value::Object(spec.inputs.clone()), scope)? {
            Value::Object(m) => Ok(m),
            _ => unreachable!("an object resolves to an object"),
        }
    }

    fn start_attempt(
        &mut self,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    ) {
        st.attempts += 1;
        st.attempt_started_at = Some(timestamp_millis(self.input.now));
        st.retry_at = None;
        st.outputs = None;
        st.resource = None;
        if st.phase != NodePhase::Running {
            self.transition(&n.id, st, NodePhase::Running, None);
        }
        self.drive_task(spec, n, st, scope);
    }

    fn drive_task(
        &mut self,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    ) {
        let now = self.input.now;
        if st.phase == NodePhase::Retrying {
            match parse_timestamp(st.retry_at.as_deref()) {
                Some(at) if at > now => {
                    self.out.wake(at);
                    return;
                }
                _ => {}
            }
            if self
                .spec
                .parallelism
                .is_some_and(|p| self.running >= p as usize)
            {
                return;
            }
            self.running += 1;
            self.start_attempt(spec, n, st, scope);
            return;
        }
        let task = spec.task.as_ref().expect("a task node has a task");
        let inputs = match self.resolve_inputs(spec, scope) {
            Ok(i) => i,
            Err(e) => return self.fail(&n.id, st, "InputError", format!("inputs: {e}")),
        };
        let req = TaskRequest {
            node_id: &n.id,
            item: None,
            attempt: st.attempts.saturating_sub(1),
            task,
            inputs: &inputs,
            plugin: st.plugin.as_ref(),
            resource: st.resource.as_ref(),
        };
        // The timeout is checked before observing: an attempt past it is
        // stopped even if its resource says it is still running.
        if let (Some(t), Some(started)) =
            (n.timeout, parse_timestamp(st.attempt_started_at.as_deref()))
        {
            if now >= started + t {
                self.exec.abort(&req);
                let obs = TaskObservation::failed(
                    true,
                    false,
                    "TimedOut",
                    &format!(
                        "attempt {} exceeded its timeout of {}",
                        st.attempts,
                        humantime::format_duration(t)
                    ),
                );
                return self.apply(n, st, obs);
            }
            self.out.wake(started + t);
        }
        let obs = self.exec.task(&req);
        self.apply(n, st, obs);
    }

    fn apply(&mut self, n: &CompiledNode, st: &mut NodeStatus, obs: TaskObservation) {
        if obs.plugin.is_some() {
            st.plugin = obs.plugin;
        }
        if obs.resource.is_some() {
            st.resource = obs.resource;
        }
        if !obs.log_links.is_empty() {
            st.log_links = obs.log_links;
        }
        st.task_phase = obs.task_phase;
        match obs.state {
            TaskState::InProgress => {
                if obs.message.is_some() {
                    st.message = obs.message;
                }
                st.reason = obs.reason;
            }
            TaskState::Succeeded => {
                st.outputs = obs.outputs;
                st.reason = obs.reason;
                self.running = self.running.saturating_sub(1);
                self.transition(&n.id, st, NodePhase::Succeeded, obs.message);
            }
            TaskState::Failed { retryable, system } => {
                self.running = self.running.saturating_sub(1);
                let message = obs.message.unwrap_or_else(|| "failed".into());
                st.reason = obs.reason;
                match self.count_failure(
                    n.retries,
                    &mut st.user_failures,
                    &mut st.system_failures,
                    retryable,
                    system,
                ) {
                    Some(delay) => {
                        let at = self.input.now + delay;
                        st.retry_at = Some(timestamp_millis(at));
                        self.out.wake(at);
                        self.transition(&n.id, st, NodePhase::Retrying, Some(message));
                    }
                    None => {
                        self.transition(&n.id, st, NodePhase::Failed, Some(message.clone()));
                        self.node_failed(&n.id, &message);
                    }
                }
            }
        }
    }

    /// Counts a failure on its budget; the backoff before the next attempt
    /// when one is left.
    fn count_failure(
        &self,
        r: Retries,
        user: &mut u32,
        system: &mut u32,
        retryable: bool,
        is_system: bool,
    ) -> Option<Duration> {
        let (count, limit) = if is_system {
            *system += 1;
            (*system, r.system)
        } else {
            *user += 1;
            (*user, r.user)
        };
        (retryable && count <= limit).then(|| r.delay(*user + *system))
    }

    fn drive_sleep(&mut self, n: &CompiledNode, st: &mut NodeStatus, d: Duration) {
        // `startedAt` has Kubernetes' one-second precision; the sleep counts
        // from a millisecond timestamp so it never ends early.
        if st.attempt_started_at.is_none() {
            st.attempt_started_at = Some(timestamp_millis(self.input.now));
        }
        let started = parse_timestamp(st.attempt_started_at.as_deref()).unwrap_or(self.input.now);
        let until = started + d;
        if self.input.now >= until {
            self.transition(
                &n.id,
                st,
                NodePhase::Succeeded,
                Some(format!("slept {}", humantime::format_duration(d))),
            );
        } else {
            st.task_phase = Some("sleeping".into());
            self.out.wake(until);
        }
    }

    fn drive_approval(&mut self, n: &CompiledNode, st: &mut NodeStatus) {
        if self.input.approvals.contains(&n.id) {
            st.task_phase = None;
            st.outputs = Some(
                json!({"approved": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            self.transition(&n.id, st, NodePhase::Succeeded, Some("approved".into()));
        } else {
            st.task_phase = Some("waiting-for-approval".into());
            let ask = self
                .spec
                .nodes
                .iter()
                .find(|s| s.id == n.id)
                .and_then(|s| s.gate.as_ref())
                .and_then(|g| g.approval.as_ref())
                .and_then(|a| a.message.clone());
            st.message = Some(ask.unwrap_or_else(|| {
                format!(
                    "waiting for approval: annotate the Workflow with {}=true",
                    crate::spec::approval_annotation(&n.id)
                )
            }));
        }
    }

    fn start_array(
        &mut self,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    ) {
        let array = spec.array.as_ref().expect("an array node has an array");
        let over = match expr::resolve(&array.over, scope) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                return self.fail(
                    &n.id,
                    st,
                    "InputError",
                    format!("array.over gave {other}, not a list"),
                );
            }
            Err(e) => return self.fail(&n.id, st, "InputError", format!("array.over: {e}")),
        };
        st.items = vec![ItemStatus::default(); over.len()];
        st.outputs = Some(Map::from_iter([("items".to_string(), Value::Array(over))]));
        self.drive_array(spec, n, st, scope);
    }

    fn required(array: &ArraySpec, total: usize) -> usize {
        match (array.min_successes, array.min_success_ratio) {
            (Some(m), _) => (m as usize).min(total),
            (None, Some(r)) => ((r * total as f64).ceil() as usize).min(total),
            (None, None) => total,
        }
    }

    fn drive_array(
        &mut self,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    ) {
        let array = spec.array.as_ref().expect("an array node has an array");
        let now = self.input.now;
        let over: Vec<Value> = st
            .outputs
            .as_ref()
            .and_then(|o| o.get("items"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let total = st.items.len();
        let limit = array.parallelism.map_or(usize::MAX, |p| p as usize);
        let mut running = st
            .items
            .iter()
            .filter(|i| i.phase == NodePhase::Running)
            .count();
        let plugin = st.plugin.clone();
        let mut pinned = None;
        for idx in 0..total {
            let item = &mut st.items[idx];
            let start = match item.phase {
                NodePhase::Pending => running < limit,
                NodePhase::Retrying => match parse_timestamp(item.retry_at.as_deref()) {
                    Some(at) if at > now => {
                        self.out.wake(at);
                        false
                    }
                    _ => running < limit,
                },
                NodePhase::Running => false,
                _ => continue,
            };
            if !start && item.phase != NodePhase::Running {
                continue;
            }
            let mut item_scope = scope.clone();
            item_scope.item = over.get(idx).cloned();
            item_scope.index = Some(idx);
            let mut inputs = match self.resolve_inputs(spec, &item_scope) {
                Ok(i) => i,
                Err(e) => {
                    item.phase = NodePhase::Failed;
                    item.message = Some(format!("inputs: {e}"));
                    continue;
                }
            };
            inputs
                .entry("item")
                .or_insert_with(|| over.get(idx).cloned().unwrap_or(Value::Null));
            inputs.entry("index").or_insert_with(|| idx.into());
            if start {
                item.attempts += 1;
                item.phase = NodePhase::Running;
                item.attempt_started_at = Some(timestamp_millis(now));
                item.retry_at = None;
                running += 1;
            }
            let req = TaskRequest {
                node_id: &n.id,
                item: Some(idx),
                attempt: item.attempts - 1,
                task: &array.task,
                inputs: &inputs,
                plugin: plugin.as_ref(),
                resource: None,
            };
            let timed_out = match (
                n.timeout,
                parse_timestamp(item.attempt_started_at.as_deref()),
            ) {
                (Some(t), Some(s)) if now >= s + t => {
                    self.exec.abort(&req);
                    Some(format!(
                        "attempt {} exceeded its timeout of {}",
                        item.attempts,
                        humantime::format_duration(t)
                    ))
                }
                (Some(t), Some(s)) => {
                    self.out.wake(s + t);
                    None
                }
                _ => None,
            };
            let obs = match timed_out {
                Some(m) => TaskObservation::failed(true, false, "TimedOut", &m),
                None => self.exec.task(&req),
            };
            if obs.plugin.is_some() {
                pinned = obs.plugin.clone();
            }
            match obs.state {
                TaskState::InProgress => {}
                TaskState::Succeeded => {
                    running -= 1;
                    item.phase = NodePhase::Succeeded;
                    item.outputs = obs.outputs;
                    item.message = None;
                }
                TaskState::Failed { retryable, system } => {
                    running -= 1;
                    item.message = obs.message;
                    let (mut u, mut s) = (item.user_failures, item.system_failures);
                    let next = self.count_failure(n.retries, &mut u, &mut s, retryable, system);
                    item.user_failures = u;
                    item.system_failures = s;
                    match next {
                        Some(delay) => {
                            item.phase = NodePhase::Retrying;
                            item.retry_at = Some(timestamp_millis(now + delay));
                            self.out.wake(now + delay);
                        }
                        None => item.phase = NodePhase::Failed,
                    }
                }
            }
        }
        if pinned.is_some() && st.plugin.is_none() {
            st.plugin = pinned;
        }
        let succeeded = st
            .items
            .iter()
            .filter(|i| i.phase == NodePhase::Succeeded)
            .count();
        let open = st.items.iter().filter(|i| !i.phase.is_terminal()).count();
        let needed = Self::required(array, total);
        st.task_phase = Some(format!("{succeeded}/{total} items succeeded"));
        if succeeded >= needed && open == 0 || succeeded + open < needed {
            if open > 0 {
                // Cannot reach the minimum any more: stop what still runs.
                let keep = st.phase;
                st.phase = NodePhase::Running;
                self.abort_node(spec, n, st);
                st.phase = keep;
            }
            self.running = self.running.saturating_sub(1);
            let results: Vec<Value> = st
                .items
                .iter()
                .map(|i| i.outputs.clone().map_or(Value::Null, Value::Object))
                .collect();
            if succeeded >= needed {
                st.outputs = Some(Map::from_iter([(
                    "results".to_string(),
                    Value::Array(results),
                )]));
                self.transition(
                    &n.id,
                    st,
                    NodePhase::Succeeded,
                    Some(format!("{succeeded} of {total} items succeeded")),
                );
            } else {
                let msg = format!("{succeeded} of {total} items succeeded, {needed} needed");
                st.reason = Some("MinSuccessesNotMet".into());
                self.transition(&n.id, st, NodePhase::Failed, Some(msg.clone()));
                self.node_failed(&n.id, &msg);
            }
        }
    }
}
