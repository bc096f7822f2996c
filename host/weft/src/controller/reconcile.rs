//! One reconcile of one Workflow, in named stages: read what is known of
//! it, settle a finished or deleted one, resolve and compile its spec, run
//! the scheduler round (synchronous plugin calls, off the async workers),
//! make the round's writes, report (status, Events, metrics) and say when
//! to look again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kube::{Api, ResourceExt, runtime::controller::Action};
use weft_dag::schedule::{RoundInput, RoundOutcome, fail_invalid, reconcile as round};
use weft_dag::spec::approval_annotation;
use weft_dag::{Compiled, NodePhase, WorkflowSpec, WorkflowStatus};

use super::executor::{self, PluginExecutor};
use super::writes::{
    abort_workflow, apply_child, collect_children, delete_child, expire, remove_finalizer,
    write_status,
};
use super::{
    Context, Error, Requeue, artifact_gc, backoff_key, history, lifecycle, queue_key, report, sync,
};
use crate::api::{FINALIZER, SKIP_CACHE_ANNOTATION, Workflow};
use crate::metrics::standard::WORKFLOW_CONTROLLER;

/// One reconcile of one Workflow, if this controller's shard owns it;
/// log lines inside carry the workflow's name and namespace.
pub async fn reconcile(wf: Arc<Workflow>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.owns(&wf) {
        ctx.queue.forget(&queue_key(&wf));
        return Ok(Action::await_change());
    }
    let span = tracing::info_span!(
        "reconcile",
        workflow = %wf.name_any(),
        namespace = %wf.namespace().unwrap_or_default()
    );
    let (key, queued) = (backoff_key(&wf), queue_key(&wf));
    let _worker = match ctx.workers.get() {
        Some(workers) => Some(workers.enter(lane(&wf, &ctx)).await),
        None => None,
    };
    ctx.queue.taken(&queued);
    let standard = &ctx.metrics.standard;
    standard.worker_started(WORKFLOW_CONTROLLER);
    let started = Instant::now();
    let result = tracing::Instrument::instrument(reconcile_owned(wf, ctx.clone()), span).await;
    let label = match &result {
        Ok(None) => "success",
        Ok(Some(_)) => "requeue_after",
        Err(_) => "error",
    };
    standard.worker_finished(WORKFLOW_CONTROLLER, label, started.elapsed());
    ctx.metrics
        .reconcile(if result.is_ok() { "ok" } else { "error" });
    if result.is_ok() {
        ctx.backoff.succeeded(&key);
    }
    result.map(|next| match next {
        Some(after) => {
            ctx.queue.add_after(&queued, after, false);
            Action::requeue(after)
        }
        None => Action::await_change(),
    })
}

/// A Workflow this controller has not started (no status written or
/// held), or one a lock was just handed to, waits for a worker in the lane
/// that goes first.
fn lane(wf: &Workflow, ctx: &Context) -> crate::lanes::Lane {
    let fresh = wf.status.is_none() && !ctx.has_held(&wf.uid().unwrap_or_default());
    let ns = wf.namespace().unwrap_or_default();
    if fresh || ctx.promoted.take(&ns, &wf.name_any()) {
        crate::lanes::Lane::Start
    } else {
        crate::lanes::Lane::Rest
    }
}

/// What a reconcile knows of its Workflow before it acts.
struct Current {
    wf: Arc<Workflow>,
    ns: String,
    name: String,
    uid: String,
    api: Api<Workflow>,
    deleting: bool,
    /// Whether it carries the old finalizer ([`FINALIZER`]).
    has_finalizer: bool,
    /// Whether it carries artifact GC's finalizer (`artifact_gc`).
    gc_held: bool,
    /// The newest status written: what this controller last wrote, else
    /// the watch cache's. Status patches are the difference from it.
    base: WorkflowStatus,
    /// The status the last round held unwritten ([`super::STATUS_HOLD`]):
    /// the next round starts from it (see [`Current::old`]).
    held: Option<WorkflowStatus>,
}

/// What a round produced: the new status, the writes the executor
/// planned, the round's outcome, and a user's retry carried out or refused.
struct Planned {
    status: WorkflowStatus,
    exec: PluginExecutor,
    outcome: RoundOutcome,
    retried: Option<(&'static str, String)>,
}

/// The stages of one reconcile, each a function below.
pub(super) async fn reconcile_owned(
    wf: Arc<Workflow>,
    ctx: Arc<Context>,
) -> Result<Requeue, Error> {
    let cur = Current::read(wf, &ctx);
    if let Some(done) = settle(&cur, &ctx).await? {
        return Ok(done);
    }
    let Some((compiled, spec, status)) = resolve_and_compile(&cur, &ctx).await? else {
        return Ok(None);
    };
    artifact_gc::guard(&ctx, &cur.wf, &spec, cur.deleting).await?;
    let (locks, mut status) = (sync::Plan::of(&ctx, &cur.wf, &spec).await, status);
    if sync::gate(&ctx, &cur.wf, &locks, &mut status).await {
        return wait_for_locks(&cur, &ctx, &status).await;
    }
    let planned = run_round(&cur, &ctx, compiled, spec, status).await?;
    apply(&cur, &ctx, &planned.exec).await?;
    sync::after_round(
        &ctx,
        &cur.wf,
        &locks,
        &planned.status,
        &planned.exec.lock_asks,
    );
    if let Some(left) = report(&cur, &ctx, &planned).await? {
        return Ok(Some(held_wakeup(&planned, left)));
    }
    next_wakeup(&cur, &ctx, &planned).await
}

/// A workflow that waits for its own locks ([`sync::gate`]). Its waiting
/// status is held as a minor change is ([`super::STATUS_HOLD`]): a wait
/// that ends within the hold costs no write of its own (the start's
/// status, written or held from the same moment, replaces it), and a
/// longer one is written when the hold ends, then waits for the Lock's
/// wake (or a minute). Nothing is lost by a restart: the waiter's place
/// is its claim in the Lock, and the next gate computes the same status.
async fn wait_for_locks(
    cur: &Current,
    ctx: &Context,
    status: &WorkflowStatus,
) -> Result<Requeue, Error> {
    let changed = (status != &cur.base).then_some(status);
    if let Some(left) = ctx.hold_status(&cur.uid, changed) {
        return Ok(Some(left));
    }
    ctx.echoes.expect(&cur.wf, status);
    let written = write_status(&cur.api, &cur.name, &cur.uid, &cur.base, status, ctx).await;
    if written.is_err() {
        ctx.echoes.forget(&cur.uid);
    }
    written?;
    Ok(Some(Duration::from_secs(60)))
}

impl Current {
    /// The status the round starts from: the held one, else `base`.
    fn old(&self) -> &WorkflowStatus {
        self.held.as_ref().unwrap_or(&self.base)
    }

    fn read(wf: Arc<Workflow>, ctx: &Context) -> Current {
        let ns = wf.namespace().unwrap_or_default();
        let uid = wf.uid().unwrap_or_default();
        // Only this controller adds or removes its finalizer, and only it
        // writes status: what it last wrote is newer than a watch cache
        // that may lag behind that write.
        let has_finalizer = ctx
            .finalized
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&uid)
            .copied()
            .unwrap_or_else(|| wf.finalizers().iter().any(|f| f == FINALIZER));
        let remembered = ctx.written.last(&uid, wf.resource_version().as_deref());
        let base = remembered.unwrap_or_else(|| wf.status.clone().unwrap_or_default());
        let held = ctx.held_status(&uid);
        Current {
            gc_held: ctx.gc.held(&wf),
            api: Api::namespaced(ctx.client.clone(), &ns),
            name: wf.name_any(),
            deleting: wf.metadata.deletion_timestamp.is_some(),
            ns,
            uid,
            has_finalizer,
            base,
            held,
            wf,
        }
    }
}

/// A Workflow that is deleted or finished: released, or its children
/// collected and its time to live looked after. `None`: it runs on.
async fn settle(cur: &Current, ctx: &Context) -> Result<Option<Requeue>, Error> {
    let old = cur.old();
    // Its artifacts first: a running one is stopped by the round, then
    // collected ([`next_wakeup`]).
    if cur.deleting && cur.gc_held {
        if !old.phase.is_terminal() {
            return Ok(None);
        }
        if cur.has_finalizer {
            remove_finalizer(&cur.api, &cur.wf, ctx).await?;
        }
        return artifact_gc::on_deletion(ctx, &cur.wf, old).await.map(Some);
    }
    if cur.deleting && (!cur.has_finalizer || old.phase.is_terminal()) {
        if cur.has_finalizer {
            remove_finalizer(&cur.api, &cur.wf, ctx).await?;
        }
        // Gone for good: forget it (memory is bounded by live Workflows).
        ctx.forget(&cur.uid);
        return Ok(Some(None));
    }
    // No finalizer is added: every child is owned by its Workflow, so the
    // API server's garbage collector deletes them with it, and a finalizer
    // would cost two writes per workflow (added, then removed). Workflows
    // that carry one (from a controller before this) are still aborted and
    // released above when deleted. A deleted Workflow is forgotten on its
    // watch Delete (`intake`).
    if old.phase.is_terminal() && lifecycle::pending_retry(&cur.wf, old).is_none() {
        sync::release(ctx, &cur.uid);
        collect_children(ctx, &cur.wf, old).await;
        if let Some(wait) = artifact_gc::on_completion(ctx, &cur.wf, old).await {
            return Ok(Some(Some(wait)));
        }
        if let Some(wait) = history::hold(ctx, &cur.wf, old) {
            return Ok(Some(Some(wait)));
        }
        return expire(&cur.api, &cur.wf, old, ctx).await.map(Some);
    }
    Ok(None)
}

/// The spec to run (a template reference resolved) and its compiled form;
/// `None` when it is invalid, after the Workflow failed saying why.
async fn resolve_and_compile(
    cur: &Current,
    ctx: &Context,
) -> Result<Option<(Arc<Compiled>, Arc<WorkflowSpec>, WorkflowStatus)>, Error> {
    let mut status = cur.old().clone();
    let resolved = crate::templates::runnable(&ctx.client, &cur.wf, &mut status).await;
    match resolved.and_then(|spec| Ok((ctx.compiled(&cur.wf, &spec)?, spec))) {
        Ok((compiled, spec)) => Ok(Some((compiled, spec, status))),
        Err(problems) => {
            let (generation, now) = (cur.wf.metadata.generation, SystemTime::now());
            fail_invalid(&mut status, now, problems, generation);
            history::record_workflow(ctx, &mut status, now);
            write_status(&cur.api, &cur.name, &cur.uid, &cur.base, &status, ctx).await?;
            history::written(ctx, &cur.wf, &status);
            let message = status.message.as_deref().unwrap_or_default();
            report::publish(ctx, &cur.wf, "Warning", "InvalidWorkflow", message).await;
            Ok(None)
        }
    }
}

/// The plugin versions the workflow's nodes ran on, each once, in the
/// order of their first node. Once, because every task's lookup walks
/// them: one entry per node made a round of a 1,000-node workflow a
/// million registry lookups (the peers bench's tree: 38 % of the
/// controller's CPU).
fn pins(status: &WorkflowStatus) -> Vec<weft_plugin::Digest> {
    let mut pins = Vec::new();
    let digests = status.nodes.values().filter_map(|n| n.plugin.as_ref());
    for digest in digests.filter_map(|p| weft_plugin::Digest::parse(&p.digest)) {
        if !pins.contains(&digest) {
            pins.push(digest);
        }
    }
    pins
}

/// The plugin executor of one round: the plugin versions the running
/// nodes pin, the nesting depth, the shadow copies and the task cache.
fn executor(cur: &Current, ctx: &Context, io: super::repositories::Found) -> PluginExecutor {
    let pins = pins(cur.old());
    let labels = cur.wf.labels();
    let depth = labels
        .get(executor::DEPTH_LABEL)
        .and_then(|d| d.parse().ok());
    let skip_cache = cur.wf.annotations().get(SKIP_CACHE_ANNOTATION);
    let metrics = ctx.metrics.clone();
    PluginExecutor::new(
        ctx.registry.clone(),
        ctx.children.clone(),
        metrics,
        &cur.name,
        &cur.uid,
        &cur.ns,
    )
    .with_pins(pins)
    .with_webapi(ctx.webapi.clone())
    .with_io(io)
    .with_archive_logs(cur.wf.spec.spec.archive_logs)
    .with_depth(depth.unwrap_or(0), ctx.max_depth())
    .with_shadow(ctx.shadow.clone())
    .with_cache(
        ctx.cache.get().cloned(),
        skip_cache.is_none_or(|v| v != "true"),
    )
    .with_plugin_wait(ctx.plugin_wait())
    .with_locks(ctx.locks.get().cloned(), ctx.parallelism.clone())
}

/// The scheduler round, in a blocking task: plugin calls are synchronous.
async fn run_round(
    cur: &Current,
    ctx: &Context,
    compiled: Arc<Compiled>,
    spec: Arc<WorkflowSpec>,
    mut status: WorkflowStatus,
) -> Result<Planned, Error> {
    let retried = lifecycle::pending_retry(&cur.wf, &status)
        .map(|req| lifecycle::retry(&compiled, &mut status, &req));
    let (approvals, rejections) = gate_decisions(&cur.wf, &spec);
    let io = ctx.artifacts_for(&cur.ns).await;
    let mut exec = executor(cur, ctx, io);
    let (generation, deleting) = (cur.wf.metadata.generation, cur.deleting);
    let (started, now) = (Instant::now(), SystemTime::now());
    let span = tracing::Span::current();
    let (mut status, exec, outcome) = tokio::task::spawn_blocking(move || {
        let _in_reconcile = span.enter();
        let input = RoundInput {
            now,
            generation,
            approvals: &approvals,
            rejections: &rejections,
            deleting,
        };
        let outcome = round(&spec, &compiled, &mut status, &input, &mut exec);
        (status, exec, outcome)
    })
    .await
    .map_err(|e| anyhow::anyhow!("round panicked: {e}"))?;
    ctx.metrics.round(started.elapsed());
    let transitions = &outcome.transitions;
    history::record_round(ctx, &cur.uid, cur.old(), &mut status, transitions, now);
    Ok(Planned {
        status,
        exec,
        outcome,
        retried,
    })
}

/// The round's writes to children: watches for new kinds, applies,
/// deletions, cache entries, aborts of child Workflows.
async fn apply(cur: &Current, ctx: &Context, exec: &PluginExecutor) -> Result<(), Error> {
    for (api_version, kind) in &exec.unwatched {
        if let Err(e) = ctx.children.ensure(api_version, kind).await {
            tracing::warn!(workflow = %cur.name, "{e:#}");
        }
    }
    let mut waits = Vec::new();
    for child in &exec.applies {
        waits.extend(apply_child(ctx, &cur.ns, child).await?);
    }
    report::waiting_events(ctx, &cur.wf, &waits).await;
    for d in &exec.deletions {
        delete_child(ctx, &cur.ns, d).await;
    }
    if let (Some(cache), false) = (ctx.cache.get(), exec.cache_writes.is_empty()) {
        cache.write(&cur.ns, &exec.cache_writes).await;
    }
    for child in &exec.workflow_aborts {
        abort_workflow(&cur.api, child, ctx).await;
    }
    Ok(())
}

/// Whether the round changed only what may wait ([`super::STATUS_HOLD`]):
/// no transition, no write to a child, no user action taken.
fn is_minor(old: &WorkflowStatus, p: &Planned) -> bool {
    let (exec, status) = (&p.exec, &p.status);
    status != old
        && exec.applies.is_empty()
        && exec.deletions.is_empty()
        && exec.workflow_aborts.is_empty()
        && exec.cache_writes.is_empty()
        && p.retried.is_none()
        && p.outcome.transitions.is_empty()
        && !p.outcome.workflow_changed
        && old.suspended == status.suspended
        && old.observed_generation == status.observed_generation
}

/// Whether the round only moved nodes forward ([`super::STATUS_HOLD`]):
/// every transition is a node starting (to Running) or succeeding while the
/// workflow runs on, its only writes are children to apply, and no web-API
/// task was touched (a remote job's identity lives only in the status).
/// Its status may wait for the next change. Nothing in it is known only
/// here: a restart before it is written runs the round again from the last
/// written status and finds the same children (their names come from the
/// workflow, node and attempt; a succeeded node's outputs from its child,
/// which pod GC deletes only after the status that records them is
/// written), so it applies them unchanged. Failures, retries, user
/// actions and the workflow's end are written at once.
fn only_progress(old: &WorkflowStatus, p: &Planned) -> bool {
    let (exec, status) = (&p.exec, &p.status);
    let transitions = &p.outcome.transitions;
    (!exec.applies.is_empty() || !transitions.is_empty())
        && !status.phase.is_terminal()
        && transitions
            .iter()
            .all(|t| matches!(t.to, NodePhase::Running | NodePhase::Succeeded))
        && !exec.webapi_touched
        && exec.deletions.is_empty()
        && exec.workflow_aborts.is_empty()
        && exec.cache_writes.is_empty()
        && exec.lock_asks.is_empty()
        && p.retried.is_none()
        && old.suspended == status.suspended
        && old
            .observed_generation
            .is_none_or(|g| Some(g) == status.observed_generation)
}

/// When a round whose status is held looks again: when the hold ends, or
/// sooner if the round asked for that (a timer, a quota wait's end).
fn held_wakeup(p: &Planned, left: Duration) -> Duration {
    let timer = p
        .outcome
        .wake_at
        .and_then(|t| t.duration_since(SystemTime::now()).ok());
    let quota = p
        .exec
        .wake_at
        .map(|t| t.saturating_duration_since(Instant::now()));
    [Some(left), timer, quota]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(left)
        + Duration::from_millis(5)
}

/// The round's status, held when it may wait (`Some`: for at most that
/// long), else patched (only what changed) with pod GC after it; then the
/// round's Events and metrics, either way: a held round is not run again,
/// so they would be lost.
async fn report(cur: &Current, ctx: &Context, p: &Planned) -> Result<Option<Duration>, Error> {
    let may_wait = (cur.held.as_ref() == Some(&p.status))
        || is_minor(cur.old(), p)
        || only_progress(cur.old(), p);
    let held = ctx.hold_status(&cur.uid, may_wait.then_some(&p.status));
    if held.is_none() {
        write_status(&cur.api, &cur.name, &cur.uid, &cur.base, &p.status, ctx).await?;
        history::written(ctx, &cur.wf, &p.status);
        collect_children(ctx, &cur.wf, &p.status).await;
    }
    report::action_events(ctx, &cur.wf, cur.old(), &p.status, p.retried.clone()).await;
    report::round_events(ctx, &cur.wf, &p.status, &p.outcome).await;
    Ok(held)
}

/// When to look again: a finished Workflow's time to live (or its
/// release, when deleted); else the round's next timer, at most a minute
/// away (children wake it through their watches), two seconds after
/// applying children.
async fn next_wakeup(cur: &Current, ctx: &Context, p: &Planned) -> Result<Requeue, Error> {
    let status = &p.status;
    if status.phase.is_terminal() {
        if cur.deleting {
            remove_finalizer(&cur.api, &cur.wf, ctx).await.ok();
            if cur.gc_held {
                return artifact_gc::on_deletion(ctx, &cur.wf, status).await;
            }
            return Ok(None);
        }
        if let Some(wait) = artifact_gc::on_completion(ctx, &cur.wf, status).await {
            return Ok(Some(wait));
        }
        if let Some(wait) = history::hold(ctx, &cur.wf, status) {
            return Ok(Some(wait));
        }
        // Its time to live starts now: ask for that wake-up in this round
        // rather than count on the watch event of our own status write
        // (which the IgnoreStatusUpdates gate filters out).
        return expire(&cur.api, &cur.wf, status, ctx).await;
    }
    let fallback = Duration::from_secs(60);
    let wait = p
        .outcome
        .wake_at
        .and_then(|t| t.duration_since(SystemTime::now()).ok())
        .map_or(fallback, |d| d.min(fallback) + Duration::from_millis(5));
    let wait = match p.exec.wake_at {
        Some(t) => wait
            .min(t.saturating_duration_since(std::time::Instant::now()) + Duration::from_millis(5)),
        None => wait,
    };
    if p.exec.applies.is_empty() {
        Ok(Some(wait))
    } else {
        Ok(Some(wait.min(Duration::from_secs(2))))
    }
}

pub(super) fn error_policy(wf: Arc<Workflow>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_error();
    let key = backoff_key(&wf);
    let wait = ctx.backoff.failed(&key);
    tracing::warn!(
        workflow = %wf.name_any(),
        namespace = %wf.namespace().unwrap_or_default(),
        failures = ctx.backoff.failures(&key),
        retry_in = ?wait,
        "reconcile failed: {err}"
    );
    ctx.queue.add_after(&queue_key(&wf), wait, true);
    Action::requeue(wait)
}

/// The approval gates a person decided, from the Workflow's annotations:
/// approved ids, and rejected ids with the reason given.
fn gate_decisions(
    wf: &Workflow,
    spec: &weft_dag::WorkflowSpec,
) -> (HashSet<String>, HashMap<String, String>) {
    let (mut approved, mut rejected) = (HashSet::new(), HashMap::new());
    let gates = spec
        .nodes
        .iter()
        .filter(|n| n.gate.as_ref().is_some_and(|g| g.approval.is_some()));
    for n in gates {
        let notes = wf.annotations();
        match notes.get(&approval_annotation(&n.id)).map(String::as_str) {
            Some("true") => {
                approved.insert(n.id.clone());
            }
            Some("false") => {
                let why = notes.get(&weft_dag::spec::rejection_annotation(&n.id));
                rejected.insert(n.id.clone(), why.cloned().unwrap_or_default());
            }
            _ => {}
        }
    }
    (approved, rejected)
}

#[cfg(test)]
mod tests {
    use weft_dag::status::{NodeStatus, PluginRef};

    use super::*;

    #[test]
    fn pins_name_each_version_once_in_the_order_nodes_first_ran_on_it() {
        let (a, b) = (
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        );
        let mut status = WorkflowStatus::default();
        for (id, digest) in [("n1", &b), ("n2", &a), ("n3", &b), ("n4", &a)] {
            let plugin = Some(PluginRef {
                name: "pod".into(),
                digest: digest.clone(),
            });
            let node = NodeStatus {
                plugin,
                ..Default::default()
            };
            status.nodes.insert(id.into(), node);
        }
        status.nodes.insert("n5".into(), NodeStatus::default());
        let want: Vec<_> = [&b, &a]
            .iter()
            .filter_map(|d| weft_plugin::Digest::parse(d))
            .collect();
        assert_eq!(want.len(), 2);
        assert_eq!(pins(&status), want);
    }
}
