//! One reconcile round's state, the one value a node handler gets
//! ([`NodeCx`]), and the primitives every node kind uses: transition, fail,
//! resolve inputs, begin an attempt, apply what the executor observed,
//! count a failure and retry, time out, compile a generated spec. With the
//! interface to the executor. Below `crate::nodes`, whose handlers are free
//! functions over these (no node kind adds methods to [`Round`]), and
//! `crate::schedule`, which drives the round.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use crate::cache::{CacheEntry, CacheSpec};
use crate::compiled::{Compiled, CompiledNode, Retries};
use crate::expr::{self, Scope};
use crate::problem::Problem;
use crate::spec::{FailurePolicy, NodeSpec, TaskSpec, WorkflowSpec};
use crate::status::{
    LogLink, NodePhase, NodeStatus, PluginRef, ResourceRef, parse_timestamp, timestamp,
    timestamp_millis,
};

/// How a round compiles a spec a node generated: `crate::compile::compile`.
pub type Compile = fn(&WorkflowSpec, &dyn Fn(&str) -> bool) -> Result<Compiled, Vec<Problem>>;

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
    /// The task's input artifacts, resolved (empty when aborting).
    pub artifacts: &'a [crate::artifacts::ResolvedInput],
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
    /// Outputs kept in the artifact repository instead (too large).
    pub outputs_ref: Option<crate::artifacts::ArtifactRef>,
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
            outputs_ref: None,
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
    /// Whether a node holds every lock of its `synchronization` (asked
    /// when it could start; the executor queues it for them otherwise).
    fn acquire(&mut self, _node: &str, _locks: &[crate::spec::sync::LockRef]) -> LockState {
        LockState::Held
    }
    /// The resource pools a task of this type takes a slot of (Flyte's
    /// resource manager: the operator caps a task type's running tasks
    /// per namespace), asked with the node's own locks.
    fn pools(&self, _task: &TaskSpec) -> Vec<crate::spec::sync::LockRef> {
        Vec::new()
    }
    /// Whether some plugin serves a task type (checked on the nodes a
    /// dynamic node generates).
    fn serves(&self, _task_type: &str) -> bool {
        true
    }
    /// Make sure an attempt's child Workflow runs (create it when missing)
    /// and say where it stands; its outputs are the child's.
    fn workflow(&mut self, req: &WorkflowRequest<'_>) -> TaskObservation {
        let _ = req;
        TaskObservation::failed(
            false,
            true,
            "Unsupported",
            "this executor runs no child workflows",
        )
    }
    /// Abort an attempt's child Workflow.
    fn abort_workflow(&mut self, _req: &WorkflowRequest<'_>) {}
    /// A fresh cached result of a task with these inputs, if there is one.
    fn cache_lookup(&mut self, _req: &CacheRequest<'_>) -> Option<CacheEntry> {
        None
    }
    /// Remembers a successful task's outputs (or their reference, when
    /// they are kept in the artifact repository).
    fn cache_store(
        &mut self,
        _req: &CacheRequest<'_>,
        _outputs: &Map<String, Value>,
        _outputs_ref: Option<&crate::artifacts::ArtifactRef>,
    ) {
    }
    /// Reads outputs kept in the artifact repository (a node's
    /// `outputsRef`), for expressions over them.
    fn offloaded(&self, r: &crate::artifacts::ArtifactRef) -> Result<Map<String, Value>, String> {
        Err(format!(
            "outputs {} are in the artifact repository, and this executor reads none",
            r.key
        ))
    }
}

/// A node's locks, as the executor finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// It holds them all: it may start.
    Held,
    /// It waits (`Pending`) for the lock of this kind (`pool`: reason
    /// `WaitingForResources`, else `WaitingForLock`), with this message:
    /// what it waits for and who holds it.
    Waiting {
        /// The kind of the lock it waits for.
        kind: &'static str,
        /// What it waits for and who holds it.
        message: String,
    },
}

/// A cached task node's look-up or store.
#[derive(Debug)]
pub struct CacheRequest<'a> {
    /// The node id.
    pub node_id: &'a str,
    /// The task.
    pub task: &'a TaskSpec,
    /// The resolved inputs.
    pub inputs: &'a Map<String, Value>,
    /// The resolved input artifacts (their digests are part of the key).
    pub artifacts: &'a [crate::artifacts::ResolvedInput],
    /// The node's cache settings.
    pub cache: &'a CacheSpec,
    /// The plugin that served the task (on store), for `includePlugin`.
    pub plugin: Option<&'a PluginRef>,
    /// The round's clock (entries past `maxAge` are not used).
    pub now: SystemTime,
}

/// One attempt of a child Workflow (a sub-workflow node, or the nodes a
/// dynamic node generated).
#[derive(Debug)]
pub struct WorkflowRequest<'a> {
    /// The node id.
    pub node_id: &'a str,
    /// The attempt, from 0.
    pub attempt: u32,
    /// The child's spec: nodes of its own or a `workflowTemplateRef`, with
    /// its inputs resolved.
    pub spec: &'a WorkflowSpec,
    /// The child, once known.
    pub resource: Option<&'a ResourceRef>,
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
    /// Rejected gate node ids, with the reason given.
    pub rejections: &'a HashMap<String, String>,
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
    /// The node's attempt when it happened (0 before its first).
    pub attempt: u32,
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
    pub(crate) fn wake(&mut self, at: SystemTime) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
}

/// One node in a round, as its kind's handler sees it (`crate::nodes`):
/// the round, whose primitives it calls, and the node's spec, compiled
/// form, status and the scope its expressions read. One value, so a new
/// node kind's handler has one signature to copy.
pub struct NodeCx<'c, 'a, E: Executor> {
    /// The round in progress.
    pub round: &'c mut Round<'a, E>,
    /// The node as written.
    pub spec: &'c NodeSpec,
    /// The node as compiled (id, kind, retries, timeout).
    pub node: &'c CompiledNode,
    /// Its status, changed in place.
    pub status: &'c mut NodeStatus,
    /// What its expressions see (empty when it is aborted).
    pub scope: &'c Scope,
}

/// One reconcile round in progress: what node handlers read and change.
pub struct Round<'a, E: Executor> {
    pub(crate) spec: &'a WorkflowSpec,
    pub(crate) compiled: &'a Compiled,
    pub(crate) input: &'a RoundInput<'a>,
    pub(crate) exec: &'a mut E,
    pub(crate) out: RoundOutcome,
    pub(crate) running: usize,
    pub(crate) failed_fast: Option<String>,
    /// Node phases by index, kept current during the pass.
    pub(crate) phases: Vec<NodePhase>,
    /// `workflow` in an exit handler's expressions.
    pub(crate) workflow: Option<Value>,
    /// How a spec a node generates is compiled (`crate::compile::compile`,
    /// handed in by the scheduler so the round needs no import of it).
    pub(crate) compile: Compile,
}

impl<E: Executor> Round<'_, E> {
    pub(crate) fn transition(
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
                attempt: st.attempts,
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

    /// Compiles a spec a node generated (a dynamic node's child) against
    /// the task types the executor serves.
    pub(crate) fn compile_child(&self, spec: &WorkflowSpec) -> Result<Compiled, Vec<Problem>> {
        let exec = &*self.exec;
        (self.compile)(spec, &|t| exec.serves(t))
    }

    pub(crate) fn fail(&mut self, id: &str, st: &mut NodeStatus, reason: &str, message: String) {
        st.reason = Some(reason.into());
        self.transition(id, st, NodePhase::Failed, Some(message.clone()));
        self.node_failed(id, &message);
    }

    pub(crate) fn node_failed(&mut self, id: &str, message: &str) {
        if self.spec.failure_policy == FailurePolicy::FailFast && self.failed_fast.is_none() {
            self.failed_fast = Some(format!("node {id} failed: {message}"));
        }
    }

    pub(crate) fn resolve_inputs(
        &self,
        spec: &NodeSpec,
        scope: &Scope,
    ) -> Result<Map<String, Value>, String> {
        match expr::resolve(&Value::Object(spec.inputs.clone()), scope)? {
            Value::Object(m) => Ok(m),
            _ => unreachable!("an object resolves to an object"),
        }
    }

    /// Counts a failure on its budget; the backoff before the next attempt
    /// when one is left.
    pub(crate) fn count_failure(
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

    /// A new attempt's bookkeeping (the node is Running from here).
    pub(crate) fn begin_attempt(&mut self, n: &CompiledNode, st: &mut NodeStatus) {
        st.attempts += 1;
        st.attempt_started_at = Some(timestamp_millis(self.input.now));
        st.retry_at = None;
        st.outputs = None;
        st.resource = None;
        if st.phase != NodePhase::Running {
            self.transition(&n.id, st, NodePhase::Running, None);
        }
    }

    /// A Retrying node (task, sub-workflow, dynamic): whether its next
    /// attempt starts now (its backoff is over and a parallelism slot is
    /// free; the slot is taken).
    pub(crate) fn retry_now(&mut self, st: &NodeStatus) -> bool {
        if let Some(at) = parse_timestamp(st.retry_at.as_deref())
            && at > self.input.now
        {
            self.out.wake(at);
            return false;
        }
        if self
            .spec
            .parallelism
            .is_some_and(|p| self.running >= p as usize)
        {
            return false;
        }
        self.running += 1;
        true
    }

    /// The attempt's timeout: the failure when it has passed (checked
    /// before observing, so an attempt past it is stopped even if its
    /// resource says it still runs); otherwise a wake-up for it.
    pub(crate) fn timed_out(
        &mut self,
        n: &CompiledNode,
        st: &NodeStatus,
    ) -> Option<TaskObservation> {
        let (t, started) = (
            n.timeout?,
            parse_timestamp(st.attempt_started_at.as_deref())?,
        );
        if self.input.now < started + t {
            self.out.wake(started + t);
            return None;
        }
        let d = humantime::format_duration(t);
        let msg = format!("attempt {} exceeded its timeout of {d}", st.attempts);
        Some(TaskObservation::failed(true, false, "TimedOut", &msg))
    }

    /// What the executor observed of an attempt, written into the node:
    /// still running, succeeded, or failed (then retried on its budget, or
    /// failed for good).
    pub(crate) fn apply(&mut self, n: &CompiledNode, st: &mut NodeStatus, obs: TaskObservation) {
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
                st.outputs_ref = obs.outputs_ref;
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
}
