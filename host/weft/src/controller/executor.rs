//! The bridge from the scheduler to plugins and Kubernetes: asks the task
//! plugin for the child resource, looks the child up in the watch cache,
//! and asks the plugin what its state means.
//!
//! It runs inside the synchronous scheduler round (plugin calls are
//! microseconds), so it only records the writes; the controller makes them
//! after the round. Child names are deterministic, and children are
//! applied with server-side apply, so repeating a round after a crash finds
//! the same child instead of creating a second one.
//!
//! A child missing from the watch cache (create it, or say why not) is
//! `create.rs`; a task's data plane (its artifacts and archived logs) is
//! `io.rs`.

mod create;
mod io;

use std::sync::Arc;

use crate::pod_io::PodIo;
use crate::pod_secrets;
use serde_json::{Map, Value};
use weft_dag::TaskSpec;
use weft_dag::cache::CacheEntry;
use weft_dag::schedule::LockState;
use weft_dag::schedule::{
    CacheRequest, Executor, Readiness, TaskObservation, TaskRequest, TaskState, WorkflowRequest,
};
use weft_dag::spec::sync::LockRef;
use weft_dag::status::ResourceRef;
use weft_plugin::{CallError, Digest, FailureKind, Registry, TaskContext, TaskPlugin};

use super::children::Children;
use super::observe::{capitalise, child_observation, observation, plugin_ref, resource_ref};
use super::quota;
use super::shadow::{Call, Shadow};
use crate::metrics::Metrics;

/// How long a node waits for a plugin that is being loaded, unless the
/// controller is told otherwise: a Python or JavaScript component takes up
/// to half a minute to compile on a small machine.
pub const DEFAULT_PLUGIN_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// A child to delete after the round.
#[derive(Debug, Clone, PartialEq)]
pub struct Deletion {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// name.
    pub name: String,
    /// The plugin that built it (deleted as that plugin, when impersonating).
    pub plugin: String,
}

/// A child to apply (server-side) after the round.
#[derive(Debug, Clone, PartialEq)]
pub struct Apply {
    /// The plugin that built it (applied as that plugin, when impersonating).
    pub plugin: String,
    /// The object.
    pub object: Value,
}

/// One round's executor for one Workflow.
pub struct PluginExecutor {
    registry: Arc<Registry>,
    children: Arc<Children>,
    metrics: Arc<Metrics>,
    workflow: String,
    uid: String,
    namespace: String,
    /// Children to apply (server-side) after the round.
    pub applies: Vec<Apply>,
    /// Children to delete after the round.
    pub deletions: Vec<Deletion>,
    /// Kinds the plugins built that are not watched yet.
    pub unwatched: Vec<(String, String)>,
    /// Plugin versions the workflow already used: it keeps them (pinning).
    pins: Vec<Digest>,
    /// How long a node waits for its plugin to finish loading.
    plugin_wait: std::time::Duration,
    /// Where calls to a plugin with a shadow candidate are copied.
    shadow: Option<Arc<Shadow>>,
    /// Child Workflows to abort after the round (`spec.abort` patched).
    pub workflow_aborts: Vec<String>,
    /// How deep this workflow is nested (0: launched by a user).
    depth: u32,
    /// The deepest a child may be (`--max-workflow-depth`).
    max_depth: u32,
    /// The task cache, and whether this workflow may read it (a resubmit
    /// without `--memoized` may not).
    cache: Option<(Arc<super::cache::TaskCache>, bool)>,
    /// Cache entries to store after the round.
    pub cache_writes: Vec<super::cache::CacheWrite>,
    /// Whether this round observed, started or aborted a web-API task:
    /// its remote job's identity lives only in the status, so that status
    /// is written at once, never held (`STATUS_HOLD`).
    pub webapi_touched: bool,
    /// Web-API attempts in flight (none served without it).
    webapi: Option<Arc<super::webapi::WebApiTasks>>,
    /// The data plane (no artifacts without it), or why the namespace's
    /// cannot be used.
    io: Result<Option<Arc<PodIo>>, String>,
    /// The workflow's `archiveLogs` (else the data plane's default).
    archive_logs: Option<bool>,
    /// The earliest end of a quota wait of this round's nodes.
    pub wake_at: Option<std::time::Instant>,
    /// The locks (`synchronization`), and the resource pools.
    locks: Option<Arc<crate::sync::Locks>>,
    pools: Option<Arc<crate::sync::Parallelism>>,
    /// The nodes that asked for their locks this round, and the locks.
    pub lock_asks: Vec<(String, Vec<LockRef>)>,
}

/// How deep a Workflow is nested: its label, set on the children of
/// sub-workflow and dynamic nodes.
pub const DEPTH_LABEL: &str = "weft.dev/depth";

/// Nesting allowed unless the controller is told otherwise.
pub const DEFAULT_MAX_DEPTH: u32 = 10;

impl PluginExecutor {
    /// An executor for one round of one Workflow.
    pub fn new(
        registry: Arc<Registry>,
        children: Arc<Children>,
        metrics: Arc<Metrics>,
        workflow: &str,
        uid: &str,
        namespace: &str,
    ) -> Self {
        PluginExecutor {
            registry,
            children,
            metrics,
            workflow: workflow.into(),
            uid: uid.into(),
            namespace: namespace.into(),
            applies: Vec::new(),
            deletions: Vec::new(),
            unwatched: Vec::new(),
            wake_at: None,
            locks: None,
            pools: None,
            lock_asks: Vec::new(),
            pins: Vec::new(),
            plugin_wait: DEFAULT_PLUGIN_WAIT,
            shadow: None,
            workflow_aborts: Vec::new(),
            depth: 0,
            max_depth: DEFAULT_MAX_DEPTH,
            cache: None,
            cache_writes: Vec::new(),
            webapi: None,
            webapi_touched: false,
            io: Ok(None),
            archive_logs: None,
        }
    }

    /// The workflow's `archiveLogs`.
    pub fn with_archive_logs(mut self, archive: Option<bool>) -> Self {
        self.archive_logs = archive;
        self
    }

    /// Move tasks' artifacts through `io` (an error: the namespace's
    /// repository is unusable, and tasks that need one fail saying why).
    pub fn with_io(mut self, io: Result<Option<Arc<PodIo>>, String>) -> Self {
        self.io = io;
        self
    }

    /// Serve web-API task types through `tasks`.
    pub fn with_webapi(mut self, tasks: Arc<super::webapi::WebApiTasks>) -> Self {
        self.webapi = Some(tasks);
        self
    }

    /// The web-API plugin of a task, if a web-API plugin serves its type.
    fn webapi_plugin(
        &self,
        req: &TaskRequest<'_>,
    ) -> Option<(
        Arc<super::webapi::WebApiTasks>,
        Arc<weft_plugin::WebApiPlugin>,
    )> {
        let tasks = self.webapi.clone()?;
        let own = req.plugin.and_then(|p| Digest::parse(&p.digest));
        let pins: Vec<Digest> = own.into_iter().chain(self.pins.iter().copied()).collect();
        let plugin = self
            .registry
            .webapi_plugin_for(&req.task.task_type, &pins)?;
        Some((tasks, plugin))
    }

    /// A web-API task's attempt: the remote job's state, as last polled.
    fn webapi_task(
        &mut self,
        req: &TaskRequest<'_>,
        tasks: &Arc<super::webapi::WebApiTasks>,
        plugin: &Arc<weft_plugin::WebApiPlugin>,
    ) -> TaskObservation {
        if let Some(why) = pod_only_secret(req, plugin.name()) {
            let mut obs = TaskObservation::failed(false, false, "SecretsNotMountable", &why);
            obs.plugin = Some(super::webapi::plugin_ref(plugin));
            return obs;
        }
        tasks.observe(self.attempt(req, plugin))
    }

    /// A web-API task's attempt as [`super::webapi::WebApiTasks`] takes it.
    fn attempt<'a>(
        &'a self,
        req: &'a TaskRequest<'_>,
        plugin: &'a Arc<weft_plugin::WebApiPlugin>,
    ) -> super::webapi::Attempt<'a> {
        super::webapi::Attempt {
            plugin,
            ctx: self.context(req),
            workflow: &self.workflow,
            meta: req.resource.and_then(|r| r.meta.as_deref()),
            secrets: &req.task.secrets,
        }
    }

    /// Serve cached task nodes from `cache` (`read`: look entries up, not
    /// only store them).
    pub fn with_cache(mut self, cache: Option<Arc<super::cache::TaskCache>>, read: bool) -> Self {
        self.cache = cache.map(|c| (c, read));
        self
    }

    /// The cache key of a cached node: with `includePlugin`, the digest of
    /// the plugin that served it (on store) or would serve it (on look-up).
    fn cache_key(&self, req: &CacheRequest<'_>) -> String {
        let digest = match (req.cache.include_plugin, req.plugin) {
            (false, _) => None,
            (true, Some(p)) => Some(p.digest.clone()),
            (true, None) => self
                .registry
                .task_plugin_for(&req.task.task_type, &self.pins, &self.uid)
                .ok()
                .map(|p| plugin_ref(&p).digest),
        };
        weft_dag::cache::key(
            req.task,
            req.inputs,
            req.artifacts,
            req.cache,
            digest.as_deref(),
        )
    }

    /// This workflow's nesting depth and the deepest a child may be.
    pub fn with_depth(mut self, depth: u32, max_depth: u32) -> Self {
        self.depth = depth;
        self.max_depth = max_depth;
        self
    }

    /// The child Workflow of an attempt: owned by this one (its changes
    /// wake this one; deleting this one deletes it), one level deeper.
    fn child_workflow(&self, name: &str, req: &WorkflowRequest<'_>) -> Value {
        serde_json::json!({
            "apiVersion": crate::api::API_VERSION,
            "kind": "Workflow",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/managed-by": "weft",
                    "weft.dev/workflow": self.workflow,
                    "weft.dev/node": req.node_id,
                    DEPTH_LABEL: (self.depth + 1).to_string(),
                },
                "ownerReferences": [{
                    "apiVersion": crate::api::API_VERSION,
                    "kind": "Workflow",
                    "name": self.workflow,
                    "uid": self.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": req.spec,
        })
    }

    /// Copy calls to shadow candidates through `shadow`.
    pub fn with_shadow(mut self, shadow: Arc<Shadow>) -> Self {
        self.shadow = Some(shadow);
        self
    }

    /// Copies a call the serving version answered to its shadow, if it
    /// has one (`call` makes the copy: nothing is cloned otherwise).
    fn shadow(&self, plugin: &TaskPlugin, ctx: &TaskContext, call: impl FnOnce() -> (Call, Value)) {
        if let Some(s) = &self.shadow {
            s.offer(&self.registry, plugin, ctx, call);
        }
    }

    /// How long a node may wait for its plugin to finish loading.
    pub fn with_plugin_wait(mut self, wait: std::time::Duration) -> Self {
        self.plugin_wait = wait;
        self
    }

    /// Answer nodes' `synchronization` from these locks.
    pub fn with_locks(
        mut self,
        locks: Option<Arc<crate::sync::Locks>>,
        pools: Arc<crate::sync::Parallelism>,
    ) -> Self {
        self.locks = locks;
        self.pools = Some(pools);
        self
    }

    /// Pin the workflow to the plugin versions its nodes already used.
    pub fn with_pins(mut self, pins: Vec<Digest>) -> Self {
        self.pins = pins;
        self
    }

    fn context(&self, req: &TaskRequest<'_>) -> TaskContext {
        let node = Self::node_name(req);
        TaskContext::for_attempt(
            &self.workflow,
            &self.uid,
            &self.namespace,
            &node,
            req.attempt,
            &req.task.task_type,
            Value::Object(req.task.config.clone()),
            Value::Object(req.inputs.clone()),
        )
    }

    fn plugin(&self, req: &TaskRequest<'_>) -> Result<Arc<TaskPlugin>, Box<TaskObservation>> {
        // The node's own version first, then the workflow's; a new
        // workflow may be a canary's.
        let own = req.plugin.and_then(|p| Digest::parse(&p.digest));
        let pins: Vec<Digest> = own.into_iter().chain(self.pins.iter().copied()).collect();
        let found = self
            .registry
            .task_plugin_for(&req.task.task_type, &pins, &self.uid);
        found.map_err(|e| {
            Box::new(TaskObservation::failed(
                false,
                true,
                "NoPlugin",
                &e.to_string(),
            ))
        })
    }

    fn call_failed(&self, plugin: &TaskPlugin, call: &str, e: &CallError) -> TaskObservation {
        self.metrics
            .plugin_failure(plugin.name(), call, e.metric_label());
        let mut obs = TaskObservation::failed(
            e.retryable(),
            e.kind() == FailureKind::System,
            &format!("Plugin{}", capitalise(e.metric_label())),
            &e.to_string(),
        );
        obs.plugin = Some(plugin_ref(plugin));
        obs
    }

    /// Builds the child of an attempt (the plugin is deterministic).
    fn build(&self, plugin: &TaskPlugin, ctx: &TaskContext) -> Result<Value, Box<TaskObservation>> {
        let _span = tracing::info_span!(
            "plugin.call",
            plugin = plugin.name(),
            call = "build-resource"
        )
        .entered();
        let start = std::time::Instant::now();
        let result = plugin.build_resource(ctx);
        self.registry.record_call(plugin, result.as_ref().err());
        self.metrics
            .plugin_call(plugin.name(), "build-resource", start.elapsed());
        result
            .map(|(v, stats)| {
                self.metrics.plugin_memory(plugin.name(), stats.memory_peak);
                self.shadow(plugin, ctx, || (Call::Build, v.clone()));
                v
            })
            .map_err(|e| Box::new(self.call_failed(plugin, "build-resource", &e)))
    }
}

impl Executor for PluginExecutor {
    fn pools(&self, task: &TaskSpec) -> Vec<LockRef> {
        let pool = self.pools.as_ref().and_then(|p| p.pool(&task.task_type));
        pool.into_iter().collect()
    }

    fn acquire(&mut self, node: &str, locks: &[LockRef]) -> LockState {
        self.lock_asks.push((node.to_string(), locks.to_vec()));
        match &self.locks {
            Some(l) => l.state(&self.namespace, &self.uid, Some(node), locks),
            None => LockState::Held,
        }
    }

    fn serves(&self, task_type: &str) -> bool {
        self.registry
            .snapshot()
            .task_types()
            .any(|t| t == task_type)
            || self.registry.loading(task_type).is_some()
    }

    fn workflow(&mut self, req: &WorkflowRequest<'_>) -> TaskObservation {
        let name = weft_plugin::resource_name(&self.workflow, req.node_id, req.attempt);
        let r = ResourceRef {
            api_version: crate::api::API_VERSION.into(),
            kind: "Workflow".into(),
            name: name.clone(),
            meta: None,
        };
        let with_ref = |mut obs: TaskObservation| {
            obs.resource = Some(r.clone());
            obs
        };
        if self.depth + 1 > self.max_depth {
            let why = format!(
                "a child workflow here would be nested {} deep, more than the limit of {} (--max-workflow-depth)",
                self.depth + 1,
                self.max_depth
            );
            return TaskObservation::failed(false, false, "MaxDepthExceeded", &why);
        }
        let key = format!("{}/{}/Workflow/{name}", self.namespace, r.api_version);
        let observed = self
            .children
            .get(&r.api_version, "Workflow", &self.namespace, &name);
        let Some(child) = observed else {
            if self.children.was_seen(&key) {
                self.children.forget(&key);
                let why = format!("workflow {name} was deleted before it finished");
                return with_ref(TaskObservation::failed(
                    true,
                    true,
                    "System:ResourceDeleted",
                    &why,
                ));
            }
            if self.children.kind(&r.api_version, "Workflow").is_none() {
                self.unwatched
                    .push((r.api_version.clone(), "Workflow".into()));
            }
            self.applies.push(Apply {
                plugin: String::new(),
                object: self.child_workflow(&name, req),
            });
            return with_ref(TaskObservation::in_progress("submitted"));
        };
        self.children.seen(&key);
        let obs = child_observation(&name, &child);
        if obs.state != TaskState::InProgress {
            self.children.forget(&key);
        }
        with_ref(obs)
    }

    fn cache_lookup(&mut self, req: &CacheRequest<'_>) -> Option<CacheEntry> {
        let (cache, true) = self.cache.as_ref()? else {
            return None;
        };
        let key = self.cache_key(req);
        let task_type = &req.task.task_type;
        cache.lookup(
            &self.namespace,
            task_type,
            &key,
            req.cache.max_age(),
            req.now,
        )
    }

    fn cache_store(
        &mut self,
        req: &CacheRequest<'_>,
        outputs: &Map<String, Value>,
        outputs_ref: Option<&weft_dag::artifacts::ArtifactRef>,
    ) {
        if self.cache.is_none() {
            return;
        }
        let entry = CacheEntry {
            task_type: req.task.task_type.clone(),
            version: req.cache.version.clone(),
            workflow: self.workflow.clone(),
            node: req.node_id.to_string(),
            created_at: weft_dag::status::timestamp(req.now),
            max_age: req.cache.max_age.clone(),
            outputs: outputs.clone(),
            outputs_ref: outputs_ref.cloned(),
        };
        self.cache_writes.push(super::cache::CacheWrite {
            task_type: req.task.task_type.clone(),
            key: self.cache_key(req),
            entry,
        });
    }

    fn offloaded(
        &self,
        r: &weft_dag::artifacts::ArtifactRef,
    ) -> Result<Map<String, Value>, String> {
        let io = self.io.as_ref().ok().and_then(Option::as_ref);
        let io = io.ok_or("this controller has no artifact repository")?;
        io.load_outputs(r).map(|m| (*m).clone())
    }

    fn abort_workflow(&mut self, req: &WorkflowRequest<'_>) {
        let name = match req.resource {
            Some(r) => r.name.clone(),
            None => weft_plugin::resource_name(&self.workflow, req.node_id, req.attempt),
        };
        self.workflow_aborts.push(name);
    }

    /// A task waits while a version of the plugin for its type is being
    /// compiled: a workflow created right after `weft plugin push` runs on
    /// what was pushed, not on nothing (or on the version being replaced).
    /// A workflow already pinned to a version that serves the type keeps it.
    fn ready(&mut self, task: &TaskSpec) -> Readiness {
        let Some(plugin) = self.registry.loading(&task.task_type) else {
            return Readiness::Ready;
        };
        let snap = self.registry.snapshot();
        let pinned = self.pins.iter().any(|d| match snap.version(*d) {
            Some(weft_plugin::Plugin::Task(p)) => {
                snap.pinning(p.name()) == weft_plugin::Pinning::Pinned
                    && p.manifest().task_types.contains(&task.task_type)
            }
            _ => false,
        });
        if pinned {
            return Readiness::Ready;
        }
        Readiness::Wait {
            reason: "WaitingForPlugin".into(),
            message: format!(
                "waiting for plugin {plugin} to finish loading a version that serves task type {:?}",
                task.task_type
            ),
            timeout: self.plugin_wait,
        }
    }

    fn task(&mut self, req: &TaskRequest<'_>) -> TaskObservation {
        // Log lines of this node (plugin logs included) carry its id.
        let _node = tracing::info_span!(
            "node",
            node = req.node_id,
            item = req.item,
            attempt = req.attempt
        )
        .entered();
        if let Some((tasks, plugin)) = self.webapi_plugin(req) {
            self.webapi_touched = true;
            return self.webapi_task(req, &tasks, &plugin);
        }
        let plugin = match self.plugin(req) {
            Ok(p) => p,
            Err(obs) => return *obs,
        };
        let ctx = self.context(req);
        // After the first round the child's identity is in the node status:
        // observe it without asking the plugin to build it again, and build
        // only when it must be (re)created.
        let (r, desired) = match req.resource {
            Some(r) => (r.clone(), None),
            None => match self.build(&plugin, &ctx) {
                Ok(v) => (resource_ref(&v), Some(v)),
                Err(obs) => return *obs,
            },
        };
        let observed = self
            .children
            .get(&r.api_version, &r.kind, &self.namespace, &r.name);
        let key = format!("{}/{}/{}/{}", self.namespace, r.api_version, r.kind, r.name);
        let Some(observed) = observed else {
            return self.missing_child(req, &plugin, &ctx, r, desired, &key);
        };
        self.children.seen(&key);
        let waited = self.children.waits.clear(&key);
        let observed = observed.to_value();
        if let Some(why) = pod_secrets::missing(&observed) {
            // Running without them would fail later and less clearly.
            self.children.forget(&key);
            let mut obs = TaskObservation::failed(false, true, "SecretsNotMounted", &why);
            obs.resource = Some(r);
            obs.plugin = Some(plugin_ref(&plugin));
            return obs;
        }
        let call_span = tracing::info_span!(
            "plugin.call",
            plugin = plugin.name(),
            call = "get-task-phase"
        )
        .entered();
        let start = std::time::Instant::now();
        let result = plugin.get_task_phase(&ctx, &observed);
        drop(call_span);
        self.registry.record_call(&plugin, result.as_ref().err());
        self.metrics
            .plugin_call(plugin.name(), "get-task-phase", start.elapsed());
        let mut obs = match result {
            Err(e) => self.call_failed(&plugin, "get-task-phase", &e),
            Ok((info, stats)) => {
                self.metrics.plugin_memory(plugin.name(), stats.memory_peak);
                self.shadow(&plugin, &ctx, || {
                    let served = serde_json::to_value(&info).unwrap_or(Value::Null);
                    (Call::Phase(observed.clone()), served)
                });
                observation(info)
            }
        };
        if req.task.has_io() {
            self.io_verdict(req, &observed, &mut obs);
        }
        if obs.state != TaskState::InProgress {
            self.children.forget(&key);
        }
        if let Some(w) = waited
            && obs.message.is_none()
        {
            obs.message = Some(quota::created_after(&w));
        }
        obs.resource = Some(r);
        obs.plugin = Some(plugin_ref(&plugin));
        obs
    }

    fn abort(&mut self, req: &TaskRequest<'_>) {
        if let Some((tasks, plugin)) = self.webapi_plugin(req) {
            self.webapi_touched = true;
            tasks.abort(self.attempt(req, &plugin));
            return;
        }
        let Ok(plugin) = self.plugin(req) else { return };
        if plugin.properties().abort == weft_plugin::plugin::AbortBehaviour::Leave {
            return;
        }
        let ctx = self.context(req);
        let r = match req.resource {
            Some(r) => r.clone(),
            None => match self.build(&plugin, &ctx) {
                Ok(v) => resource_ref(&v),
                Err(_) => return,
            },
        };
        self.deletions.push(Deletion {
            api_version: r.api_version,
            kind: r.kind,
            name: r.name,
            plugin: plugin.name().to_string(),
        });
    }
}

/// Why a web-API task cannot have one of its secrets: `env` and `file`
/// mount into a pod's containers, and a web-API task has none; its
/// secrets are request headers (`mountAs: header`).
fn pod_only_secret(req: &TaskRequest<'_>, plugin: &str) -> Option<String> {
    let (i, s) = req
        .task
        .secrets
        .iter()
        .enumerate()
        .find(|(_, s)| s.mount_as != weft_dag::spec::MountAs::Header)?;
    let how = if s.mount_as == weft_dag::spec::MountAs::File {
        "file"
    } else {
        "env"
    };
    Some(format!(
        "task.secrets[{i}] ({}/{}): mountAs: {how} mounts into a pod, and task type {:?} runs in web-API plugin {plugin}, which sends a task's secrets as request headers (mountAs: header)",
        s.name, s.key, req.task.task_type
    ))
}
