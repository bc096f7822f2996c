//! Web-API task nodes (issue 20): the job runs in a remote service, and
//! its plugin's create / get / delete calls wait on the network, so they
//! run here, off the scheduler round, as Flyte's agent plugins do.
//!
//! The round asks [`WebApiTasks::observe`] where an attempt stands and gets
//! the last answer at once. `create` runs once per attempt with the
//! attempt's resource name as idempotency key; its `meta` goes into the
//! node's status in the same round, before the first `get`, so a
//! restarted controller polls the same job (and a create repeated after a
//! crash adopts the job instead of submitting another). Then `get` is
//! polled with backoff (the manifest's `poll`), each answer that changes
//! something wakes the Workflow, and the node's own timeout still applies
//! (the scheduler aborts the attempt, which calls `delete`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use weft_dag::schedule::{TaskObservation, TaskState};
use weft_dag::status::{PluginRef, ResourceRef};
use weft_plugin::{CallError, FailureKind, TaskContext, WebApiPlugin};

use super::children::Children;
use super::metrics::Metrics;

/// The `apiVersion` a web-API task's [`ResourceRef`] carries: it names no
/// Kubernetes kind; `kind` is the plugin, `name` the idempotency key.
pub const WEBAPI_API_VERSION: &str = "webapi.weft.dev/v1";

/// Where one attempt stands, as the calls made for it left it.
#[derive(Debug, Clone)]
enum Stage {
    /// `create` is running.
    Creating,
    /// Created: the job's meta, and the last `get` answer if any.
    Created {
        meta: String,
        last: Option<TaskObservation>,
    },
    /// `create` failed.
    Failed(TaskObservation),
}

/// Web-API attempts in flight, by `namespace/resource name`.
pub struct WebApiTasks {
    children: Arc<Children>,
    metrics: Arc<Metrics>,
    attempts: Mutex<HashMap<String, Stage>>,
}

/// One attempt, as the round sees it.
pub struct Attempt<'a> {
    /// The plugin that serves it.
    pub plugin: &'a Arc<WebApiPlugin>,
    /// Its context (resource name = idempotency key).
    pub ctx: TaskContext,
    /// The Workflow's name, to wake it.
    pub workflow: &'a str,
    /// The meta kept in the node's status, if any.
    pub meta: Option<&'a str>,
}

impl WebApiTasks {
    /// None in flight.
    pub fn new(children: Arc<Children>, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(WebApiTasks {
            children,
            metrics,
            attempts: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stage>> {
        self.attempts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the attempt stands now; starts its `create` or its polling
    /// when nothing runs for it yet (a new attempt, or a restarted
    /// controller that finds the meta in the status).
    pub fn observe(self: &Arc<Self>, a: Attempt<'_>) -> TaskObservation {
        let key = format!("{}/{}", a.ctx.namespace, a.ctx.resource_name);
        let stage = self.lock().get(&key).cloned();
        let mut obs = match (stage, a.meta) {
            (None, None) => {
                self.lock().insert(key.clone(), Stage::Creating);
                self.spawn_create(key.clone(), &a);
                TaskObservation::in_progress("creating")
            }
            (None, Some(meta)) => {
                self.lock().insert(
                    key.clone(),
                    Stage::Created {
                        meta: meta.to_string(),
                        last: None,
                    },
                );
                self.spawn_poll(key.clone(), &a, meta.to_string(), Duration::ZERO);
                TaskObservation::in_progress("submitted")
            }
            (Some(Stage::Creating), _) => TaskObservation::in_progress("creating"),
            (Some(Stage::Failed(obs)), _) => obs,
            (
                Some(Stage::Created {
                    last: Some(obs), ..
                }),
                _,
            ) => obs,
            (Some(Stage::Created { last: None, .. }), _) => {
                TaskObservation::in_progress("submitted")
            }
        };
        if obs.state != TaskState::InProgress {
            self.lock().remove(&key);
        }
        let meta = match self.lock().get(&key) {
            Some(Stage::Created { meta, .. }) => Some(meta.clone()),
            _ => a.meta.map(str::to_string),
        };
        obs.resource = Some(ResourceRef {
            api_version: WEBAPI_API_VERSION.into(),
            kind: a.plugin.name().into(),
            name: a.ctx.resource_name.clone(),
            meta,
        });
        obs.plugin = Some(plugin_ref(a.plugin));
        obs
    }

    /// Stops the attempt's remote job (abort, timeout) and forgets it.
    pub fn abort(
        self: &Arc<Self>,
        plugin: &Arc<WebApiPlugin>,
        ctx: TaskContext,
        meta: Option<&str>,
    ) {
        let key = format!("{}/{}", ctx.namespace, ctx.resource_name);
        let known = match self.lock().remove(&key) {
            Some(Stage::Created { meta, .. }) => Some(meta),
            _ => meta.map(str::to_string),
        };
        let Some(meta) = known else { return };
        let (plugin, metrics) = (plugin.clone(), self.metrics.clone());
        spawn(async move {
            let (call, node) = (plugin.clone(), ctx.node_id.clone());
            let result = blocking(move || call.delete(&ctx, &meta)).await;
            if let Err(e) = result {
                metrics.plugin_failure(plugin.name(), "delete", e.metric_label());
                tracing::warn!(node, "stopping the remote job failed: {e}");
            }
        });
    }

    fn spawn_create(self: &Arc<Self>, key: String, a: &Attempt<'_>) {
        let (me, plugin, ctx) = (self.clone(), a.plugin.clone(), a.ctx.clone());
        let wf = a.workflow.to_string();
        spawn(async move {
            let call = (plugin.clone(), ctx.clone());
            let result = blocking(move || call.0.create(&call.1, &call.1.resource_name)).await;
            let stage = match result {
                Ok((meta, _)) => Stage::Created { meta, last: None },
                Err(e) => Stage::Failed(me.failed(&plugin, "create", &e)),
            };
            if let Some(s) = me.lock().get_mut(&key) {
                *s = stage.clone();
            }
            // The next round writes the meta (or the failure) to the status.
            me.children.wake(&ctx.namespace, &wf);
            if let Stage::Created { meta, .. } = stage {
                let first = plugin.poll().initial;
                me.poll_loop(key, plugin, ctx, meta, first, wf).await;
            }
        });
    }

    fn spawn_poll(self: &Arc<Self>, key: String, a: &Attempt<'_>, meta: String, first: Duration) {
        let (me, plugin, ctx) = (self.clone(), a.plugin.clone(), a.ctx.clone());
        let wf = a.workflow.to_string();
        spawn(async move { me.poll_loop(key, plugin, ctx, meta, first, wf).await });
    }

    /// Polls `get` until the job ends or the attempt is forgotten (its
    /// node was aborted), doubling the wait from the manifest's
    /// `poll.initial` up to `poll.max`. Each `get` runs on the blocking
    /// pool: it waits on the network.
    async fn poll_loop(
        self: Arc<Self>,
        key: String,
        plugin: Arc<WebApiPlugin>,
        ctx: TaskContext,
        meta: String,
        first: Duration,
        workflow: String,
    ) {
        let poll = plugin.poll();
        let mut wait = first;
        loop {
            tokio::time::sleep(wait).await;
            wait = if wait.is_zero() {
                poll.initial
            } else {
                (wait * 2).min(poll.max)
            };
            if !matches!(self.lock().get(&key), Some(Stage::Created { .. })) {
                return;
            }
            let call = (
                plugin.clone(),
                ctx.clone(),
                meta.clone(),
                self.metrics.clone(),
            );
            let obs = blocking(move || {
                let (plugin, ctx, meta, metrics) = call;
                let start = std::time::Instant::now();
                let result = plugin.get(&ctx, &meta);
                metrics.plugin_call(plugin.name(), "get", start.elapsed());
                result.map(|(info, stats)| {
                    metrics.plugin_memory(plugin.name(), stats.memory_peak);
                    super::executor::observation(info)
                })
            })
            .await
            .unwrap_or_else(|e| self.failed(&plugin, "get", &e));
            let done = obs.state != TaskState::InProgress;
            let changed = {
                let mut attempts = self.lock();
                let Some(Stage::Created { last, .. }) = attempts.get_mut(&key) else {
                    return;
                };
                let changed = last.as_ref() != Some(&obs);
                *last = Some(obs);
                changed
            };
            if changed {
                // A new phase or message: one round writes it.
                wait = poll.initial;
                self.children.wake(&ctx.namespace, &workflow);
            }
            if done {
                return;
            }
        }
    }

    fn failed(&self, plugin: &WebApiPlugin, call: &str, e: &CallError) -> TaskObservation {
        self.metrics
            .plugin_failure(plugin.name(), call, e.metric_label());
        let reason = format!("Plugin{}", super::executor::capitalise(e.metric_label()));
        TaskObservation::failed(
            e.retryable(),
            e.kind() == FailureKind::System,
            &reason,
            &e.to_string(),
        )
    }

    /// How many attempts are in flight (for tests and metrics).
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }
}

/// Runs a plugin call on tokio's blocking pool: it waits on the network.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Starts a web-API task's work on the controller's runtime (the round
/// runs on it; a round outside one has no web-API work to start).
fn spawn(f: impl std::future::Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => drop(h.spawn(f)),
        Err(_) => tracing::error!("no tokio runtime to run a web-API task on"),
    }
}

fn plugin_ref(p: &WebApiPlugin) -> PluginRef {
    PluginRef {
        name: p.name().to_string(),
        digest: format!("sha256:{}", p.digest().hex()),
    }
}
