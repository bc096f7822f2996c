//! The scheduler against a scripted executor: every behaviour of the
//! issue's list that does not need a cluster, round by round, with a clock
//! the test controls.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use weft_dag::schedule::{Executor, RoundInput, TaskObservation, TaskRequest, WorkflowRequest};
use weft_dag::{NodePhase, WorkflowPhase, WorkflowSpec, WorkflowStatus, compile, reconcile};

/// What an attempt does once started.
#[derive(Clone)]
enum Plan {
    /// Succeeds on its next observation with these outputs.
    Succeed(Value),
    /// Fails on its next observation.
    Fail { retryable: bool, system: bool },
    /// Runs until stopped.
    Hang,
    /// Succeeds with outputs kept in the store (see `Script::stored`).
    SucceedStored(Value),
}

#[derive(Default)]
struct Script {
    /// Plans per "node" or "node[item]", one per attempt; the last repeats.
    plans: HashMap<String, Vec<Plan>>,
    started: Vec<String>,
    aborted: Vec<String>,
    running: HashSet<String>,
    max_running: usize,
    inputs: HashMap<String, Map<String, Value>>,
    /// Rounds left during which `ready` says the plugin is loading.
    loading_rounds: usize,
    /// Child workflow specs, as requested.
    children: Vec<WorkflowSpec>,
    /// The task cache, by key.
    cache: HashMap<String, weft_dag::cache::CacheEntry>,
    /// Outputs in the artifact repository, by key; reads fail while
    /// `store_down`.
    stored: HashMap<String, Map<String, Value>>,
    store_down: bool,
    /// Locks (`mutex/db`) someone else holds: a node asking waits.
    taken: HashSet<String>,
    /// Every ask for locks: (node, locks).
    asks: Vec<(String, Vec<String>)>,
}

fn key(req: &TaskRequest<'_>) -> String {
    match req.item {
        Some(i) => format!("{}[{i}]", req.node_id),
        None => req.node_id.to_string(),
    }
}

impl Executor for Script {
    fn acquire(
        &mut self,
        node: &str,
        locks: &[weft_dag::spec::sync::LockRef],
    ) -> weft_dag::schedule::LockState {
        let names: Vec<String> = locks.iter().map(|l| l.display()).collect();
        self.asks.push((node.to_string(), names.clone()));
        match names.iter().find(|n| self.taken.contains(*n)) {
            Some(n) => weft_dag::schedule::LockState::Waiting {
                kind: "semaphore",
                message: format!("waiting for {n}"),
            },
            None => weft_dag::schedule::LockState::Held,
        }
    }

    fn ready(&mut self, task: &weft_dag::TaskSpec) -> weft_dag::schedule::Readiness {
        if self.loading_rounds == 0 {
            return weft_dag::schedule::Readiness::Ready;
        }
        self.loading_rounds -= 1;
        weft_dag::schedule::Readiness::Wait {
            reason: "WaitingForPlugin".into(),
            message: format!("plugin for task type {} is loading", task.task_type),
            timeout: Duration::from_secs(5),
        }
    }

    fn task(&mut self, req: &TaskRequest<'_>) -> TaskObservation {
        let k = key(req);
        let attempt_key = format!("{k}#{}", req.attempt);
        if self.running.insert(attempt_key.clone()) {
            self.started.push(attempt_key);
            self.inputs.insert(k, req.inputs.clone());
            self.max_running = self.max_running.max(self.running.len());
            return TaskObservation::in_progress("queued");
        }
        let plans = self.plans.get(&k).cloned().unwrap_or_default();
        let plan = plans
            .get(req.attempt as usize)
            .or(plans.last())
            .cloned()
            .unwrap_or(Plan::Succeed(json!({})));
        match plan {
            Plan::Hang => TaskObservation::in_progress("running"),
            Plan::Succeed(out) => {
                self.running.remove(&attempt_key);
                TaskObservation::succeeded(out.as_object().cloned())
            }
            Plan::SucceedStored(out) => {
                self.running.remove(&attempt_key);
                let key = format!("ns/wf/uid/{k}/{}/outputs.json", req.attempt);
                self.stored
                    .insert(key.clone(), out.as_object().cloned().unwrap());
                let mut obs = TaskObservation::succeeded(None);
                obs.outputs_ref = Some(weft_dag::artifacts::ArtifactRef {
                    key,
                    digest: "sha256:00".into(),
                    size: 1 << 17,
                    kind: "file".into(),
                });
                obs
            }
            Plan::Fail { retryable, system } => {
                self.running.remove(&attempt_key);
                TaskObservation::failed(
                    retryable,
                    system,
                    "Error",
                    &format!("{k} attempt {} failed", req.attempt),
                )
            }
        }
    }

    fn offloaded(
        &self,
        r: &weft_dag::artifacts::ArtifactRef,
    ) -> Result<Map<String, Value>, String> {
        match self.store_down {
            true => Err("connection refused".into()),
            false => self
                .stored
                .get(&r.key)
                .cloned()
                .ok_or_else(|| "no such key".into()),
        }
    }

    fn abort(&mut self, req: &TaskRequest<'_>) {
        let attempt_key = format!("{}#{}", key(req), req.attempt);
        self.running.remove(&attempt_key);
        self.aborted.push(attempt_key);
    }

    /// A child workflow as a script step keyed "NODE/workflow": started on
    /// its first observation, then as planned.
    fn workflow(&mut self, req: &WorkflowRequest<'_>) -> TaskObservation {
        let k = format!("{}/workflow", req.node_id);
        let attempt_key = format!("{k}#{}", req.attempt);
        let mut obs = if self.running.insert(attempt_key.clone()) {
            self.started.push(attempt_key.clone());
            self.children.push(req.spec.clone());
            TaskObservation::in_progress("Running")
        } else {
            let plans = self.plans.get(&k).cloned().unwrap_or_default();
            let plan = plans.get(req.attempt as usize).or(plans.last()).cloned();
            match plan.unwrap_or(Plan::Succeed(json!({}))) {
                Plan::Hang => TaskObservation::in_progress("Running"),
                Plan::Succeed(out) | Plan::SucceedStored(out) => {
                    self.running.remove(&attempt_key);
                    TaskObservation::succeeded(out.as_object().cloned())
                }
                Plan::Fail { retryable, system } => {
                    self.running.remove(&attempt_key);
                    let msg = format!("workflow {k} failed: node x failed: boom");
                    TaskObservation::failed(retryable, system, "WorkflowFailed", &msg)
                }
            }
        };
        obs.resource = Some(weft_dag::status::ResourceRef {
            api_version: "weft.dev/v1alpha1".into(),
            kind: "Workflow".into(),
            name: attempt_key,
            meta: None,
        });
        obs
    }

    fn abort_workflow(&mut self, req: &WorkflowRequest<'_>) {
        let attempt_key = format!("{}/workflow#{}", req.node_id, req.attempt);
        self.running.remove(&attempt_key);
        self.aborted.push(attempt_key);
    }

    fn cache_lookup(
        &mut self,
        req: &weft_dag::schedule::CacheRequest<'_>,
    ) -> Option<weft_dag::cache::CacheEntry> {
        let k = weft_dag::cache::key(req.task, req.inputs, req.artifacts, req.cache, None);
        let e = self.cache.get(&k)?;
        e.fresh(req.cache.max_age(), req.now).then(|| e.clone())
    }

    fn cache_store(
        &mut self,
        req: &weft_dag::schedule::CacheRequest<'_>,
        outputs: &Map<String, Value>,
        _outputs_ref: Option<&weft_dag::artifacts::ArtifactRef>,
    ) {
        let k = weft_dag::cache::key(req.task, req.inputs, req.artifacts, req.cache, None);
        let entry = weft_dag::cache::CacheEntry {
            task_type: req.task.task_type.clone(),
            version: req.cache.version.clone(),
            workflow: "first".into(),
            node: req.node_id.into(),
            created_at: weft_dag::status::timestamp(req.now),
            max_age: req.cache.max_age.clone(),
            outputs: outputs.clone(),
            outputs_ref: None,
        };
        self.cache.insert(k, entry);
    }
}

struct Run {
    spec: WorkflowSpec,
    status: WorkflowStatus,
    script: Script,
    now: SystemTime,
    approvals: HashSet<String>,
    rejections: HashMap<String, String>,
    rounds: usize,
}

impl Run {
    fn new(yaml: &str) -> Self {
        Run {
            spec: serde_yaml::from_str(yaml).expect("spec"),
            status: WorkflowStatus::default(),
            script: Script::default(),
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            approvals: HashSet::new(),
            rejections: HashMap::new(),
            rounds: 0,
        }
    }

    fn plan(mut self, node: &str, plans: Vec<Plan>) -> Self {
        self.script.plans.insert(node.into(), plans);
        self
    }

    /// One round; the clock moves by `step` first.
    fn round(&mut self, step: Duration) -> weft_dag::RoundOutcome {
        self.now += step;
        self.rounds += 1;
        let compiled = compile(&self.spec, &|t| t == "pod").expect("valid");
        let input = RoundInput {
            now: self.now,
            generation: Some(1),
            approvals: &self.approvals,
            rejections: &self.rejections,
            deleting: false,
        };
        reconcile(
            &self.spec,
            &compiled,
            &mut self.status,
            &input,
            &mut self.script,
        )
    }

    /// Rounds of one second until the workflow ends (or 500 rounds).
    fn finish(&mut self) -> WorkflowPhase {
        for _ in 0..500 {
            self.round(Duration::from_secs(1));
            if self.status.phase.is_terminal() {
                break;
            }
        }
        self.status.phase
    }

    fn node(&self, id: &str) -> &weft_dag::NodeStatus {
        &self.status.nodes[id]
    }

    fn start_index(&self, k: &str) -> usize {
        self.script
            .started
            .iter()
            .position(|s| s.split('#').next() == Some(k))
            .unwrap_or_else(|| panic!("{k} never started: {:?}", self.script.started))
    }
}

#[test]
fn a_diamond_runs_in_dependency_order() {
    let mut run = Run::new(
        "nodes:
  - {id: a, task: {type: pod}}
  - {id: b, dependsOn: [a], task: {type: pod}}
  - {id: c, dependsOn: [a], task: {type: pod}}
  - {id: d, dependsOn: [b, c], task: {type: pod}}",
    );
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let (a, b, c, d) = (
        run.start_index("a"),
        run.start_index("b"),
        run.start_index("c"),
        run.start_index("d"),
    );
    assert!(a < b && a < c && b < d && c < d, "{:?}", run.script.started);
    assert_eq!(run.status.progress.as_deref(), Some("4/4"));
    assert!(run.status.finished_at.is_some());
}

#[test]
fn parallelism_is_never_exceeded() {
    let nodes: Vec<String> = (0..12)
        .map(|i| format!("  - {{id: n{i}, task: {{type: pod}}}}"))
        .collect();
    let mut run = Run::new(&format!("parallelism: 3\nnodes:\n{}", nodes.join("\n")));
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(run.script.max_running, 3);
    assert_eq!(run.script.started.len(), 12);
}

#[test]
fn fail_fast_aborts_running_nodes_and_starts_nothing_more() {
    let mut run = Run::new(
        "nodes:
  - {id: bad, task: {type: pod}}
  - {id: slow, task: {type: pod}}
  - {id: after, dependsOn: [slow], task: {type: pod}}",
    )
    .plan(
        "bad",
        vec![Plan::Fail {
            retryable: false,
            system: false,
        }],
    )
    .plan("slow", vec![Plan::Hang]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.node("bad").phase, NodePhase::Failed);
    assert_eq!(run.node("slow").phase, NodePhase::Aborted);
    assert_eq!(run.node("after").phase, NodePhase::Skipped);
    assert_eq!(run.script.aborted, vec!["slow#0".to_string()]);
    assert!(
        run.status
            .message
            .as_deref()
            .unwrap()
            .contains("node bad failed"),
        "{:?}",
        run.status.message
    );
}

#[test]
fn fail_after_executable_nodes_complete_lets_independent_nodes_finish() {
    let mut run = Run::new(
        "failurePolicy: FailAfterExecutableNodesComplete
nodes:
  - {id: bad, task: {type: pod}}
  - {id: downstream, dependsOn: [bad], task: {type: pod}}
  - {id: other, task: {type: pod}}
  - {id: other2, dependsOn: [other], task: {type: pod}}",
    )
    .plan(
        "bad",
        vec![Plan::Fail {
            retryable: false,
            system: false,
        }],
    );
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.node("other2").phase, NodePhase::Succeeded);
    assert_eq!(run.node("downstream").phase, NodePhase::Skipped);
    assert!(
        run.node("downstream")
            .message
            .as_deref()
            .unwrap()
            .contains("upstream node bad")
    );
    assert!(run.script.aborted.is_empty());
}

#[test]
fn retries_use_two_budgets_and_back_off() {
    // Two system failures and two user failures: within both budgets.
    let mut run = Run::new(
        "nodes:
  - {id: flaky, task: {type: pod}, retries: {limit: 2, systemLimit: 2, backoff: 10s}}",
    )
    .plan(
        "flaky",
        vec![
            Plan::Fail {
                retryable: true,
                system: true,
            },
            Plan::Fail {
                retryable: true,
                system: false,
            },
            Plan::Fail {
                retryable: true,
                system: true,
            },
            Plan::Fail {
                retryable: true,
                system: false,
            },
            Plan::Succeed(json!({"ok": true})),
        ],
    );
    // Start, fail: the first retry waits 10s, so rounds of one second pass in Retrying.
    run.round(Duration::ZERO);
    let out = run.round(Duration::from_secs(1));
    assert_eq!(run.node("flaky").phase, NodePhase::Retrying);
    let wake = out.wake_at.expect("a backoff wakes the workflow");
    assert_eq!(
        wake.duration_since(run.now).unwrap(),
        Duration::from_secs(10)
    );
    run.round(Duration::from_secs(5));
    assert_eq!(
        run.node("flaky").phase,
        NodePhase::Retrying,
        "still backing off"
    );
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let st = run.node("flaky");
    assert_eq!(
        (st.attempts, st.user_failures, st.system_failures),
        (5, 2, 2)
    );
    assert_eq!(st.outputs.as_ref().unwrap()["ok"], true);
}

#[test]
fn a_budget_used_up_fails_the_node() {
    let mut run =
        Run::new("nodes:\n  - {id: f, task: {type: pod}, retries: {limit: 1, backoff: 1s}}").plan(
            "f",
            vec![Plan::Fail {
                retryable: true,
                system: false,
            }],
        );
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.node("f").attempts, 2);
    // A permanent failure is not retried at all.
    let mut run = Run::new("nodes:\n  - {id: f, task: {type: pod}, retries: {limit: 5}}").plan(
        "f",
        vec![Plan::Fail {
            retryable: false,
            system: false,
        }],
    );
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.node("f").attempts, 1);
}

#[test]
fn a_node_timeout_stops_the_attempt_and_retries() {
    let mut run = Run::new(
        "nodes:\n  - {id: t, task: {type: pod}, timeout: 5s, retries: {limit: 1, backoff: 1s}}",
    )
    .plan("t", vec![Plan::Hang, Plan::Succeed(json!({}))]);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(run.script.aborted, vec!["t#0".to_string()]);
    assert_eq!(run.node("t").attempts, 2);
    assert_eq!(run.node("t").user_failures, 1);
}

#[test]
fn the_active_deadline_fails_the_workflow() {
    let mut run = Run::new("activeDeadline: 30s\nnodes:\n  - {id: t, task: {type: pod}}")
        .plan("t", vec![Plan::Hang]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert!(
        run.status
            .message
            .as_deref()
            .unwrap()
            .contains("active deadline of 30s")
    );
    assert_eq!(run.node("t").phase, NodePhase::Aborted);
    assert!(run.rounds <= 32, "{}", run.rounds);
}

#[test]
fn a_false_condition_skips_the_node_and_what_only_depends_on_it() {
    let mut run = Run::new(
        "inputs: {threshold: 10}
nodes:
  - {id: fetch, task: {type: pod}}
  - {id: train, dependsOn: [fetch], when: 'nodes.fetch.outputs.rows > inputs.threshold', task: {type: pod}}
  - {id: report, dependsOn: [train], task: {type: pod}}
  - {id: notify, dependsOn: [train, fetch], task: {type: pod}}
  - {id: small, dependsOn: [fetch], when: 'nodes.fetch.outputs.rows <= inputs.threshold', task: {type: pod}}",
    )
    .plan("fetch", vec![Plan::Succeed(json!({"rows": 3}))]);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(run.node("train").phase, NodePhase::Skipped);
    assert_eq!(run.node("report").phase, NodePhase::Skipped);
    assert_eq!(
        run.node("notify").phase,
        NodePhase::Succeeded,
        "it also depends on a node that ran"
    );
    assert_eq!(run.node("small").phase, NodePhase::Succeeded);
}

#[test]
fn outputs_flow_into_downstream_inputs() {
    let mut run = Run::new(
        "inputs: {name: weft}
nodes:
  - {id: a, task: {type: pod}}
  - id: b
    dependsOn: [a]
    task: {type: pod}
    inputs: {rows: '${nodes.a.outputs.rows}', greeting: 'hello ${inputs.name}, ${nodes.a.outputs.rows} rows'}",
    )
    .plan("a", vec![Plan::Succeed(json!({"rows": 42}))]);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(
        Value::Object(run.script.inputs["b"].clone()),
        json!({"rows": 42, "greeting": "hello weft, 42 rows"})
    );
}

/// Outputs kept in the artifact repository (too large for the status)
/// are read back for downstream expressions and the workflow's outputs;
/// while the store cannot give them, the node waits and says why.
#[test]
fn stored_outputs_are_read_back_and_a_store_outage_waits() {
    let mut run = Run::new(
        "outputs: {rows: '${nodes.a.outputs.rows}'}
nodes:
  - {id: a, task: {type: pod}}
  - {id: b, dependsOn: [a], task: {type: pod}, inputs: {rows: '${nodes.a.outputs.rows}'}}",
    )
    .plan("a", vec![Plan::SucceedStored(json!({"rows": 42}))]);
    run.script.store_down = true;
    for _ in 0..4 {
        run.round(Duration::from_secs(1));
    }
    assert_eq!(run.node("a").phase, NodePhase::Succeeded);
    assert!(run.node("a").outputs.is_none());
    assert_eq!(run.node("b").phase, NodePhase::Pending);
    assert_eq!(run.node("b").reason.as_deref(), Some("WaitingForOutputs"));
    let why = run.node("b").message.clone().unwrap();
    assert!(
        why.starts_with("the outputs of node a (ns/wf/uid/a/0/outputs.json): connection refused"),
        "{why}"
    );
    let woke = run.round(Duration::from_secs(1)).wake_at.unwrap();
    assert!(woke <= run.now + Duration::from_secs(5));
    run.script.store_down = false;
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(
        Value::Object(run.script.inputs["b"].clone()),
        json!({"rows": 42})
    );
    assert_eq!(run.status.outputs.clone().unwrap()["rows"], 42);
}

/// Declared inputs with defaults reach expressions; `spec.outputs`
/// lands in the status with the values' types.
#[test]
fn declared_inputs_and_workflow_outputs() {
    let mut run = Run::new(
        "inputs:
  name: {type: string, default: weft, description: who}
  times: {type: integer, default: 3}
  tags: {type: list, required: false}
outputs:
  total: '${nodes.b.outputs.rows * inputs.times}'
  label: 'rows of ${inputs.name}'
  fixed: 7
nodes:
  - {id: a, task: {type: pod}}
  - id: b
    dependsOn: [a]
    task: {type: pod}
    inputs: {rows: '${nodes.a.outputs.rows}'}",
    )
    .plan("a", vec![Plan::Succeed(json!({"rows": 14}))])
    .plan("b", vec![Plan::Succeed(json!({"rows": 14}))]);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(
        Value::Object(run.status.inputs.clone().unwrap()),
        json!({"name": "weft", "times": 3})
    );
    assert_eq!(
        Value::Object(run.status.outputs.clone().unwrap()),
        json!({"total": 42, "label": "rows of weft", "fixed": 7})
    );
}

/// An output that cannot be evaluated fails the workflow, naming it.
#[test]
fn an_output_that_cannot_be_evaluated_fails_the_workflow() {
    let mut run = Run::new(
        "outputs: {model: '${nodes.a.outputs.model}'}
nodes:
  - {id: a, task: {type: pod}}",
    );
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let msg = run.status.message.clone().unwrap();
    assert!(msg.starts_with("outputs.model: "), "{msg}");
    assert!(run.status.outputs.is_none());
}

#[test]
fn an_array_maps_over_a_list_with_its_own_parallelism_and_minimum() {
    let mut run = Run::new(
        "inputs: {items: [a, b, c, d, e]}
nodes:
  - id: fan
    array: {over: '${inputs.items}', parallelism: 2, minSuccesses: 4, task: {type: pod}}
    inputs: {letter: '${item}'}",
    )
    .plan(
        "fan[3]",
        vec![Plan::Fail {
            retryable: false,
            system: false,
        }],
    )
    .plan("fan[0]", vec![Plan::Succeed(json!({"n": 0}))]);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(run.script.max_running, 2);
    let st = run.node("fan");
    assert_eq!(
        st.items
            .iter()
            .filter(|i| i.phase == NodePhase::Succeeded)
            .count(),
        4
    );
    assert_eq!(st.outputs.as_ref().unwrap()["results"][0], json!({"n": 0}));
    assert_eq!(run.script.inputs["fan[2]"]["letter"], "c");
    assert_eq!(run.script.inputs["fan[2]"]["index"], 2);

    // Two failures out of five can never reach four successes: fail early.
    let mut run = Run::new(
        "nodes:\n  - id: fan\n    array: {over: [1, 2, 3, 4, 5], minSuccesses: 4, task: {type: pod}}",
    )
    .plan("fan[0]", vec![Plan::Fail { retryable: false, system: false }])
    .plan("fan[1]", vec![Plan::Fail { retryable: false, system: false }])
    .plan("fan[4]", vec![Plan::Hang]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert!(
        run.node("fan")
            .message
            .as_deref()
            .unwrap()
            .contains("4 needed")
    );
}

#[test]
fn gates_sleep_and_wait_for_approval() {
    let mut run = Run::new(
        "nodes:
  - {id: nap, gate: {sleep: 20s}}
  - {id: ok, dependsOn: [nap], gate: {approval: {message: 'ship it?'}}}
  - {id: ship, dependsOn: [ok], task: {type: pod}}",
    );
    for _ in 0..10 {
        run.round(Duration::from_secs(1));
    }
    assert_eq!(run.node("nap").phase, NodePhase::Running);
    for _ in 0..15 {
        run.round(Duration::from_secs(1));
    }
    assert_eq!(run.node("nap").phase, NodePhase::Succeeded);
    assert_eq!(run.node("ok").phase, NodePhase::Running);
    assert_eq!(run.node("ok").message.as_deref(), Some("ship it?"));
    for _ in 0..50 {
        run.round(Duration::from_secs(60));
    }
    assert_eq!(
        run.node("ok").phase,
        NodePhase::Running,
        "waits for as long as it takes"
    );
    run.approvals.insert("ok".into());
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
}

#[test]
fn a_rejected_gate_fails_with_the_reason_and_nothing_after_it_runs() {
    let mut run = Run::new(
        "nodes:
  - {id: ok, gate: {approval: {}}}
  - {id: ship, dependsOn: [ok], task: {type: pod}}",
    );
    run.round(Duration::from_secs(1));
    assert_eq!(run.node("ok").phase, NodePhase::Running);
    run.rejections.insert("ok".into(), "not on a Friday".into());
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let ok = run.node("ok");
    assert_eq!(ok.phase, NodePhase::Failed);
    assert_eq!(ok.message.as_deref(), Some("rejected: not on a Friday"));
    assert_eq!(ok.reason.as_deref(), Some("Rejected"));
    assert_ne!(run.node("ship").phase, NodePhase::Succeeded);
    assert!(run.script.started.is_empty(), "{:?}", run.script.started);
}

#[test]
fn abort_stops_running_nodes() {
    let mut run = Run::new(
        "nodes:\n  - {id: a, task: {type: pod}}\n  - {id: b, dependsOn: [a], task: {type: pod}}",
    )
    .plan("a", vec![Plan::Hang]);
    run.round(Duration::ZERO);
    run.round(Duration::from_secs(1));
    run.spec.abort = true;
    assert_eq!(run.finish(), WorkflowPhase::Aborted);
    assert_eq!(run.node("a").phase, NodePhase::Aborted);
    assert_eq!(run.node("b").phase, NodePhase::Skipped);
    assert_eq!(run.script.aborted, vec!["a#0".to_string()]);
}

#[test]
fn rounds_after_the_end_change_nothing() {
    let mut run = Run::new("nodes:\n  - {id: a, task: {type: pod}}");
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let before = run.status.clone();
    let out = run.round(Duration::from_secs(100));
    assert_eq!(run.status, before);
    assert!(out.transitions.is_empty() && out.wake_at.is_none());
}

#[test]
fn a_node_waits_pending_while_its_plugin_loads_then_starts() {
    let mut run = Run::new("nodes:\n  - {id: a, task: {type: pod}}\n");
    run.script.loading_rounds = 3;
    for _ in 0..3 {
        run.round(Duration::from_secs(1));
        let a = run.node("a");
        assert_eq!(a.phase, NodePhase::Pending);
        assert_eq!(a.reason.as_deref(), Some("WaitingForPlugin"));
        assert_eq!(
            a.message.as_deref(),
            Some("plugin for task type pod is loading")
        );
        assert!(a.waiting_since.is_some());
        assert!(
            run.script.started.is_empty(),
            "nothing starts while loading"
        );
    }
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let a = run.node("a");
    assert_eq!(
        (a.waiting_since.as_deref(), a.reason.as_deref()),
        (None, None)
    );
    assert_eq!(run.script.started, ["a#0"]);
}

#[test]
fn a_node_that_waits_past_the_timeout_fails_as_a_system_failure() {
    let mut run = Run::new("nodes:\n  - {id: a, task: {type: pod}}\n");
    run.script.loading_rounds = 100;
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let a = run.node("a");
    assert_eq!(a.reason.as_deref(), Some("PluginNotReady"));
    assert_eq!(a.system_failures, 1);
    assert_eq!(
        a.message.as_deref(),
        Some("plugin for task type pod is loading, and it was still not ready after 5s")
    );
    assert!(run.script.started.is_empty());
}

/// A sub-workflow gets its inputs resolved and the parent's parallelism;
/// its outputs flow on; a failed child is retried as a new attempt.
#[test]
fn a_sub_workflow_passes_inputs_and_outputs_and_is_retried() {
    let mut run = Run::new(
        "parallelism: 2
nodes:
  - {id: a, task: {type: pod}}
  - id: sub
    dependsOn: [a]
    retries: {limit: 1}
    workflow:
      inputs: {x: '${nodes.a.outputs.x}'}
      nodes:
        - {id: inner, inputs: {v: '${inputs.x}'}, task: {type: pod}}
      outputs: {y: '${nodes.inner.outputs.y}'}
  - {id: b, dependsOn: [sub], inputs: {y: '${nodes.sub.outputs.y}'}, task: {type: pod}}",
    )
    .plan("a", vec![Plan::Succeed(json!({"x": 5}))])
    .plan(
        "sub/workflow",
        vec![
            Plan::Fail {
                retryable: true,
                system: false,
            },
            Plan::Succeed(json!({"y": 7})),
        ],
    );
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert_eq!(run.script.children.len(), 2, "one child per attempt");
    let child = &run.script.children[1];
    assert_eq!(child.parallelism, Some(2));
    assert_eq!(child.nodes[0].id, "inner");
    assert_eq!(
        serde_json::to_value(&child.inputs).unwrap(),
        json!({"x": 5})
    );
    assert_eq!(run.node("sub").attempts, 2);
    assert_eq!(
        Value::Object(run.script.inputs["b"].clone()),
        json!({"y": 7})
    );
}

/// A child that fails for good fails the node and the workflow with the
/// child's message; aborting the parent aborts a running child.
#[test]
fn a_failed_child_fails_its_parent_and_an_abort_reaches_the_child() {
    let mut run = Run::new("nodes:\n  - {id: s, workflow: {templateRef: leaf}}").plan(
        "s/workflow",
        vec![Plan::Fail {
            retryable: false,
            system: false,
        }],
    );
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let msg = run.status.message.clone().unwrap();
    assert_eq!(
        msg,
        "node s failed: workflow s/workflow failed: node x failed: boom"
    );
    let child = &run.script.children[0];
    assert_eq!(child.workflow_template_ref.as_ref().unwrap().name, "leaf");

    let mut run = Run::new("nodes:\n  - {id: s, workflow: {templateRef: leaf}}")
        .plan("s/workflow", vec![Plan::Hang]);
    run.round(Duration::from_secs(1));
    run.round(Duration::from_secs(1));
    run.spec.abort = true;
    run.round(Duration::from_secs(1));
    assert_eq!(run.status.phase, WorkflowPhase::Aborted);
    assert_eq!(run.script.aborted, ["s/workflow#0"]);
}

/// A dynamic node's task emits a 50-node fan-out: it runs as a child whose
/// outputs are every node's, by id.
#[test]
fn a_dynamic_node_runs_what_its_task_generated() {
    let nodes: Vec<Value> = (0..50)
        .map(|i| json!({"id": format!("n{i}"), "task": {"type": "pod"}}))
        .collect();
    let mut run = Run::new(
        "nodes:
  - {id: fan, dynamic: {task: {type: pod}}}
  - {id: after, dependsOn: [fan], inputs: {all: '${nodes.fan.outputs}'}, task: {type: pod}}",
    )
    .plan("fan", vec![Plan::Succeed(json!({"nodes": nodes}))])
    .plan(
        "fan/workflow",
        vec![Plan::Succeed(json!({"n0": {"v": 0}, "n49": {"v": 49}}))],
    );
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let child = &run.script.children[0];
    assert_eq!(child.nodes.len(), 50);
    assert_eq!(child.outputs.len(), 50);
    assert_eq!(child.outputs["n7"], json!("${nodes[\"n7\"].outputs}"));
    assert_eq!(
        Value::Object(run.script.inputs["after"].clone()),
        json!({"all": {"n0": {"v": 0}, "n49": {"v": 49}}})
    );
}

/// What a dynamic task generates is validated as a workflow is: a cycle
/// fails the node with the validator's message, and nothing runs.
#[test]
fn a_generated_cycle_or_too_many_nodes_fail_the_dynamic_node() {
    let cycle = json!({"nodes": [
        {"id": "a", "dependsOn": ["b"], "task": {"type": "pod"}},
        {"id": "b", "dependsOn": ["a"], "task": {"type": "pod"}},
        {"id": "c", "task": {"type": "spark"}}
    ]});
    let mut run = Run::new("nodes:\n  - {id: gen, dynamic: {task: {type: pod}}}")
        .plan("gen", vec![Plan::Succeed(cycle)]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let node = run.node("gen");
    let msg = node.message.clone().unwrap();
    assert!(
        msg.starts_with("the generated workflow is invalid:\n"),
        "{msg}"
    );
    assert!(msg.contains("dependsOn: cycle: "), "{msg}");
    assert_eq!(node.reason.as_deref(), Some("InvalidDynamicWorkflow"));
    assert!(run.script.children.is_empty());

    let three = json!({"nodes": [
        {"id": "a", "task": {"type": "pod"}}, {"id": "b", "task": {"type": "pod"}},
        {"id": "c", "task": {"type": "pod"}}
    ]});
    let mut run = Run::new("nodes:\n  - {id: gen, dynamic: {task: {type: pod}, maxNodes: 2}}")
        .plan("gen", vec![Plan::Succeed(three)]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let msg = run.node("gen").message.clone().unwrap();
    assert!(
        msg.contains("generated 3 nodes, more than the limit of 2"),
        "{msg}"
    );
}

/// A chain of `n` pod nodes n1 -> n2 -> ...
fn chain(n: usize) -> String {
    let mut s = String::from("nodes:\n  - {id: n1, task: {type: pod}}\n");
    for i in 2..=n {
        s += &format!(
            "  - {{id: n{i}, dependsOn: [n{}], task: {{type: pod}}}}\n",
            i - 1
        );
    }
    s
}

#[test]
fn a_suspended_workflow_starts_nothing_until_resumed() {
    let mut run = Run::new(&chain(4)).plan("n2", vec![Plan::Hang]);
    for _ in 0..4 {
        run.round(Duration::from_secs(1));
    }
    assert_eq!(run.node("n2").phase, NodePhase::Running);
    run.spec.suspend = true;
    run.round(Duration::from_secs(1));
    assert!(run.status.suspended);
    // The running node finishes; the next one waits.
    run.script.plans.remove("n2");
    for _ in 0..10 {
        run.round(Duration::from_secs(1));
    }
    assert_eq!(run.node("n2").phase, NodePhase::Succeeded);
    assert_eq!(run.node("n3").phase, NodePhase::Pending);
    assert_eq!(run.status.phase, WorkflowPhase::Running);
    run.spec.suspend = false;
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    assert!(!run.status.suspended);
    assert_eq!(run.script.started.len(), 4);
}

const WITH_EXIT: &str = "nodes:
  - {id: main, task: {type: pod}}
onExit:
  - id: notify
    task: {type: pod}
    inputs:
      phase: ${workflow.phase}
      failures: ${workflow.failures}
  - id: cleanup
    dependsOn: [notify]
    when: workflow.phase != 'Succeeded'
    task: {type: pod}";

#[test]
fn the_exit_handler_runs_after_success_and_sees_the_phase() {
    let mut run = Run::new(WITH_EXIT);
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let exit = run.status.on_exit.as_ref().expect("exit handler ran");
    assert_eq!(exit.phase, WorkflowPhase::Succeeded);
    assert_eq!(exit.nodes["notify"].phase, NodePhase::Succeeded);
    assert_eq!(exit.nodes["cleanup"].phase, NodePhase::Skipped);
    assert_eq!(run.script.inputs["notify"]["phase"], json!("Succeeded"));
    assert!(run.start_index("main") < run.start_index("notify"));
}

#[test]
fn the_exit_handler_runs_after_a_failure_and_sees_its_message() {
    let fail = Plan::Fail {
        retryable: false,
        system: false,
    };
    let mut run = Run::new(WITH_EXIT).plan("main", vec![fail]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.script.inputs["notify"]["phase"], json!("Failed"));
    assert_eq!(
        run.script.inputs["notify"]["failures"],
        json!([{"node": "main", "message": "main attempt 0 failed"}])
    );
    let exit = run.status.on_exit.as_ref().unwrap();
    assert_eq!(exit.nodes["cleanup"].phase, NodePhase::Succeeded);
    assert_eq!(
        run.status.message.as_deref(),
        Some("node main failed: main attempt 0 failed")
    );
}

#[test]
fn a_failing_exit_node_fails_the_workflow_with_both_reasons() {
    let fail = Plan::Fail {
        retryable: false,
        system: false,
    };
    let mut run = Run::new(WITH_EXIT).plan("notify", vec![fail]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    let msg = run.status.message.clone().unwrap();
    assert!(msg.contains("exit handler: node notify failed"), "{msg}");
}

#[test]
fn stop_runs_the_exit_handler_and_terminate_does_not() {
    for (shutdown, runs_exit) in [
        (weft_dag::actions::Shutdown::Stop, true),
        (weft_dag::actions::Shutdown::Terminate, false),
    ] {
        let mut run = Run::new(WITH_EXIT).plan("main", vec![Plan::Hang]);
        run.round(Duration::from_secs(1));
        run.round(Duration::from_secs(1));
        run.spec.shutdown = Some(shutdown);
        assert_eq!(run.finish(), WorkflowPhase::Aborted, "{shutdown:?}");
        assert_eq!(run.script.aborted, vec!["main#0".to_string()]);
        assert_eq!(run.node("main").phase, NodePhase::Aborted);
        assert_eq!(run.status.on_exit.is_some(), runs_exit, "{shutdown:?}");
        assert_eq!(run.script.inputs.contains_key("notify"), runs_exit);
        if runs_exit {
            assert_eq!(run.script.inputs["notify"]["phase"], json!("Aborted"));
        }
    }
}

#[test]
fn retry_reruns_the_failed_node_and_those_after_it_only() {
    let fail = Plan::Fail {
        retryable: false,
        system: false,
    };
    let mut run = Run::new(&chain(5)).plan("n3", vec![fail, Plan::Succeed(json!({}))]);
    assert_eq!(run.finish(), WorkflowPhase::Failed);
    assert_eq!(run.script.started, ["n1#0", "n2#0", "n3#0"]);
    let compiled = compile(&run.spec, &|t| t == "pod").unwrap();
    let req = weft_dag::actions::RetryRequest::parse("r1");
    let reset = weft_dag::actions::retry(&compiled, &mut run.status, &req, run.now).unwrap();
    assert_eq!(reset, ["n3", "n4", "n5"]);
    assert!(req.done(&run.status));
    // What is stored is what the next round reads.
    run.status = serde_json::from_value(serde_json::to_value(&run.status).unwrap()).unwrap();
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    // n3's new attempt is a new child (#1), not the failed one (#0).
    assert_eq!(
        run.script.started,
        ["n1#0", "n2#0", "n3#0", "n3#1", "n4#0", "n5#0"]
    );
    assert_eq!(run.status.retries.len(), 1);
    // A Succeeded workflow is not retried; --node restarts a node and what follows.
    let again = weft_dag::actions::RetryRequest::parse("r2:n4");
    let err = weft_dag::actions::retry(&compiled, &mut run.status, &again, run.now).unwrap_err();
    assert!(err.contains("Succeeded"), "{err}");
    run.status.phase = WorkflowPhase::Failed;
    let reset = weft_dag::actions::retry(&compiled, &mut run.status, &again, run.now).unwrap();
    assert_eq!(reset, ["n4", "n5"]);
    let bad = weft_dag::actions::RetryRequest::parse("r3:nope");
    run.status.phase = WorkflowPhase::Failed;
    let err = weft_dag::actions::retry(&compiled, &mut run.status, &bad, run.now).unwrap_err();
    assert!(err.contains("\"nope\""), "{err}");
}

#[test]
fn a_cached_node_reuses_outputs_and_starts_nothing() {
    let yaml = "inputs: {n: 1}
nodes:
  - id: a
    task: {type: pod, config: {image: x}}
    inputs: {n: '${inputs.n}'}
    cache: {version: '1', maxAge: 1h}
  - {id: b, dependsOn: [a], task: {type: pod}, inputs: {v: '${nodes.a.outputs.v}'}}";
    let mut first = Run::new(yaml).plan("a", vec![Plan::Succeed(json!({"v": 7}))]);
    assert_eq!(first.finish(), WorkflowPhase::Succeeded);
    assert_eq!(first.script.cache.len(), 1);
    let mut second = Run::new(yaml);
    second.script.cache = first.script.cache.clone();
    assert_eq!(second.finish(), WorkflowPhase::Succeeded);
    assert_eq!(second.script.started, ["b#0"]);
    let a = second.node("a");
    assert!(a.cached);
    assert_eq!(a.cached_from.as_deref(), Some("first"));
    assert_eq!(second.script.inputs["b"]["v"], json!(7));
    // A changed input misses; so does an entry past maxAge.
    let v7 = || vec![Plan::Succeed(json!({"v": 7}))];
    let mut changed = Run::new(&yaml.replace("{n: 1}", "{n: 2}")).plan("a", v7());
    changed.script.cache = first.script.cache.clone();
    changed.finish();
    assert_eq!(changed.script.started, ["a#0", "b#0"]);
    let mut late = Run::new(yaml).plan("a", v7());
    late.now += Duration::from_secs(7200);
    late.script.cache = first.script.cache.clone();
    late.finish();
    assert_eq!(late.script.started, ["a#0", "b#0"]);
    // A failure is never cached.
    let fail = Plan::Fail {
        retryable: false,
        system: false,
    };
    let mut failed = Run::new(yaml).plan("a", vec![fail]);
    assert_eq!(failed.finish(), WorkflowPhase::Failed);
    assert!(failed.script.cache.is_empty());
}

#[test]
fn lifecycle_fields_are_checked() {
    let spec: WorkflowSpec = serde_yaml::from_str(
        "nodes:
  - {id: a, task: {type: pod}, inputs: {p: '${workflow.phase}'}}
  - {id: g, gate: {sleep: 1s}, cache: {version: ''}}
  - {id: t, task: {type: pod}, cache: {version: '1', maxAge: soon}}
onExit:
  - {id: a, task: {type: pod}}
  - {id: x, task: {type: pod}, inputs: {p: '${workflow.nope}'}}",
    )
    .unwrap();
    let problems = weft_dag::compile::describe(&compile(&spec, &|t| t == "pod").unwrap_err());
    for want in [
        "node a: inputs: refers to workflow.*, which only exit handler nodes (spec.onExit) see",
        "node g: cache: only task nodes are cached",
        "node g: cache.version: is empty",
        "node t: cache.maxAge: \"soon\" is not a duration",
        "node a: onExit: is also a node of the main DAG",
        "node x: onExit: inputs: refers to workflow.nope; an exit handler sees workflow.phase",
    ] {
        assert!(problems.contains(want), "{want:?} not in:\n{problems}");
    }
}

#[test]
fn a_node_waits_pending_for_its_locks_and_asks_only_when_a_slot_is_free() {
    let mut run = Run::new(
        "parallelism: 1\nnodes:\n  - {id: a, task: {type: pod}}\n  - id: b\n    task: {type: pod}\n    synchronization: {mutex: {name: db}, semaphore: {name: w, limit: 2}}\n",
    )
    .plan("a", vec![Plan::Hang]);
    run.script.taken.insert("semaphore/w".into());
    run.round(Duration::from_secs(1));
    assert_eq!(run.script.started, ["a#0"]);
    let asked = run.script.asks.len();
    run.round(Duration::from_secs(1));
    run.round(Duration::from_secs(1));
    // a holds the only slot: b is not asked for its locks meanwhile.
    assert_eq!(run.script.asks.len(), asked, "{:?}", run.script.asks);
    run.script
        .plans
        .insert("a".into(), vec![Plan::Succeed(json!({}))]);
    run.round(Duration::from_secs(1));
    run.round(Duration::from_secs(1));
    let b = run.node("b");
    assert_eq!(b.phase, NodePhase::Pending);
    assert_eq!(
        b.reason.as_deref(),
        Some(weft_dag::schedule::WAITING_FOR_LOCK)
    );
    assert_eq!(b.message.as_deref(), Some("waiting for semaphore/w"));
    assert_eq!(
        run.script.asks.last().unwrap(),
        &(
            "b".to_string(),
            vec!["mutex/db".to_string(), "semaphore/w".to_string()]
        )
    );
    run.script.taken.clear();
    assert_eq!(run.finish(), WorkflowPhase::Succeeded);
    let b = run.node("b");
    assert_eq!((b.reason.as_deref(), b.message.as_deref()), (None, None));
}
