//! The controller's side of synchronization (`crate::sync`, issue 44):
//! a workflow that has not started waits `Pending` for its own locks
//! (`gate`, before the round); a node waits for its locks inside the
//! round (`Executor::acquire`, answered from the Locks' watch cache by
//! `Locks::state`); after the round, waiting nodes are queued and whatever a
//! finished node or workflow held is released (`after_round`). A
//! Workflow deleted is released on its watch Delete (`intake.rs`), one
//! deleted while no controller ran by the sweep.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use weft_dag::schedule::{
    LockState, WAITING_FOR_LOCK, WAITING_FOR_RESOURCES, claim_item, item_claim,
};
use weft_dag::spec::sync::LockRef;
use weft_dag::status::{NodeStatus, SyncStatus, timestamp_millis};
use weft_dag::{NodePhase, WorkflowSpec, WorkflowStatus};

use super::Context;
use crate::api::Workflow;
use crate::sync::{Claimant, Held, Locks};

/// Starts the Locks' watch for the controller's namespaces (once).
pub(super) fn start(ctx: &Context, namespace: Option<&str>) -> Arc<Locks> {
    ctx.locks
        .get_or_init(|| {
            let children = ctx.children.clone();
            let promoted = ctx.promoted.clone();
            let wake = Arc::new(move |ns: &str, name: &str| {
                promoted.add(ns, name);
                children.wake(ns, name)
            });
            Locks::start(ctx.client.clone(), namespace, wake, ctx.metrics.clone())
        })
        .clone()
}

/// Workflows a lock was handed to since their last reconcile, by
/// namespace and name: that reconcile takes a worker before the running
/// ones (`reconcile::lane`), so a hand-over does not queue behind
/// status writes on a busy controller (the sync bench's hand-over p99).
#[derive(Default)]
pub(super) struct Promoted(std::sync::Mutex<HashSet<(String, String)>>);

impl Promoted {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, ns: &str, name: &str) {
        self.lock().insert((ns.to_string(), name.to_string()));
    }

    /// Whether a lock was handed to the Workflow since this was last
    /// asked (it forgets the Workflow).
    pub(super) fn take(&self, ns: &str, name: &str) -> bool {
        let mut set = self.lock();
        !set.is_empty() && set.remove(&(ns.to_string(), name.to_string()))
    }
}

/// How often held and waiting entries are checked against the
/// Workflow cache.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Once both the Locks and the Workflow cache (`crate::live`) hold their
/// first list, and every [`SWEEP_EVERY`] after: entries of Workflows
/// that are gone or finished are released. The first sweep runs at once
/// because a Workflow deleted while no controller ran is released only
/// here, and its waiters should not wait half a minute for it.
pub(super) async fn sweep(locks: Arc<Locks>, live: Arc<crate::live::LiveWorkflows>) {
    locks.listed().await;
    loop {
        let Some(store) = live.get() else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let alive: HashSet<String> = store
            .state()
            .iter()
            .filter(|w| !w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
            .filter_map(|w| w.uid())
            .collect();
        locks.sweep(&|uid| alive.contains(uid));
        tokio::time::sleep(SWEEP_EVERY).await;
    }
}

/// The locks a workflow's spec names: its own, its nodes' by id, and
/// the pool each item of an array node takes (by the array's id).
#[derive(Debug, Default)]
pub(super) struct Plan {
    own: Vec<LockRef>,
    nodes: HashMap<String, Vec<LockRef>>,
    items: HashMap<String, Vec<LockRef>>,
}

impl Plan {
    /// The spec's locks, and the controller's parallelism limits for a
    /// top-level workflow (a child's parent holds the slot already: were
    /// it to wait for one too, a limit of 1 would deadlock the two).
    pub(super) async fn of(ctx: &Context, wf: &Workflow, spec: &WorkflowSpec) -> Plan {
        let mut own = spec
            .synchronization
            .as_ref()
            .map(|s| s.locks())
            .unwrap_or_default();
        let child = wf.labels().contains_key(super::executor::DEPTH_LABEL);
        if !child {
            let ns = wf.namespace().unwrap_or_default();
            own.extend(ctx.parallelism.locks(&ctx.client, &ns).await);
        }
        let (mut nodes, mut items) = (HashMap::new(), HashMap::new());
        for n in spec.nodes.iter().chain(&spec.on_exit) {
            let mut refs = n
                .synchronization
                .as_ref()
                .map(|s| s.locks())
                .unwrap_or_default();
            let task = weft_dag::schedule::node_task(n);
            let pool = task.and_then(|t| ctx.parallelism.pool(&t.task_type));
            match pool {
                Some(p) if n.array.is_some() => {
                    items.insert(n.id.clone(), vec![p]);
                }
                pool => refs.extend(pool),
            }
            if !refs.is_empty() {
                nodes.insert(n.id.clone(), refs);
            }
        }
        Plan { own, nodes, items }
    }
}

fn claimant<'a>(wf: &'a Workflow, node: Option<&'a str>, since: String) -> Claimant<'a> {
    Claimant {
        workflow: wf.metadata.name.as_deref().unwrap_or_default(),
        uid: wf.metadata.uid.as_deref().unwrap_or_default(),
        node,
        priority: wf.spec.spec.priority,
        since,
    }
}

/// How long a workflow's first gate waits for the Lock write carrying
/// its ask; beyond it (an API server that is slow or away), the
/// workflow waits as it would have, and is woken when it holds the lock.
const ASK_WAIT: Duration = Duration::from_secs(2);

/// Before the round: whether a workflow that has not started must wait
/// for its own locks (its status then says for which, who holds it and
/// its place in line; the lock's watch wakes it once it holds them all).
/// A lock not asked for yet is asked for here, waiting for the write
/// (batched with others, a few ms): an uncontended lock then starts the
/// workflow in this reconcile, without a waiting status and the reconcile
/// that a wake would cost.
pub(super) async fn gate(
    ctx: &Context,
    wf: &Workflow,
    plan: &Plan,
    status: &mut WorkflowStatus,
) -> bool {
    let spec = &wf.spec.spec;
    let stopping = spec.abort || spec.shutdown.is_some();
    if plan.own.is_empty() || status.started_at.is_some() || status.phase.is_terminal() || stopping
    {
        return false;
    }
    let Some(locks) = ctx.locks.get() else {
        return false;
    };
    let (ns, uid) = (
        wf.namespace().unwrap_or_default(),
        wf.uid().unwrap_or_default(),
    );
    let created = wf.metadata.creation_timestamp.as_ref();
    let since = created.map_or_else(|| timestamp_millis(SystemTime::now()), |t| t.0.to_string());
    let mut state = locks.state(&ns, &uid, None, &plan.own);
    // One ask per lock at most: each answer may make it a holder of the
    // next lock's turn.
    for _ in 0..plan.own.len() {
        if state == LockState::Held {
            break;
        }
        let Some(answer) = locks.ask(&ns, &claimant(wf, None, since.clone()), &plan.own) else {
            break;
        };
        if !matches!(tokio::time::timeout(ASK_WAIT, answer).await, Ok(Ok(()))) {
            break;
        }
        state = locks.state(&ns, &uid, None, &plan.own);
    }
    let displays = |refs: &[LockRef]| refs.iter().map(LockRef::display).collect::<Vec<_>>();
    let LockState::Waiting { message, .. } = state else {
        if status
            .synchronization
            .as_ref()
            .is_some_and(|s| s.waiting.is_some())
        {
            status.message = None;
            handed_over(ctx, locks, &ns, &uid, &plan.own);
        }
        status.synchronization = Some(SyncStatus {
            holding: displays(&plan.own),
            waiting: None,
        });
        return false;
    };
    let holds =
        |r: &&LockRef| locks.state(&ns, &uid, None, std::slice::from_ref(*r)) == LockState::Held;
    let held: Vec<LockRef> = plan.own.iter().filter(holds).cloned().collect();
    let missing = locks.first_missing(&ns, &uid, None, &plan.own);
    let was = status
        .synchronization
        .as_ref()
        .and_then(|s| s.waiting.as_ref());
    if let Some(r) = missing.as_ref().filter(|_| was.is_none()) {
        ctx.metrics.sync.waited(r.kind);
    }
    status.message = Some(message);
    status.synchronization = Some(SyncStatus {
        holding: displays(&held),
        waiting: missing.map(|r| r.display()),
    });
    true
}

/// Records how long each lock a workflow waited for took to reach it:
/// from the write that made it a holder (`heldSince`) to now, its start.
fn handed_over(ctx: &Context, locks: &Locks, ns: &str, uid: &str, refs: &[LockRef]) {
    let now = SystemTime::now();
    for r in refs {
        let since = locks
            .holding(ns, uid, None, r)
            .and_then(|c| c.held_since)
            .and_then(|t| humantime::parse_rfc3339(&t).ok());
        if let Some(d) = since.and_then(|t| now.duration_since(t).ok()) {
            ctx.metrics.sync.handover(r.kind, d.as_secs_f64());
        }
    }
}

/// The claims a running workflow keeps: its own, and those of its nodes
/// that run (retries included) or wait; the rest are released.
fn keep(ns: &str, plan: &Plan, status: &WorkflowStatus) -> HashSet<(Option<String>, Held)> {
    let mut keep: HashSet<(Option<String>, Held)> = plan
        .own
        .iter()
        .map(|r| (None, Held::of_ref(ns, r)))
        .collect();
    for (id, refs) in &plan.nodes {
        let Some(n) = node(status, id) else {
            continue;
        };
        let waiting = n.phase == NodePhase::Pending && waits(n);
        if waiting || matches!(n.phase, NodePhase::Running | NodePhase::Retrying) {
            keep.extend(refs.iter().map(|r| (Some(id.clone()), Held::of_ref(ns, r))));
        }
    }
    // An array's items that have not ended keep their pool's slot (or
    // their place in its line).
    for (id, refs) in &plan.items {
        let Some(n) = node(status, id).filter(|n| !n.phase.is_terminal()) else {
            continue;
        };
        for (idx, _) in n
            .items
            .iter()
            .enumerate()
            .filter(|(_, i)| !i.phase.is_terminal())
        {
            let claim = Some(item_claim(id, idx));
            keep.extend(refs.iter().map(|r| (claim.clone(), Held::of_ref(ns, r))));
        }
    }
    keep
}

/// Whether a node waits for a lock or a resource pool's slot.
fn waits(n: &NodeStatus) -> bool {
    matches!(
        n.reason.as_deref(),
        Some(WAITING_FOR_LOCK | WAITING_FOR_RESOURCES)
    )
}

/// The node's status, in the main DAG or the exit handler.
fn node<'a>(status: &'a WorkflowStatus, id: &str) -> Option<&'a NodeStatus> {
    let exit = status.on_exit.as_ref().and_then(|e| e.nodes.get(id));
    status.nodes.get(id).or(exit)
}

/// After the round: nodes that wait are queued for their locks, and
/// what a finished node (or the finished workflow) held is released.
pub(super) fn after_round(
    ctx: &Context,
    wf: &Workflow,
    plan: &Plan,
    status: &WorkflowStatus,
    asks: &[(String, Vec<LockRef>)],
) {
    let Some(locks) = ctx.locks.get() else {
        return;
    };
    let (ns, uid) = (
        wf.namespace().unwrap_or_default(),
        wf.uid().unwrap_or_default(),
    );
    if status.phase.is_terminal() {
        locks.forget(&uid);
        return;
    }
    // Every reconcile passes here: a workflow that names no lock has no
    // claim to keep or ask for, so it does not scan every Lock's entries.
    if plan.own.is_empty() && plan.nodes.is_empty() && plan.items.is_empty() {
        return;
    }
    locks.keep_only(&uid, &keep(&ns, plan, status));
    let now = timestamp_millis(SystemTime::now());
    for (id, refs) in asks {
        let waiting = match claim_item(id) {
            // An item that did not start waits for its pool.
            Some((array, idx)) => node(status, array)
                .and_then(|n| n.items.get(idx))
                .is_some_and(|i| matches!(i.phase, NodePhase::Pending | NodePhase::Retrying)),
            None => node(status, id).is_some_and(waits),
        };
        if waiting {
            // Its answer is not awaited: the node is woken as a holder.
            drop(locks.ask(&ns, &claimant(wf, Some(id), now.clone()), refs));
        }
    }
}

/// A finished or deleted Workflow's entries, released (cheap when it has
/// none).
pub(super) fn release(ctx: &Context, uid: &str) {
    if let Some(locks) = ctx.locks.get() {
        locks.forget(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_dag::spec::sync::Limit;

    fn lock(kind: &'static str, name: &str) -> LockRef {
        LockRef {
            kind,
            name: name.into(),
            limit: Limit::Fixed(1),
            namespace: None,
        }
    }

    fn node(phase: NodePhase, reason: Option<&str>) -> NodeStatus {
        NodeStatus {
            phase,
            reason: reason.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn running_and_waiting_nodes_keep_their_claims_and_finished_ones_do_not() {
        let plan = Plan {
            items: HashMap::from([("arr".to_string(), vec![lock("pool", "pod")])]),
            own: vec![lock("mutex", "w")],
            nodes: ["run", "retry", "lock", "pool", "done", "later"]
                .into_iter()
                .map(|id| (id.to_string(), vec![lock("pool", "pod")]))
                .collect(),
        };
        let mut status = WorkflowStatus::default();
        for (id, n) in [
            ("run", node(NodePhase::Running, None)),
            ("retry", node(NodePhase::Retrying, None)),
            ("lock", node(NodePhase::Pending, Some(WAITING_FOR_LOCK))),
            (
                "pool",
                node(NodePhase::Pending, Some(WAITING_FOR_RESOURCES)),
            ),
            ("done", node(NodePhase::Succeeded, None)),
            ("later", node(NodePhase::Pending, None)),
        ] {
            status.nodes.insert(id.into(), n);
        }
        let mut arr = node(NodePhase::Running, None);
        arr.items = [NodePhase::Running, NodePhase::Succeeded, NodePhase::Pending]
            .map(|phase| weft_dag::status::ItemStatus {
                phase,
                ..Default::default()
            })
            .to_vec();
        status.nodes.insert("arr".into(), arr);
        let kept = keep("ns", &plan, &status);
        let held = |node: Option<&str>, name: &str| {
            kept.contains(&(node.map(String::from), Held("ns".into(), name.into())))
        };
        assert!(held(None, "mutex.w"));
        for id in ["run", "retry", "lock", "pool"] {
            assert!(held(Some(id), "pool.pod"), "{id} released: {kept:?}");
        }
        for id in ["done", "later", "arr", "arr[1]"] {
            assert!(!held(Some(id), "pool.pod"), "{id} kept: {kept:?}");
        }
        // An array's items hold the pool one each, until they end.
        assert!(held(Some("arr[0]"), "pool.pod") && held(Some("arr[2]"), "pool.pod"));
        assert_eq!(claim_item("arr[2]"), Some(("arr", 2)));
        assert_eq!(claim_item("arr"), None);
    }
}
