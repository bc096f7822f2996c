//! The reconcile loop (flytepropeller's job), on kube-runtime.
//!
//! One reconcile of a Workflow: validate and compile its spec (cached per
//! generation), run one scheduler round in a blocking task (plugin calls
//! are synchronous), then make the round's writes: apply new children,
//! delete aborted ones, and patch the status once with only what changed.
//! Data flows one way: watch event -> reconcile -> round -> plugin call ->
//! child apply -> status patch.

pub mod backoff;
pub mod cache;
pub mod children;
pub mod cron;
pub mod elected;
pub mod executor;
pub mod features;
pub mod impersonation;
pub mod intake;
pub mod leader;
pub mod lifecycle;
/// The metrics moved to [`crate::metrics`]; the old path stays.
pub use crate::metrics;
pub mod shadow;
pub mod shard;
/// controller-runtime's metrics, now [`crate::metrics::standard`].
pub use crate::metrics::standard as standard_metrics;
use crate::templates;
pub mod webapi;
pub mod workqueue;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy},
    runtime::{Controller as KubeController, controller::Action},
};
use serde_json::{Value, json};
use weft_dag::{
    Compiled, WorkflowStatus, compile,
    schedule::{RoundInput, Transition, fail_invalid, reconcile as round},
    spec::approval_annotation,
};
use weft_plugin::Registry;

use crate::api::{FINALIZER, Workflow};
use crate::metrics::Metrics;
use crate::metrics::standard::WORKFLOW_CONTROLLER;
use children::Children;
use executor::PluginExecutor;
use shard::Shard;

/// Set to "true" on a Workflow (`weft resubmit` without `--memoized`):
/// its cached nodes run and refresh the cache instead of reading it.
pub const SKIP_CACHE_ANNOTATION: &str = "weft.dev/skip-cache";

/// The field manager of everything the controller writes.
pub const MANAGER: &str = "weft-controller";

static INSTANCE: OnceLock<String> = OnceLock::new();

/// Names this process in the Events it records (`reportingInstance`, the
/// pod name in a cluster), so `kubectl get events` tells replicas and
/// shards apart. Set once, at start.
pub fn set_instance(identity: &str) {
    let _ = INSTANCE.set(identity.to_string());
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server said no.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Anything else.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    registry: Arc<Registry>,
    children: Arc<Children>,
    /// Web-API task attempts in flight.
    webapi: Arc<webapi::WebApiTasks>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The shard this controller reconciles (all Workflows when `None`).
    shard: Option<Shard>,
    /// Compiled specs by (uid, generation).
    compiled: Mutex<HashMap<(String, i64), Arc<Compiled>>>,
    /// The last status this controller wrote, by uid. Only the controller
    /// writes status, so this is never older than the watch cache, which
    /// may lag behind our own last write.
    written: Mutex<HashMap<String, WorkflowStatus>>,
    /// Whether this controller last added (true) or removed (false) its
    /// finalizer, by uid: the same reasoning as `written`.
    finalized: Mutex<HashMap<String, bool>>,
    /// How long a node waits for its plugin to finish loading.
    plugin_wait: Mutex<Duration>,
    /// Copies calls to shadow candidates.
    shadow: Arc<shadow::Shadow>,
    /// Who a plugin's children are written as (and its task Secrets read).
    plugin_clients: Arc<impersonation::PluginClients>,
    /// The deepest a child Workflow may be nested.
    max_depth: std::sync::atomic::AtomicU32,
    /// Seconds a finished Workflow without a `ttlStrategy` is kept (0:
    /// forever).
    default_ttl: std::sync::atomic::AtomicU64,
    /// The task output cache (started with the controller).
    cache: OnceLock<Arc<cache::TaskCache>>,
    /// Which Events Workflows get (`--workflow-events`).
    events: Mutex<WorkflowEvents>,
    /// How many Workflows are reconciled at once (0: no limit).
    concurrency: std::sync::atomic::AtomicU16,
    /// Since when a Workflow's minor status changes wait to be written, by
    /// uid ([`MINOR_STATUS_DELAY`]).
    deferred: Mutex<HashMap<String, Instant>>,
    /// When failed reconciles run again (controller-runtime's rate limiter).
    backoff: backoff::Backoff,
    /// The work queue's figures (`workqueue_*`).
    queue: workqueue::WorkQueue,
    /// How often every Workflow is reconciled without an event (`None`:
    /// never).
    sync_period: Mutex<Option<Duration>>,
    /// `--feature-gates`.
    gates: Mutex<features::FeatureGates>,
}

/// How long a round's minor status changes (a running task's sub-phase or
/// message, an array item's progress: no node transition, no child
/// written) may wait to be written with the next change. A pod that goes
/// Pending, Running, Succeeded within this costs one status write instead
/// of two; the same round is recomputed from the children then, so nothing
/// is lost, only shown up to this much later.
pub const MINOR_STATUS_DELAY: Duration = Duration::from_secs(1);

/// Which Kubernetes Events the controller records on Workflows. Every
/// Event is an API write, as costly as a status patch, so a healthy
/// workflow's Normal Events (its success, its exit handler starting) are
/// opt-in; what an operator must hear about (failures, retries, refusals,
/// what users asked for) is always recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WorkflowEvents {
    /// Warnings and user actions only.
    #[default]
    Warnings,
    /// Also a Workflow's success and its exit handler starting.
    All,
}

impl Context {
    /// A context for a controller talking to `client` with plugins from
    /// `registry`, reconciling `shard`'s Workflows (all when `None`).
    pub fn new(
        client: Client,
        registry: Arc<Registry>,
        children: Arc<Children>,
        metrics: Arc<Metrics>,
        shard: Option<Shard>,
    ) -> Arc<Self> {
        let shadow = shadow::Shadow::start(registry.clone(), metrics.clone());
        let queue = workqueue::WorkQueue::new(metrics.clone());
        let plugin_clients = Arc::new(impersonation::PluginClients::new(client.clone()));
        Arc::new(Context {
            queue,
            client,
            registry,
            webapi: webapi::WebApiTasks::new(
                children.clone(),
                metrics.clone(),
                plugin_clients.clone(),
            ),
            plugin_clients,
            children,
            metrics,
            shadow,
            shard,
            compiled: Mutex::new(HashMap::new()),
            backoff: backoff::Backoff::default(),
            sync_period: Mutex::new(None),
            gates: Mutex::default(),
            written: Mutex::new(HashMap::new()),
            finalized: Mutex::new(HashMap::new()),
            plugin_wait: Mutex::new(executor::DEFAULT_PLUGIN_WAIT),
            max_depth: executor::DEFAULT_MAX_DEPTH.into(),
            default_ttl: 0.into(),
            cache: OnceLock::new(),
            events: Mutex::new(WorkflowEvents::default()),
            deferred: Mutex::new(HashMap::new()),
            concurrency: 0.into(),
        })
    }

    /// How many Workflows are reconciled at once (`--concurrent-reconciles`,
    /// kube-runtime's controller concurrency; 0: no limit). A Workflow is
    /// never reconciled twice at once either way.
    pub fn set_concurrency(&self, n: u16) {
        self.concurrency
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// How often every Workflow is reconciled without an event
    /// (`--sync-period`; zero or `None`: never).
    pub fn set_sync_period(&self, period: Option<Duration>) {
        *self.sync_period.lock().unwrap_or_else(|e| e.into_inner()) =
            period.filter(|p| !p.is_zero());
    }

    /// `--feature-gates`.
    pub fn set_feature_gates(&self, gates: features::FeatureGates) {
        *self.gates.lock().unwrap_or_else(|e| e.into_inner()) = gates;
    }

    fn gate(&self, name: &str) -> bool {
        self.gates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enabled(name)
    }

    fn sync_period(&self) -> Option<Duration> {
        *self.sync_period.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the watches the controller spawned beside its own stream
    /// (children, the task cache): for a shutdown that could not wait for
    /// the controller to finish, so that nothing talks to an API server
    /// that is going away.
    pub fn stop_watches(&self) {
        self.children.stop();
        if let Some(cache) = self.cache.get() {
            cache.stop();
        }
    }

    /// Which Events Workflows get (`--workflow-events`).
    pub fn set_workflow_events(&self, events: WorkflowEvents) {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = events;
    }

    fn all_events(&self) -> bool {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) == WorkflowEvents::All
    }

    /// Forgets a Workflow that is gone (a watch Delete): what this
    /// controller remembered of it is bounded by the live Workflows.
    pub fn forget(&self, uid: &str) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.finalized
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(u, _), _| u != uid);
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    /// Whether a round's minor changes wait (for at most the time
    /// returned), or are written now (the delay is over, or `minor` is
    /// false: then any wait is ended).
    fn defer_minor(&self, uid: &str, minor: bool) -> Option<Duration> {
        let mut deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        if !minor || !self.gate("CoalesceStatusWrites") {
            deferred.remove(uid);
            return None;
        }
        let since = *deferred.entry(uid.to_string()).or_insert_with(Instant::now);
        let left = MINOR_STATUS_DELAY.checked_sub(since.elapsed());
        if left.is_none() {
            deferred.remove(uid);
        }
        left
    }

    /// Deletes finished Workflows without a `ttlStrategy` this long after
    /// they finished (`--default-ttl-after-completion`).
    pub fn set_default_ttl(&self, ttl: Option<Duration>) {
        let secs = ttl.map_or(0, |d| d.as_secs().max(1));
        self.default_ttl
            .store(secs, std::sync::atomic::Ordering::Relaxed);
    }

    fn default_ttl(&self) -> Option<Duration> {
        match self.default_ttl.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        }
    }

    /// Sets how deep sub-workflows and dynamic nodes may nest
    /// (`--max-workflow-depth`).
    pub fn set_max_depth(&self, depth: u32) {
        self.max_depth
            .store(depth, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets how long a node waits for its plugin to finish loading before
    /// it fails (`--plugin-wait-timeout`).
    pub fn set_plugin_wait(&self, wait: Duration) {
        *self.plugin_wait.lock().unwrap_or_else(|e| e.into_inner()) = wait;
    }

    /// Writes children as their plugin's ServiceAccount from now on
    /// (`--impersonate-plugins`), and reads web-API tasks' Secrets so.
    pub fn set_impersonation(&self, i: impersonation::Impersonation) {
        self.plugin_clients.set(i);
    }

    /// The client that writes `plugin`'s children, and the user it acts as
    /// (None: the controller itself).
    fn child_client(&self, plugin: &str) -> Result<(Client, Option<String>), Error> {
        Ok(self.plugin_clients.client(plugin)?)
    }

    /// Whether this controller's shard owns the Workflow.
    pub fn owns(&self, wf: &Workflow) -> bool {
        self.shard.as_ref().is_none_or(|s| {
            s.owns(
                wf.metadata.namespace.as_deref().unwrap_or_default(),
                &wf.name_any(),
                wf.labels(),
            )
        })
    }

    fn compiled(
        &self,
        wf: &Workflow,
        spec: &weft_dag::WorkflowSpec,
    ) -> Result<Arc<Compiled>, String> {
        let key = (
            wf.uid().unwrap_or_default(),
            wf.metadata.generation.unwrap_or(0),
        );
        if let Some(c) = self
            .compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(c.clone());
        }
        let snapshot = self.registry.snapshot();
        let known: HashSet<String> = snapshot.task_types().map(str::to_string).collect();
        // A type whose plugin is being loaded is known: its nodes wait.
        let c = compile(spec, &|t| {
            known.contains(t) || self.registry.loading(t).is_some()
        })
        .map(Arc::new)
        .map_err(|p| weft_dag::compile::describe(&p))?;
        self.compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, c.clone());
        Ok(c)
    }
}

/// The smallest JSON merge patch (RFC 7386) that turns `old` into `new`:
/// unchanged fields are left out and removed ones become null. A round that
/// moves one node of 10,000 writes one node.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = serde_json::Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

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

/// When a reconcile wants to look at its Workflow again without an event
/// (a timeout, a deferred status write, a TTL): `None` waits for one.
type Requeue = Option<Duration>;

/// A Workflow's key in [`workqueue::WorkQueue`].
fn queue_key(wf: &Workflow) -> String {
    format!("{}/{}", wf.namespace().unwrap_or_default(), wf.name_any())
}

async fn reconcile_owned(wf: Arc<Workflow>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let ns = wf.namespace().unwrap_or_default();
    let name = wf.name_any();
    let uid = wf.uid().unwrap_or_default();
    let api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = wf.metadata.deletion_timestamp.is_some();
    // Only this controller adds or removes its finalizer, so what it last
    // wrote is newer than a watch cache that may lag behind that write.
    let has_finalizer = ctx
        .finalized
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&uid)
        .copied()
        .unwrap_or_else(|| wf.finalizers().iter().any(|f| f == FINALIZER));

    let stored = wf.status.clone().unwrap_or_default();
    let remembered = ctx
        .written
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&uid)
        .cloned();
    let old = remembered.unwrap_or(stored);

    if deleting && (!has_finalizer || old.phase.is_terminal()) {
        if has_finalizer {
            remove_finalizer(&api, &wf, &ctx).await?;
        }
        // Gone for good: forget it (memory is bounded by live Workflows).
        ctx.forget(&uid);
        return Ok(None);
    }
    // No finalizer is added: every child is owned by its Workflow, so the
    // API server's garbage collector deletes them with it, and a finalizer
    // would cost two writes per workflow (added, then removed). Workflows
    // that carry one (from a controller before this) are still aborted and
    // released above when deleted. A deleted Workflow is forgotten on its
    // watch Delete (`intake`).
    if old.phase.is_terminal() && lifecycle::pending_retry(&wf, &old).is_none() {
        collect_children(&ctx, &wf, &old).await;
        return expire(&api, &wf, &old, &ctx).await;
    }

    let now = SystemTime::now();
    let mut status = old.clone();
    let generation = wf.metadata.generation;
    let resolved = templates::runnable(&ctx.client, &wf, &mut status).await;
    let compiled = match resolved.and_then(|spec| Ok((ctx.compiled(&wf, &spec)?, spec))) {
        Ok(c) => c,
        Err(problems) => {
            fail_invalid(&mut status, now, problems, generation);
            write_status(&api, &name, &uid, &old, &status, &ctx).await?;
            publish(
                &ctx,
                &wf,
                "Warning",
                "InvalidWorkflow",
                status.message.as_deref().unwrap_or_default(),
            )
            .await;
            return Ok(None);
        }
    };

    let (compiled, spec) = compiled;
    let retried = lifecycle::pending_retry(&wf, &status)
        .map(|req| lifecycle::retry(&compiled, &mut status, &req));
    let (approvals, rejections) = gate_decisions(&wf, &spec);

    // The round: synchronous plugin calls, off the async workers.
    let pins = old
        .nodes
        .values()
        .filter_map(|n| n.plugin.as_ref())
        .filter_map(|p| weft_plugin::Digest::parse(&p.digest))
        .collect();
    let mut exec = PluginExecutor::new(
        ctx.registry.clone(),
        ctx.children.clone(),
        ctx.metrics.clone(),
        &name,
        &uid,
        &ns,
    )
    .with_pins(pins)
    .with_webapi(ctx.webapi.clone())
    .with_depth(
        wf.labels()
            .get(executor::DEPTH_LABEL)
            .and_then(|d| d.parse().ok())
            .unwrap_or(0),
        ctx.max_depth.load(std::sync::atomic::Ordering::Relaxed),
    )
    .with_shadow(ctx.shadow.clone())
    .with_cache(
        ctx.cache.get().cloned(),
        wf.annotations()
            .get(SKIP_CACHE_ANNOTATION)
            .is_none_or(|v| v != "true"),
    )
    .with_plugin_wait(*ctx.plugin_wait.lock().unwrap_or_else(|e| e.into_inner()));
    let started = Instant::now();
    let span = tracing::Span::current();
    let (status, exec, outcome) = tokio::task::spawn_blocking(move || {
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

    for (api_version, kind) in &exec.unwatched {
        if let Err(e) = ctx.children.ensure(api_version, kind).await {
            tracing::warn!(workflow = %name, "{e:#}");
        }
    }
    for child in &exec.applies {
        apply_child(&ctx, &ns, child).await?;
    }
    for d in &exec.deletions {
        delete_child(&ctx, &ns, d).await;
    }
    if let (Some(cache), false) = (ctx.cache.get(), exec.cache_writes.is_empty()) {
        cache.write(&ns, &exec.cache_writes).await;
    }
    for child in &exec.workflow_aborts {
        abort_workflow(&api, child, &ctx).await;
    }
    let minor = status != old
        && exec.applies.is_empty()
        && exec.deletions.is_empty()
        && exec.workflow_aborts.is_empty()
        && exec.cache_writes.is_empty()
        && retried.is_none()
        && outcome.transitions.is_empty()
        && !outcome.workflow_changed
        && old.suspended == status.suspended
        && old.observed_generation == status.observed_generation;
    if let Some(left) = ctx.defer_minor(&uid, minor) {
        return Ok(Some(left + Duration::from_millis(5)));
    }
    write_status(&api, &name, &uid, &old, &status, &ctx).await?;
    collect_children(&ctx, &wf, &status).await;
    action_events(&ctx, &wf, &old, &status, retried).await;
    for t in &outcome.transitions {
        ctx.metrics
            .transition(&format!("{:?}", t.from), &format!("{:?}", t.to));
        tracing::info!(node = %t.node, from = ?t.from, to = ?t.to, "node transition");
    }
    // Events for the transitions a user must hear about (failures and
    // retries) and for the workflow's end: one Event per round at most, so
    // Events do not multiply API writes per node.
    let troubles: Vec<Transition> = outcome
        .transitions
        .iter()
        .filter(|t| {
            matches!(
                t.to,
                weft_dag::NodePhase::Failed | weft_dag::NodePhase::Retrying
            )
        })
        .cloned()
        .collect();
    if !troubles.is_empty() {
        let reason = if troubles.iter().any(|t| t.to == weft_dag::NodePhase::Failed) {
            "NodeFailed"
        } else {
            "NodeRetrying"
        };
        publish(&ctx, &wf, "Warning", reason, &describe(&troubles)).await;
    }
    let succeeded = status.phase == weft_dag::WorkflowPhase::Succeeded;
    if outcome.workflow_changed && status.phase.is_terminal() && (!succeeded || ctx.all_events()) {
        let kind = if succeeded { "Normal" } else { "Warning" };
        let msg = status
            .message
            .clone()
            .unwrap_or_else(|| format!("workflow {:?}", status.phase));
        publish(
            &ctx,
            &wf,
            kind,
            &format!("Workflow{:?}", status.phase),
            &msg,
        )
        .await;
    }
    if status.phase.is_terminal() {
        if deleting {
            remove_finalizer(&api, &wf, &ctx).await.ok();
            return Ok(None);
        }
        // Its time to live starts now: ask for that wake-up in this round
        // rather than count on the watch event of our own status write
        // (which the IgnoreStatusUpdates gate filters out).
        return expire(&api, &wf, &status, &ctx).await;
    }
    // Children wake us through their watches; timers through this.
    let fallback = Duration::from_secs(60);
    let wait = outcome
        .wake_at
        .and_then(|t| t.duration_since(SystemTime::now()).ok())
        .map_or(fallback, |d| d.min(fallback) + Duration::from_millis(5));
    let wait = if exec.applies.is_empty() {
        wait
    } else {
        wait.min(Duration::from_secs(2))
    };
    Ok(Some(wait))
}

/// Deletes the children `spec.podGC` says are done with.
async fn collect_children(ctx: &Context, wf: &Workflow, status: &WorkflowStatus) {
    let ns = wf.namespace().unwrap_or_default();
    for d in lifecycle::pod_gc(ctx, wf, status) {
        tracing::debug!(child = %d.name, "pod GC");
        delete_child(ctx, &ns, &d).await;
    }
}

/// Events for what users did and what it changed: a retry carried out or
/// refused, a suspension or resumption, the exit handler starting.
async fn action_events(
    ctx: &Context,
    wf: &Workflow,
    old: &WorkflowStatus,
    new: &WorkflowStatus,
    retried: Option<(&'static str, String)>,
) {
    if let Some((reason, msg)) = retried {
        let kind = if reason == "WorkflowRetried" {
            "Normal"
        } else {
            "Warning"
        };
        publish(ctx, wf, kind, reason, &msg).await;
    }
    if old.suspended != new.suspended {
        let (reason, msg) = match new.suspended {
            true => (
                "WorkflowSuspended",
                "suspended: no new node starts until it is resumed",
            ),
            false => ("WorkflowResumed", "resumed"),
        };
        publish(ctx, wf, "Normal", reason, msg).await;
    }
    if let (None, Some(exit), true) = (&old.on_exit, &new.on_exit, ctx.all_events()) {
        let msg = format!("the main DAG ended {:?}: running spec.onExit", exit.phase);
        publish(ctx, wf, "Normal", "RunningExitHandler", &msg).await;
    }
}

/// A finished Workflow: deleted once its TTL is over (its children go
/// with it through their owner references), else looked at again then.
/// The due time comes from `finishedAt`, so a controller that was down
/// when it fell due deletes it on its first look.
async fn expire(
    api: &Api<Workflow>,
    wf: &Workflow,
    status: &WorkflowStatus,
    ctx: &Context,
) -> Result<Requeue, Error> {
    let own = wf.spec.spec.ttl_strategy.as_ref();
    let resolved = status
        .resolved_spec
        .as_ref()
        .and_then(|s| s.ttl_strategy.as_ref());
    let Some(due) = weft_dag::ttl::due(own.or(resolved), ctx.default_ttl(), status) else {
        return Ok(None);
    };
    let now = SystemTime::now();
    if let Ok(left) = due.duration_since(now)
        && !left.is_zero()
    {
        return Ok(Some(left + Duration::from_millis(5)));
    }
    match api
        .delete(&wf.name_any(), &DeleteParams::background())
        .await
    {
        Ok(_) => {
            ctx.metrics.api_write("workflow");
            tracing::info!(workflow = %wf.name_any(), "deleted: its time to live after finishing is over");
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(None)
}

fn describe(ts: &[Transition]) -> String {
    let parts: Vec<String> = ts
        .iter()
        .take(20)
        .map(|t| match &t.message {
            Some(m) => format!("{}: {:?} ({m})", t.node, t.to),
            None => format!("{}: {:?}", t.node, t.to),
        })
        .collect();
    let more = ts.len().saturating_sub(20);
    if more > 0 {
        format!("{}; and {more} more", parts.join("; "))
    } else {
        parts.join("; ")
    }
}

async fn write_status(
    api: &Api<Workflow>,
    name: &str,
    uid: &str,
    old: &WorkflowStatus,
    new: &WorkflowStatus,
    ctx: &Context,
) -> Result<(), Error> {
    tracing::Instrument::instrument(
        patch_status(api, name, old, new, ctx),
        tracing::info_span!("status.patch", phase = ?new.phase),
    )
    .await?;
    ctx.written
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(uid.to_string(), new.clone());
    Ok(())
}

/// Writes only what changed from `old` to `new` in an object's status (a
/// JSON merge patch; nothing when nothing changed): a round that moves one
/// node of 10,000 writes one node.
pub(crate) async fn patch_status<K, S>(
    api: &Api<K>,
    name: &str,
    old: &S,
    new: &S,
    ctx: &Context,
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: serde::Serialize,
{
    let old_v = serde_json::to_value(old).unwrap_or(Value::Null);
    let new_v = serde_json::to_value(new).unwrap_or(Value::Null);
    if let Some(diff) = merge_diff(&old_v, &new_v) {
        let patch = json!({"status": diff});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        ctx.metrics.api_write("status");
    }
    Ok(())
}

async fn remove_finalizer(api: &Api<Workflow>, wf: &Workflow, ctx: &Context) -> Result<(), Error> {
    let finalizers: Vec<&String> = wf.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    let patch = json!({"metadata": {"finalizers": finalizers}});
    let uid = wf.uid().unwrap_or_default();
    match api
        .patch(
            &wf.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            ctx.metrics.api_write("finalizer");
            ctx.finalized
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid, false);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn apply_child(ctx: &Context, ns: &str, apply: &executor::Apply) -> Result<(), Error> {
    let child = &apply.object;
    let api_version = child["apiVersion"].as_str().unwrap_or_default();
    let kind = child["kind"].as_str().unwrap_or_default();
    let name = child["metadata"]["name"].as_str().unwrap_or_default();
    let span = tracing::info_span!("child.apply", kind, name);
    let k = ctx.children.ensure(api_version, kind).await?;
    let (client, acting) = ctx.child_client(&apply.plugin)?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &k.resource);
    // A pod whose secrets a webhook mounts is created, never re-applied: an
    // apply of the same object would own and so remove what the webhook
    // added (and a real API server refuses pod spec changes anyway).
    let write = async {
        if !crate::pod_secrets::marked(child) {
            return api
                .patch(
                    name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(child),
                )
                .await
                .map(drop);
        }
        let obj: DynamicObject =
            serde_json::from_value(child.clone()).map_err(kube::Error::SerdeError)?;
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        match api.create(&pp, &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            other => other.map(drop),
        }
    };
    let result = tracing::Instrument::instrument(write, span).await;
    match result {
        Ok(()) => {
            ctx.metrics.api_write("child");
            Ok(())
        }
        // Refused as the plugin: its node fails with the API server's
        // words (which name the ServiceAccount) instead of retrying.
        Err(kube::Error::Api(s)) if s.code == 403 && acting.is_some() => {
            let why = format!(
                "plugin {}: the API server refused {kind} {name} to {}: {}",
                apply.plugin,
                acting.unwrap_or_default(),
                s.message
            );
            tracing::warn!(plugin = %apply.plugin, "{why}");
            let key = format!("{ns}/{api_version}/{kind}/{name}");
            ctx.children.deny(&key, why);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Aborts a child Workflow: it stops its own nodes (and its children),
/// and keeps its status for the user to read.
async fn abort_workflow(api: &Api<Workflow>, name: &str, ctx: &Context) {
    let patch = json!({"spec": {"abort": true}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => ctx.metrics.api_write("child"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => tracing::warn!(child = %name, "cannot abort child workflow: {e}"),
    }
}

async fn delete_child(ctx: &Context, ns: &str, d: &executor::Deletion) {
    let Ok(k) = ctx.children.ensure(&d.api_version, &d.kind).await else {
        return;
    };
    let Ok((client, _)) = ctx.child_client(&d.plugin) else {
        return;
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &k.resource);
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match api.delete(&d.name, &dp).await {
        Ok(_) => ctx.metrics.api_write("child"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => tracing::warn!(child = %d.name, "cannot delete child: {e}"),
    }
}

/// Records a core/v1 Event on the Workflow (one per round, not per node,
/// to keep API writes per node low).
async fn publish(ctx: &Context, wf: &Workflow, kind: &str, reason: &str, message: &str) {
    record_event(&ctx.client, &ctx.metrics, wf, kind, reason, message).await;
}

/// Records a core/v1 Event about any object (a Workflow, a plugin
/// ConfigMap). Events are best effort: a failure is logged, never returned.
pub async fn record_event<K: Resource<DynamicType = ()>>(
    client: &Client,
    metrics: &Metrics,
    obj: &K,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let name = obj.meta().name.clone().unwrap_or_default();
    let ev = CoreEvent {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns),
            ..Default::default()
        },
        involved_object: obj.object_ref(&()),
        reason: Some(reason.into()),
        message: Some(message.chars().take(1024).collect()),
        type_: Some(kind.into()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some(MANAGER.into()),
            host: None,
        }),
        reporting_component: Some(MANAGER.into()),
        reporting_instance: INSTANCE.get().cloned(),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ev).await {
        Ok(_) => metrics.api_write("event"),
        Err(e) => tracing::debug!("cannot record event: {e}"),
    }
}

fn error_policy(wf: Arc<Workflow>, err: &Error, ctx: Arc<Context>) -> Action {
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

/// A Workflow's key in [`backoff::Backoff`]: its uid, so a Workflow
/// deleted and created again under the same name starts afresh.
fn backoff_key(wf: &Workflow) -> String {
    wf.uid()
        .unwrap_or_else(|| format!("{}/{}", wf.namespace().unwrap_or_default(), wf.name_any()))
}

/// Runs the controller until `shutdown` resolves: Workflows in `namespace`
/// (all when `None`), children of every kind the plugins declare.
pub async fn run(
    ctx: Arc<Context>,
    wake: children::Wake,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let kinds: Vec<(String, String)> = ctx
        .registry
        .snapshot()
        .plugins()
        .values()
        .flat_map(|p| {
            p.manifest()
                .resources
                .iter()
                .map(|r| (r.api_version.clone(), r.kind.clone()))
        })
        .collect();
    // Optional operators' kinds whose CRDs are not installed are the
    // usual case (a dev cluster, a cluster without Spark): one info line,
    // not a warning per kind.
    let mut absent = Vec::new();
    for (api_version, kind) in kinds {
        match ctx.children.ensure(&api_version, &kind).await {
            Ok(_) => {}
            Err(e) if e.is::<children::NotInstalled>() => {
                absent.push(format!("{api_version}/{kind}"))
            }
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    if !absent.is_empty() {
        tracing::info!(
            "not watching kinds whose CRDs are not installed (watched once a workflow needs one): {}",
            absent.join(", ")
        );
    }
    let cache = ctx.cache.get_or_init(|| {
        cache::TaskCache::start(
            ctx.client.clone(),
            namespace.as_deref(),
            ctx.metrics.clone(),
        )
    });
    let collector = tokio::spawn({
        let cache = cache.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(300));
            loop {
                tick.tick().await;
                cache.collect().await;
            }
        }
    });
    let (store, workflows) = intake::workflows(ctx.clone(), namespace.as_deref());
    let concurrency = ctx.concurrency.load(std::sync::atomic::Ordering::Relaxed);
    let standard = &ctx.metrics.standard;
    standard.controller_started(WORKFLOW_CONTROLLER, concurrency);
    standard.queue_started(WORKFLOW_CONTROLLER);
    let queued = ctx.clone();
    let workflows = workflows.inspect(move |wf| {
        if let Ok(wf) = wf {
            queued.queue.add(&queue_key(wf));
        }
    });
    let queued = ctx.clone();
    let wake = wake.inspect(move |r| {
        let ns = r.namespace.as_deref().unwrap_or_default();
        queued.queue.add(&format!("{ns}/{}", r.name));
    });
    let controller = KubeController::for_stream(workflows, store)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency));
    let gauges = tokio::spawn(count_nodes(controller.store(), ctx.clone()));
    let resync = resyncs(controller.store(), ctx.clone());
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let workflows = controller
        .reconcile_on(wake)
        .reconcile_all_on(resync)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    futures::join!(workflows, cron::run(ctx.clone(), namespace, shutdown));
    gauges.abort();
    collector.abort();
    cache.stop();
    ctx.children.stop();
}

/// A tick every `--sync-period` (none when it is zero), each putting
/// every Workflow of the watch cache in the queue: controller-runtime's
/// periodic resync, the safety net for a change no event reported.
fn resyncs(
    store: kube::runtime::reflector::Store<Workflow>,
    ctx: Arc<Context>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    let period = ctx.sync_period();
    let ticks = match period {
        Some(p) => {
            let first = tokio::time::Instant::now() + p;
            futures::stream::StreamExt::boxed(tokio_stream::wrappers::IntervalStream::new(
                tokio::time::interval_at(first, p),
            ))
        }
        None => futures::stream::StreamExt::boxed(futures::stream::pending()),
    };
    ticks.map(move |_| {
        let all = store.state();
        tracing::debug!(workflows = all.len(), "periodic resync");
        for wf in all {
            ctx.queue.add(&queue_key(&wf));
        }
    })
}

/// Keeps the `active_workflows` and `nodes{phase}` gauges current from the
/// controller's watch cache (this shard's Workflows only): a scrape sees
/// at most two seconds' lag, and reconciles do no bookkeeping for it.
async fn count_nodes(store: kube::runtime::reflector::Store<Workflow>, ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let mut active = 0;
        let mut by_phase: BTreeMap<String, i64> = BTreeMap::new();
        for wf in store.state() {
            let Some(status) = wf.status.as_ref() else {
                continue;
            };
            if status.phase.is_terminal() || !ctx.owns(&wf) {
                continue;
            }
            active += 1;
            for n in status.nodes.values() {
                *by_phase.entry(format!("{:?}", n.phase)).or_default() += 1;
            }
        }
        ctx.metrics.set_active(active);
        ctx.metrics.set_nodes(&by_phase);
        ctx.queue.refresh();
    }
}

/// The object reference of a Workflow, for Events.
pub fn object_ref(wf: &Workflow) -> ObjectReference {
    wf.object_ref(&())
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
