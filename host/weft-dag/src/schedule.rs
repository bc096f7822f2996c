//! The scheduler: one reconcile round moves every node as far as it can go.
//!
//! A round is a pure function of the spec, the last status, the clock and
//! what the [`Executor`] reports about tasks; it mutates the status in place
//! and says when it wants to run again. The controller implements
//! [`Executor`] with plugin calls and Kubernetes resources; tests implement
//! it with a script.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use crate::actions::Shutdown;
use crate::compiled::{Compiled, CompiledNode, Kind};
use crate::expr::{self, Scope};
use crate::nodes;
pub use crate::round::{
    CacheRequest, Executor, LockState, NodeCx, Readiness, Round, RoundInput, RoundOutcome,
    TaskObservation, TaskRequest, TaskState, Transition, WorkflowRequest,
};

/// The reason of a node that waits for a lock of its `synchronization`.
pub const WAITING_FOR_LOCK: &str = "WaitingForLock";

/// The reason of a node that waits for a slot of its task type's
/// resource pool.
pub const WAITING_FOR_RESOURCES: &str = "WaitingForResources";

/// The task a node runs (a task, array or dynamic node's), if any.
pub fn node_task(spec: &NodeSpec) -> Option<&crate::spec::TaskSpec> {
    match (&spec.task, &spec.array, &spec.dynamic) {
        (Some(t), _, _) => Some(t),
        (_, Some(a), _) => Some(&a.task),
        (_, _, Some(d)) => Some(&d.task),
        _ => None,
    }
}

/// The claimant an array node's item is in a lock's line (`node[3]`):
/// each item of an array takes its own slot of its task type's resource
/// pool, as each is a task of its own.
pub fn item_claim(node: &str, idx: usize) -> String {
    format!("{node}[{idx}]")
}

/// The node and item of an [`item_claim`], if `claim` is one.
pub fn claim_item(claim: &str) -> Option<(&str, usize)> {
    let (node, rest) = claim.strip_suffix(']')?.rsplit_once('[')?;
    Some((node, rest.parse().ok()?))
}
use crate::spec::{NodeSpec, WorkflowSpec};
use crate::status::{
    ExitStatus, NodePhase, NodeStatus, WorkflowPhase, WorkflowStatus, parse_timestamp, timestamp,
    timestamp_millis,
};

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

/// Runs one reconcile round over a validated workflow: a sequence of named
/// stages (begin, stop if asked, one pass over the DAG in topological
/// order, fail fast, conclude), or a round of its exit handler once the
/// main DAG ended.
pub fn reconcile<E: Executor>(
    spec: &WorkflowSpec,
    compiled: &Compiled,
    status: &mut WorkflowStatus,
    input: &RoundInput<'_>,
    exec: &mut E,
) -> RoundOutcome {
    reconcile_dag(spec, compiled, status, input, exec, None)
}

/// [`reconcile`] of a main DAG, or of an exit handler's (which sees
/// `workflow` in its expressions).
fn reconcile_dag<E: Executor>(
    spec: &WorkflowSpec,
    compiled: &Compiled,
    status: &mut WorkflowStatus,
    input: &RoundInput<'_>,
    exec: &mut E,
    workflow: Option<Value>,
) -> RoundOutcome {
    let before = status.phase;
    status.observed_generation = input.generation;
    if status.phase.is_terminal() {
        return RoundOutcome::default();
    }
    status.suspended = spec.suspend;
    let phases = begin(compiled, status, input.now);
    let mut round = Round {
        spec,
        compiled,
        input,
        exec,
        out: RoundOutcome::default(),
        running: 0,
        failed_fast: None,
        phases,
        workflow,
        compile: crate::compile::compile,
    };
    if status.on_exit.is_some() {
        round.exit_handler(status);
    } else if let Some(stop) = round.stop_requested(status) {
        round.stop_all(status, &stop.why);
        round.main_done(status, stop.phase, Some(stop.why), stop.exit_handler);
    } else {
        round.pass(status);
        if let Some(why) = round.failed_fast.clone() {
            round.stop_all(status, &format!("stopped because {why} (FailFast)"));
        }
        round.conclude(status);
    }
    round.out.workflow_changed = before != status.phase;
    round.out
}

/// Why a workflow stops before its DAG ends, and whether its exit
/// handler still runs.
struct Stop {
    phase: WorkflowPhase,
    why: String,
    exit_handler: bool,
}

/// Marks the workflow running and reads each node's phase once (the pass
/// then reads phases by index).
fn begin(compiled: &Compiled, status: &mut WorkflowStatus, now: SystemTime) -> Vec<NodePhase> {
    if status.started_at.is_none() {
        status.started_at = Some(timestamp(now));
        if !compiled.inputs.is_empty() {
            status.inputs = Some(compiled.inputs.clone());
        }
    }
    status.phase = WorkflowPhase::Running;
    let mut phases = Vec::with_capacity(compiled.nodes.len());
    for n in &compiled.nodes {
        let st = match status.nodes.get_mut(&n.id) {
            Some(st) => st,
            None => status.nodes.entry(n.id.clone()).or_default(),
        };
        // `attempts` is omitted from the stored status when it is one: a
        // node that started (a retried workflow's reset nodes too) had one.
        if (st.started_at.is_some() || matches!(st.phase, NodePhase::Running | NodePhase::Retrying))
            && matches!(n.kind, Kind::Task | Kind::Workflow | Kind::Dynamic)
        {
            st.attempts = st.attempts.max(1);
        }
        phases.push(st.phase);
    }
    phases
}

/// The workflow's message when one node failed, or several did.
fn failed_message(status: &WorkflowStatus) -> Option<String> {
    let failed: Vec<&str> = status
        .nodes
        .iter()
        .filter(|(_, s)| s.phase == NodePhase::Failed)
        .map(|(id, _)| id.as_str())
        .collect();
    let first = failed.first()?;
    let msg = status.nodes[*first].message.clone().unwrap_or_default();
    Some(format!("node {} failed: {msg}", failed.join(", ")))
}

impl<E: Executor> Round<'_, E> {
    /// Why the whole workflow stops now, if it does: the user asked, the
    /// Workflow is going away, or its deadline passed.
    fn stop_requested(&mut self, status: &WorkflowStatus) -> Option<Stop> {
        let now = self.input.now;
        let stop = |phase, why: &str, exit_handler| {
            Some(Stop {
                phase,
                why: why.into(),
                exit_handler,
            })
        };
        if self.input.deleting {
            return stop(
                WorkflowPhase::Aborted,
                "the workflow is being deleted",
                false,
            );
        }
        if self.spec.abort {
            return stop(
                WorkflowPhase::Aborted,
                "aborted by the user (spec.abort)",
                false,
            );
        }
        match self.spec.shutdown {
            Some(Shutdown::Terminate) => {
                let why = "terminated by the user (spec.shutdown: Terminate)";
                return stop(WorkflowPhase::Aborted, why, false);
            }
            Some(Shutdown::Stop) => {
                let why = "stopped by the user (spec.shutdown: Stop)";
                return stop(WorkflowPhase::Aborted, why, true);
            }
            None => {}
        }
        let d = self.compiled.active_deadline?;
        let started = parse_timestamp(status.started_at.as_deref()).unwrap_or(now);
        if now >= started + d {
            let d = humantime::format_duration(d);
            let why = format!("exceeded its active deadline of {d}");
            return stop(WorkflowPhase::Failed, &why, true);
        }
        self.out.wake(started + d);
        None
    }

    /// The main DAG ended: the workflow ends, or its exit handler starts
    /// (unless it was terminated).
    fn main_done(
        &mut self,
        status: &mut WorkflowStatus,
        phase: WorkflowPhase,
        message: Option<String>,
        exit_handler: bool,
    ) {
        if exit_handler && self.compiled.on_exit.is_some() {
            status.on_exit = Some(ExitStatus {
                phase,
                message,
                nodes: Default::default(),
            });
            return self.exit_handler(status);
        }
        finish(status, phase, message, self.input.now, &mut self.out);
    }

    /// A round of the exit handler's DAG, run as a workflow of its own that
    /// sees how the main DAG ended. The workflow ends with it: in the main
    /// DAG's phase, or Failed with both reasons when an exit node failed.
    fn exit_handler(&mut self, status: &mut WorkflowStatus) {
        let compiled = self.compiled;
        let (xspec, xc) = compiled
            .on_exit
            .as_deref()
            .expect("compiled with an exit handler");
        let exit = status.on_exit.take().expect("the main DAG ended");
        let terminated = self.spec.abort || self.spec.shutdown == Some(Shutdown::Terminate);
        let stopped;
        let xspec = match terminated || self.input.deleting {
            true => {
                stopped = WorkflowSpec {
                    shutdown: Some(Shutdown::Terminate),
                    ..xspec.clone()
                };
                &stopped
            }
            false => xspec,
        };
        let var = outcome(status, &exit, self.input.now);
        let mut xstatus = WorkflowStatus {
            nodes: exit.nodes.clone(),
            started_at: status.started_at.clone(),
            ..Default::default()
        };
        let out = reconcile_dag(xspec, xc, &mut xstatus, self.input, self.exec, Some(var));
        self.out.transitions.extend(out.transitions);
        if let Some(at) = out.wake_at {
            self.out.wake(at);
        }
        let (phase, message) = match xstatus.phase {
            WorkflowPhase::Succeeded => (exit.phase, exit.message.clone()),
            p => {
                let xmsg = xstatus.message.clone().unwrap_or_default();
                let msg = match &exit.message {
                    Some(m) => format!("{m}; exit handler: {xmsg}"),
                    None => format!("exit handler: {xmsg}"),
                };
                let p = if p == WorkflowPhase::Aborted {
                    p
                } else {
                    WorkflowPhase::Failed
                };
                (p, Some(msg))
            }
        };
        status.on_exit = Some(ExitStatus {
            nodes: xstatus.nodes,
            ..exit
        });
        if xstatus.phase.is_terminal() {
            finish(status, phase, message, self.input.now, &mut self.out);
        } else {
            status.message = Some("running the exit handler (spec.onExit)".into());
        }
    }

    /// Every open node once, dependencies first.
    fn pass(&mut self, status: &mut WorkflowStatus) {
        self.running = self
            .compiled
            .nodes
            .iter()
            .zip(&self.phases)
            .filter(|(n, p)| nodes::takes_slot(&n.kind) && **p == NodePhase::Running)
            .count();
        for &i in &self.compiled.order {
            self.step(status, i);
        }
    }

    /// Progress, and the workflow's end once every node is done: its
    /// outputs when all went well, the failed nodes otherwise.
    fn conclude(&mut self, status: &mut WorkflowStatus) {
        let total = self.compiled.nodes.len();
        let done = match self.failed_fast.is_some() {
            true => status
                .nodes
                .values()
                .filter(|s| s.phase.is_terminal())
                .count(),
            false => self.phases.iter().filter(|p| p.is_terminal()).count(),
        };
        status.progress = Some(format!("{done}/{total}"));
        if done < total {
            return;
        }
        if let Some(why) = failed_message(status) {
            return self.main_done(status, WorkflowPhase::Failed, Some(why), true);
        }
        match workflow_outputs(self.spec, self.compiled, status, &*self.exec) {
            Ok(outputs) => {
                status.outputs = outputs;
                self.main_done(status, WorkflowPhase::Succeeded, None, true);
            }
            Err(why) => self.main_done(status, WorkflowPhase::Failed, Some(why), true),
        }
    }
}

/// How long a node waits before it asks the store again for upstream
/// outputs it could not read.
const OUTPUTS_RETRY: Duration = Duration::from_secs(5);

/// A node's outputs, from its status or, when they are kept in the
/// artifact repository, read back through the executor.
fn outputs_of<E: Executor + ?Sized>(
    exec: &E,
    id: &str,
    st: &NodeStatus,
) -> Result<Map<String, Value>, String> {
    match (&st.outputs, &st.outputs_ref) {
        (Some(o), _) => Ok(o.clone()),
        (None, Some(r)) => exec
            .offloaded(r)
            .map_err(|e| format!("the outputs of node {id} ({}): {e}", r.key)),
        (None, None) => Ok(Map::new()),
    }
}

/// `spec.outputs` evaluated over every node (none when it declares none).
fn workflow_outputs<E: Executor>(
    spec: &WorkflowSpec,
    compiled: &Compiled,
    status: &WorkflowStatus,
    exec: &E,
) -> Result<Option<Map<String, Value>>, String> {
    if spec.outputs.is_empty() {
        return Ok(None);
    }
    let nodes = status
        .nodes
        .iter()
        .map(|(id, st)| {
            let outputs = outputs_of(exec, id, st)?;
            Ok((id.clone(), json!({"phase": st.phase, "outputs": outputs})))
        })
        .collect::<Result<_, String>>()?;
    let scope = Scope {
        inputs: compiled.inputs.clone(),
        nodes,
        item: None,
        index: None,
        workflow: None,
    };
    let mut out = Map::new();
    for (name, v) in &spec.outputs {
        let value = expr::resolve(v, &scope).map_err(|e| format!("outputs.{name}: {e}"))?;
        out.insert(name.clone(), value);
    }
    Ok(Some(out))
}

/// `workflow` as an exit handler sees it: how the main DAG ended, its
/// failed nodes with their messages, and how long it ran (seconds).
fn outcome(status: &WorkflowStatus, exit: &ExitStatus, now: SystemTime) -> Value {
    let failures: Vec<Value> = status
        .nodes
        .iter()
        .filter(|(_, s)| s.phase == NodePhase::Failed)
        .map(|(id, s)| json!({"node": id, "message": s.message.clone().unwrap_or_default()}))
        .collect();
    let started = parse_timestamp(status.started_at.as_deref()).unwrap_or(now);
    let duration = now
        .duration_since(started)
        .unwrap_or_default()
        .as_secs_f64();
    json!({
        "phase": exit.phase,
        "message": exit.message.clone().unwrap_or_default(),
        "failures": failures,
        "duration": duration,
    })
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

    pub(crate) fn abort_node(&mut self, spec: &NodeSpec, n: &CompiledNode, st: &mut NodeStatus) {
        let scope = Scope::default();
        let (node, status) = (n, st);
        nodes::abort(NodeCx {
            round: self,
            spec,
            node,
            status,
            scope: &scope,
        });
    }

    /// What `n`'s expressions see. Fails only when an upstream node's
    /// outputs are in the artifact repository and cannot be read now.
    fn scope(&self, status: &WorkflowStatus, n: &CompiledNode) -> Result<Scope, String> {
        let mut nodes = Map::new();
        for &d in &n.deps {
            let id = &self.compiled.nodes[d].id;
            let st = &status.nodes[id];
            let outputs = outputs_of(&*self.exec, id, st)?;
            nodes.insert(id.clone(), json!({"phase": st.phase, "outputs": outputs}));
        }
        Ok(Scope {
            inputs: self.compiled.inputs.clone(),
            nodes,
            item: None,
            index: None,
            workflow: self.workflow.clone(),
        })
    }

    /// A node that needs outputs the store cannot give now waits: it is
    /// looked at again shortly, saying why meanwhile.
    fn outputs_unavailable(&mut self, st: &mut NodeStatus, why: String) {
        st.reason = Some("WaitingForOutputs".into());
        st.message = Some(why);
        self.out.wake(self.input.now + OUTPUTS_RETRY);
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
                let scope = match scope {
                    Ok(s) => s,
                    Err(why) => {
                        self.outputs_unavailable(&mut st, why);
                        *status.nodes.get_mut(&n.id).expect("present") = st;
                        return;
                    }
                };
                match st.phase {
                    // A retry is a new attempt, started by the node's handler
                    // once the backoff is over and a slot is free.
                    NodePhase::Retrying if !self.spec.suspend && self.retry_now(&st) => {
                        nodes::start(NodeCx {
                            round: self,
                            spec,
                            node: n,
                            status: &mut st,
                            scope: &scope,
                        })
                    }
                    NodePhase::Retrying => {}
                    _ => nodes::drive(NodeCx {
                        round: self,
                        spec,
                        node: n,
                        status: &mut st,
                        scope: &scope,
                    }),
                }
                *status.nodes.get_mut(&n.id).expect("present") = st;
            }
            _ => {}
        }
    }

    /// A Pending node whose dependencies are all done: skipped (an
    /// upstream failure, only skipped dependencies, a false condition),
    /// failed (a condition that cannot be evaluated), left waiting (its
    /// plugin, a slot, fail-fast closing) or started.
    fn maybe_start(&mut self, status: &mut WorkflowStatus, i: usize) {
        let n = &self.compiled.nodes[i];
        let spec = node_spec(self.spec, &n.id, i);
        let Some(upstream) = self.upstream(n) else {
            return; // not ready
        };
        let mut st = std::mem::take(status.nodes.get_mut(&n.id).expect("present"));
        if let Some(why) = upstream {
            self.transition(&n.id, &mut st, NodePhase::Skipped, Some(why));
        } else if self.failed_fast.is_none() {
            // (Under fail-fast it is left; stop_all closes it after the pass.)
            let scope = match self.scope(status, n) {
                Ok(s) => s,
                Err(why) => {
                    self.outputs_unavailable(&mut st, why);
                    *status.nodes.get_mut(&n.id).expect("present") = st;
                    return;
                }
            };
            let go = match (&n.when, &spec.when) {
                (Some(p), Some(src)) => expr::eval_bool(p, src, &scope),
                _ => Ok(true),
            };
            match go {
                Ok(false) => {
                    let src = spec.when.as_deref().unwrap_or_default();
                    let why = format!("condition {src:?} is false");
                    self.transition(&n.id, &mut st, NodePhase::Skipped, Some(why));
                }
                Err(e) => self.fail(&n.id, &mut st, "ConditionError", format!("when: {e}")),
                // Suspended: it starts once the workflow is resumed.
                Ok(true) if self.spec.suspend => {}
                Ok(true) if self.waits(spec, n, &mut st) => {}
                Ok(true) => self.start_if_slot(spec, n, &mut st, &scope),
            }
        }
        *status.nodes.get_mut(&n.id).expect("present") = st;
    }

    /// What the dependencies say: `None` while one is still open;
    /// `Some(Some(why))` when the node is skipped for them (one did not
    /// succeed, or all were skipped); `Some(None)` when it may run.
    fn upstream(&self, n: &CompiledNode) -> Option<Option<String>> {
        let mut all_skipped = !n.deps.is_empty();
        let mut failed_dep = None;
        for &d in &n.deps {
            match self.phases[d] {
                NodePhase::Succeeded => all_skipped = false,
                NodePhase::Skipped => {}
                NodePhase::Failed | NodePhase::Aborted => {
                    all_skipped = false;
                    failed_dep.get_or_insert(&self.compiled.nodes[d].id);
                }
                _ => return None,
            }
        }
        Some(match (failed_dep, all_skipped) {
            (Some(dep), _) => Some(format!("upstream node {dep} did not succeed")),
            (None, true) => Some("every node it depends on was skipped".into()),
            (None, false) => None,
        })
    }

    /// Starts a node when a parallelism slot is free (gates take none);
    /// otherwise a later round does.
    fn start_if_slot(
        &mut self,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    ) {
        let takes_slot = nodes::takes_slot(&n.kind);
        let full = self
            .spec
            .parallelism
            .is_some_and(|p| self.running >= p as usize);
        if takes_slot && full {
            return;
        }
        if !self.holds_locks(spec, n, st) {
            return;
        }
        if takes_slot {
            self.running += 1;
        }
        st.started_at = Some(timestamp(self.input.now));
        self.transition(&n.id, st, NodePhase::Running, None);
        nodes::start(NodeCx {
            round: self,
            spec,
            node: n,
            status: st,
            scope,
        });
    }

    /// Whether a node may start as far as its `synchronization` and its
    /// task type's resource pool go: it holds every lock, or it stays
    /// `Pending` saying what it waits for (the lock's watch wakes the
    /// workflow when that changes).
    fn holds_locks(&mut self, spec: &NodeSpec, n: &CompiledNode, st: &mut NodeStatus) -> bool {
        let mut refs = spec
            .synchronization
            .as_ref()
            .map(|s| s.locks())
            .unwrap_or_default();
        // An array's items take the pool's slots one each (nodes/array.rs).
        if let Some(task) = node_task(spec).filter(|_| spec.array.is_none()) {
            refs.extend(self.exec.pools(task));
        }
        if refs.is_empty() {
            return true;
        }
        match self.exec.acquire(&n.id, &refs) {
            LockState::Held => {
                if matches!(
                    st.reason.as_deref(),
                    Some(WAITING_FOR_LOCK | WAITING_FOR_RESOURCES)
                ) {
                    st.reason = None;
                    st.message = None;
                }
                true
            }
            LockState::Waiting { kind, message } => {
                let reason = match kind {
                    "pool" => WAITING_FOR_RESOURCES,
                    _ => WAITING_FOR_LOCK,
                };
                st.reason = Some(reason.into());
                st.message = Some(message);
                false
            }
        }
    }

    /// Whether a node that could start must wait for its executor (a
    /// plugin being loaded). It stays `Pending` with the reason; past the
    /// executor's timeout it fails on the system budget.
    fn waits(&mut self, spec: &NodeSpec, n: &CompiledNode, st: &mut NodeStatus) -> bool {
        let Some(task) = node_task(spec) else {
            return false;
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
}
