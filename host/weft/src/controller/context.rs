//! What every reconcile shares: the clients, the plugin registry, the
//! children's watches, what this controller last wrote, and its settings.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::{Client, ResourceExt};
use weft_dag::{Compiled, WorkflowStatus, compile};
use weft_plugin::Registry;

use super::children::Children;
use super::impersonation::{Impersonation, PluginClients};
use super::shard::Shard;
use super::{Error, artifact_gc, backoff, cache, executor, features, shadow, webapi, workqueue};
use crate::api::Workflow;
use crate::events::WorkflowEvents;
use crate::metrics::Metrics;

/// How long a round's status may wait to be written with the next change
/// by default (`--status-hold`; gate `CoalesceStatusWrites`): a round whose
/// changes are minor (a running task's sub-phase or message, an array
/// item's progress) or that only moved nodes forward (started them by
/// applying their children, or saw them succeed while the workflow runs
/// on). A task that starts and ends within this costs one status write
/// instead of two to four. The next round starts from the held status; a
/// restart loses it, and the round then finds the same children (their
/// names come from the workflow, node and attempt) and applies them
/// unchanged, so nothing is lost or made twice, only shown up to this much
/// later.
pub const STATUS_HOLD: Duration = Duration::from_secs(2);

/// A status a round computed and has not written yet ([`STATUS_HOLD`]).
struct Held {
    /// When the first unwritten change was held.
    since: Instant,
    /// The status the next round starts from.
    status: WorkflowStatus,
}

/// How a controller behaves: `weft controller`'s flags, in one value that
/// [`Context::new`] takes (each leadership term builds its context from
/// the same settings).
#[derive(Clone)]
pub struct Settings {
    /// How long a node waits for its plugin to finish loading before it
    /// fails (`--plugin-wait-timeout`).
    pub plugin_wait: Duration,
    /// How deep sub-workflows and dynamic nodes may nest
    /// (`--max-workflow-depth`).
    pub max_depth: u32,
    /// How long finished Workflows without a `ttlStrategy` are kept
    /// (`--default-ttl-after-completion`; `None`: forever).
    pub default_ttl: Option<Duration>,
    /// Which Events Workflows get (`--workflow-events`).
    pub events: WorkflowEvents,
    /// How many Workflows are reconciled at once (`--concurrent-reconciles`,
    /// kube-runtime's controller concurrency; 0: no limit). A Workflow is
    /// never reconciled twice at once either way.
    pub concurrency: u16,
    /// How often every Workflow is reconciled without an event
    /// (`--sync-period`; zero or `None`: never).
    pub sync_period: Option<Duration>,
    /// How long a round's status may wait to be written (`--status-hold`,
    /// [`STATUS_HOLD`]).
    pub status_hold: Duration,
    /// `--feature-gates`.
    pub gates: features::FeatureGates,
    /// Children written as their plugin's ServiceAccount, and web-API
    /// tasks' Secrets read so (`--impersonate-plugins`; `None`: as the
    /// controller itself).
    pub impersonation: Option<Arc<Impersonation>>,
    /// The data plane: where tasks' artifacts go (`--artifact-repository`;
    /// `None`: a task that declares artifacts fails, saying so).
    pub artifacts: Option<Arc<crate::pod_io::PodIo>>,
    /// Execution history: events and the archive (`--history-db`; `None`:
    /// no history, and no outbox in statuses).
    pub history: Option<Arc<crate::history::History>>,
    /// `--parallelism`, `--namespace-parallelism` (running workflows).
    pub limits: crate::sync::Limits,
    /// Where the controller lends its Workflow cache while it runs (the
    /// hot loader's pins read it): one slot across leadership terms.
    pub live: Arc<crate::live::LiveWorkflows>,
}

impl Default for Settings {
    /// `weft controller`'s defaults.
    fn default() -> Self {
        Settings {
            plugin_wait: executor::DEFAULT_PLUGIN_WAIT,
            max_depth: executor::DEFAULT_MAX_DEPTH,
            default_ttl: None,
            events: WorkflowEvents::default(),
            concurrency: 0,
            sync_period: None,
            status_hold: STATUS_HOLD,
            gates: features::FeatureGates::default(),
            impersonation: None,
            artifacts: None,
            history: None,
            limits: Default::default(),
            live: crate::live::LiveWorkflows::new(),
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    pub(super) client: Client,
    pub(super) registry: Arc<Registry>,
    pub(super) children: Arc<Children>,
    /// Web-API task attempts in flight.
    pub(super) webapi: Arc<webapi::WebApiTasks>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The shard this controller reconciles (all Workflows when `None`).
    pub(super) shard: Option<Shard>,
    /// Compiled specs by (uid, generation).
    compiled: Mutex<HashMap<(String, i64), Arc<Compiled>>>,
    /// The last status this controller wrote, by uid, until the watch
    /// cache holds it.
    pub(super) written: super::written::Written,
    /// Watch events that would only echo a waiting status this controller
    /// wrote (`intake::Echoes`): they cost no reconcile.
    pub(super) echoes: super::intake::Echoes,
    /// Whether this controller last added (true) or removed (false) its
    /// finalizer, by uid: the same reasoning as `written`.
    pub(super) finalized: Mutex<HashMap<String, bool>>,
    /// Copies calls to shadow candidates.
    pub(super) shadow: Arc<shadow::Shadow>,
    /// Who a plugin's children are written as (and its task Secrets read).
    plugin_clients: Arc<PluginClients>,
    /// The task output cache (started with the controller).
    pub(super) cache: OnceLock<Arc<cache::TaskCache>>,
    /// The status a Workflow's rounds hold unwritten, by uid
    /// ([`STATUS_HOLD`]).
    held: Mutex<HashMap<String, Held>>,
    /// [`Settings::status_hold`], in milliseconds (a test may change it).
    status_hold: AtomicU64,
    /// How long status writes take: a hold is stretched while they are
    /// slow ([`super::write_pace`]).
    pub(super) write_pace: super::write_pace::WritePace,
    /// When failed reconciles run again (controller-runtime's rate limiter).
    pub(super) backoff: backoff::Backoff,
    /// The work queue's figures (`workqueue_*`).
    pub(super) queue: workqueue::WorkQueue,
    /// The settings a test may change while the controller runs.
    max_depth: AtomicU32,
    events: Mutex<WorkflowEvents>,
    concurrency: AtomicU16,
    /// The workers reconciles take ([`Settings::concurrency`] of them;
    /// unset: no limit), made when the controller starts.
    pub(super) workers: OnceLock<Arc<super::workers::Workers>>,
    /// The other settings, fixed at start.
    plugin_wait: Duration,
    default_ttl: AtomicU64,
    sync_period: Option<Duration>,
    gates: features::FeatureGates,
    /// The data plane (set at start, or by `weft dev` and tests).
    artifacts: std::sync::RwLock<Option<Arc<crate::pod_io::PodIo>>>,
    /// Namespaces' own artifact repositories.
    repositories: super::repositories::Repositories,
    /// What artifact GC remembers (its finalizer, finishes collected,
    /// the store's failures).
    pub(super) gc: artifact_gc::Collector,
    /// Execution history, when there is a database.
    history: std::sync::RwLock<Option<Arc<crate::history::History>>>,
    /// Mutexes, semaphores and parallelism limits (started with the
    /// controller, `run.rs`).
    pub(super) locks: OnceLock<Arc<crate::sync::Locks>>,
    /// The controller's limits on running workflows.
    pub(super) parallelism: Arc<crate::sync::Parallelism>,
    /// Workflows a lock was just handed to.
    pub(super) promoted: Arc<super::sync::Promoted>,
    /// Where this controller lends its Workflow cache.
    pub live: Arc<crate::live::LiveWorkflows>,
}

impl Context {
    /// A context for a controller talking to `client` with plugins from
    /// `registry`, reconciling `shard`'s Workflows (all when `None`),
    /// behaving as `settings` say.
    pub fn new(
        client: Client,
        registry: Arc<Registry>,
        children: Arc<Children>,
        metrics: Arc<Metrics>,
        shard: Option<Shard>,
        settings: Settings,
    ) -> Arc<Self> {
        let shadow = shadow::Shadow::start(registry.clone(), metrics.clone());
        let queue = workqueue::WorkQueue::new(metrics.clone());
        let plugin_clients = Arc::new(PluginClients::new(client.clone()));
        if let Some(i) = settings.impersonation {
            plugin_clients.set(i);
        }
        let webapi =
            webapi::WebApiTasks::new(children.clone(), metrics.clone(), plugin_clients.clone());
        let repositories = super::repositories::Repositories::new(client.clone());
        Arc::new(Context {
            queue,
            client,
            registry,
            webapi,
            plugin_clients,
            children,
            metrics,
            shadow,
            shard,
            compiled: Mutex::new(HashMap::new()),
            backoff: backoff::Backoff::default(),
            written: Default::default(),
            echoes: super::intake::Echoes::default(),
            finalized: Mutex::new(HashMap::new()),
            cache: OnceLock::new(),
            held: Mutex::new(HashMap::new()),
            status_hold: (settings.status_hold.as_millis() as u64).into(),
            write_pace: Default::default(),
            max_depth: settings.max_depth.into(),
            events: Mutex::new(settings.events),
            concurrency: settings.concurrency.into(),
            workers: OnceLock::new(),
            plugin_wait: settings.plugin_wait,
            default_ttl: settings
                .default_ttl
                .map_or(0, |d| d.as_secs().max(1))
                .into(),
            sync_period: settings.sync_period.filter(|p| !p.is_zero()),
            gates: settings.gates,
            artifacts: settings.artifacts.into(),
            repositories,
            gc: artifact_gc::Collector::default(),
            history: settings.history.into(),
            locks: OnceLock::new(),
            parallelism: Arc::new(crate::sync::Parallelism::new(settings.limits)),
            promoted: Default::default(),
            live: settings.live,
        })
    }

    /// The data plane of `namespace`'s workflows: its own repository, else
    /// the controller's; an error names a namespace's bad ConfigMap.
    pub(super) async fn artifacts_for(&self, namespace: &str) -> super::repositories::Found {
        self.repositories
            .for_namespace(namespace, self.artifacts())
            .await
    }

    /// Records history in `h` from the next round on (`weft dev`, `weft
    /// run`; a controller's comes with its settings).
    pub fn set_history(&self, h: Arc<crate::history::History>) {
        *self.history.write().unwrap_or_else(|e| e.into_inner()) = Some(h);
    }

    /// Records no history from the next round on: for benches that
    /// alternate runs with and without it on one controller (a finished
    /// Workflow's TTL deletion then no longer waits for its archive).
    pub fn stop_history(&self) {
        *self.history.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The locks (`weft sync list`, the admin API read them).
    pub fn locks(&self) -> Option<&Arc<crate::sync::Locks>> {
        self.locks.get()
    }

    /// The execution history, when there is one.
    pub fn history(&self) -> Option<Arc<crate::history::History>> {
        self.history
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Moves tasks' artifacts through `io` from the next round on.
    pub fn set_artifacts(&self, io: Arc<crate::pod_io::PodIo>) {
        *self.artifacts.write().unwrap_or_else(|e| e.into_inner()) = Some(io);
    }

    /// The data plane, when there is one.
    pub fn artifacts(&self) -> Option<Arc<crate::pod_io::PodIo>> {
        self.artifacts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes [`Settings::concurrency`] of a controller not yet running.
    pub fn set_concurrency(&self, n: u16) {
        self.concurrency.store(n, Ordering::Relaxed);
    }

    /// Changes [`Settings::status_hold`] of a running controller.
    pub fn set_status_hold(&self, hold: Duration) {
        self.status_hold
            .store(hold.as_millis() as u64, Ordering::Relaxed);
    }

    /// Changes [`Settings::max_depth`] of a running controller.
    pub fn set_max_depth(&self, depth: u32) {
        self.max_depth.store(depth, Ordering::Relaxed);
    }

    /// Changes [`Settings::events`] of a running controller.
    pub fn set_workflow_events(&self, events: WorkflowEvents) {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = events;
    }

    pub(super) fn concurrency(&self) -> u16 {
        self.concurrency.load(Ordering::Relaxed)
    }

    pub(super) fn max_depth(&self) -> u32 {
        self.max_depth.load(Ordering::Relaxed)
    }

    pub(super) fn plugin_wait(&self) -> Duration {
        self.plugin_wait
    }

    pub(super) fn sync_period(&self) -> Option<Duration> {
        self.sync_period
    }

    pub(super) fn all_events(&self) -> bool {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) == WorkflowEvents::All
    }

    pub(super) fn default_ttl(&self) -> Option<Duration> {
        match self.default_ttl.load(Ordering::Relaxed) {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        }
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
        if let Some(locks) = self.locks.get() {
            locks.stop();
        }
    }

    /// Forgets a Workflow that is gone (a watch Delete): what this
    /// controller remembered of it is bounded by the live Workflows.
    pub fn forget(&self, uid: &str) {
        self.written.forget(uid);
        self.finalized
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.echoes.forget(uid);
        self.compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(u, _), _| u != uid);
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.gc.forget(uid);
        if let Some(h) = self.history() {
            h.forget(uid);
        }
    }

    /// Whether a round's status waits (for at most the time returned,
    /// held as the next round's start), or is written now: the hold is
    /// over, or there is nothing that may wait (`None`: any hold ends).
    pub(super) fn hold_status(
        &self,
        uid: &str,
        status: Option<&WorkflowStatus>,
    ) -> Option<Duration> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let hold = Duration::from_millis(self.status_hold.load(Ordering::Relaxed));
        let hold = self.write_pace.stretch(hold);
        let status = status.filter(|_| self.gates.enabled("CoalesceStatusWrites"));
        let Some(status) = status.filter(|_| !hold.is_zero()) else {
            held.remove(uid);
            return None;
        };
        let since = held.get(uid).map_or_else(Instant::now, |h| h.since);
        let left = hold.checked_sub(since.elapsed());
        match left {
            Some(_) => held.insert(
                uid.to_string(),
                Held {
                    since,
                    status: status.clone(),
                },
            ),
            None => held.remove(uid),
        };
        left
    }

    /// Whether a Workflow's last round held a status unwritten.
    pub(super) fn has_held(&self, uid: &str) -> bool {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.contains_key(uid)
    }

    /// The status a Workflow's last round held unwritten, if any.
    pub(super) fn held_status(&self, uid: &str) -> Option<WorkflowStatus> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(uid).map(|h| h.status.clone())
    }

    /// Whether `--feature-gates` turned `name` on.
    pub(super) fn gate(&self, name: &str) -> bool {
        self.gates.enabled(name)
    }

    /// The client that writes `plugin`'s children, and the user it acts as
    /// (None: the controller itself).
    pub(super) fn child_client(&self, plugin: &str) -> Result<(Client, Option<String>), Error> {
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

    /// The compiled form of `spec`, once per (uid, generation).
    pub(super) fn compiled(
        &self,
        wf: &Workflow,
        spec: &weft_dag::WorkflowSpec,
    ) -> Result<Arc<Compiled>, String> {
        let key = (
            wf.uid().unwrap_or_default(),
            wf.metadata.generation.unwrap_or(0),
        );
        let cached = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cached.get(&key) {
            return Ok(c.clone());
        }
        drop(cached);
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
