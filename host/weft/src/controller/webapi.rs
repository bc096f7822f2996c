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
//!
//! A task's own Secrets (`secrets` with `mountAs: header`) are read before
//! each call series, as the plugin's ServiceAccount when the controller
//! impersonates plugins: a namespace lets a plugin send a Secret by
//! granting that ServiceAccount `get` on it, and nothing else lets a
//! workflow author have the controller send a Secret out. The host adds
//! them to that task's requests only; the guest never sees them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use weft_dag::schedule::{TaskObservation, TaskState};
use weft_dag::spec::SecretRef;
use weft_dag::status::{PluginRef, ResourceRef};
use weft_plugin::outbound::Credential;
use weft_plugin::{CallError, FailureKind, TaskContext, WebApiPlugin};

use super::children::Children;
use super::impersonation::PluginClients;
use crate::metrics::Metrics;

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
    /// Who reads a task's Secrets: the plugin's ServiceAccount, or the
    /// controller without `--impersonate-plugins`.
    clients: Arc<PluginClients>,
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
    /// The task's Secrets (all `mountAs: header`: the executor refuses
    /// others for a web-API task).
    pub secrets: &'a [SecretRef],
}

impl WebApiTasks {
    /// None in flight.
    pub fn new(
        children: Arc<Children>,
        metrics: Arc<Metrics>,
        clients: Arc<PluginClients>,
    ) -> Arc<Self> {
        Arc::new(WebApiTasks {
            children,
            metrics,
            clients,
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
                self.spawn_poll(key.clone(), &a, meta.to_string());
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
    pub fn abort(self: &Arc<Self>, a: Attempt<'_>) {
        let key = format!("{}/{}", a.ctx.namespace, a.ctx.resource_name);
        let known = match self.lock().remove(&key) {
            Some(Stage::Created { meta, .. }) => Some(meta),
            _ => a.meta.map(str::to_string),
        };
        let Some(meta) = known else { return };
        let (me, plugin, ctx) = (self.clone(), a.plugin.clone(), a.ctx);
        let secrets = a.secrets.to_vec();
        spawn(async move {
            let node = ctx.node_id.clone();
            // Without its credentials the stop is still tried: the service
            // may take it, and the attempt is over either way.
            let creds = me
                .credentials(&plugin, &ctx.namespace, &secrets)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(node, "stopping the remote job without its credentials: {e}");
                    Vec::new()
                });
            let call = plugin.clone();
            let result = blocking(move || call.delete_with(&ctx, &meta, &creds)).await;
            if let Err(e) = result {
                me.metrics
                    .plugin_failure(plugin.name(), "delete", e.metric_label());
                tracing::warn!(node, "stopping the remote job failed: {e}");
            }
        });
    }

    fn spawn_create(self: &Arc<Self>, key: String, a: &Attempt<'_>) {
        let (me, plugin, ctx) = (self.clone(), a.plugin.clone(), a.ctx.clone());
        let (wf, secrets) = (a.workflow.to_string(), a.secrets.to_vec());
        spawn(async move {
            let (stage, creds) = match me.credentials(&plugin, &ctx.namespace, &secrets).await {
                Err(e) => (Stage::Failed(secret_unavailable(&e)), Vec::new()),
                Ok(creds) => {
                    let (call, c) = (plugin.clone(), (ctx.clone(), creds.clone()));
                    let result =
                        blocking(move || call.create_with(&c.0, &c.0.resource_name, &c.1)).await;
                    let stage = match result {
                        Ok((meta, _)) => Stage::Created { meta, last: None },
                        Err(e) => Stage::Failed(me.failed(&plugin, "create", &e)),
                    };
                    (stage, creds)
                }
            };
            if let Some(s) = me.lock().get_mut(&key) {
                *s = stage.clone();
            }
            // The next round writes the meta (or the failure) to the status.
            me.children.wake(&ctx.namespace, &wf);
            if let Stage::Created { meta, .. } = stage {
                let first = plugin.poll().initial;
                let job = Job {
                    plugin,
                    ctx,
                    creds,
                    meta,
                };
                me.poll_loop(key, job, first, wf).await;
            }
        });
    }

    /// Polling resumed after a restart: the task's Secrets are read again.
    fn spawn_poll(self: &Arc<Self>, key: String, a: &Attempt<'_>, meta: String) {
        let (me, plugin, ctx) = (self.clone(), a.plugin.clone(), a.ctx.clone());
        let (wf, secrets) = (a.workflow.to_string(), a.secrets.to_vec());
        spawn(async move {
            match me.credentials(&plugin, &ctx.namespace, &secrets).await {
                Ok(creds) => {
                    let job = Job {
                        plugin,
                        ctx,
                        creds,
                        meta,
                    };
                    me.poll_loop(key, job, Duration::ZERO, wf).await;
                }
                Err(e) => {
                    if let Some(s) = me.lock().get_mut(&key) {
                        *s = Stage::Failed(secret_unavailable(&e));
                    }
                    me.children.wake(&ctx.namespace, &wf);
                }
            }
        });
    }

    /// Polls `get` until the job ends or the attempt is forgotten (its
    /// node was aborted), doubling the wait from the manifest's
    /// `poll.initial` up to `poll.max`. Each `get` runs on the blocking
    /// pool: it waits on the network.
    async fn poll_loop(self: Arc<Self>, key: String, job: Job, first: Duration, workflow: String) {
        let job = Arc::new(job);
        let poll = job.plugin.poll();
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
            let (call, metrics) = (job.clone(), self.metrics.clone());
            let obs = blocking(move || {
                let start = std::time::Instant::now();
                let result = call.plugin.get_with(&call.ctx, &call.meta, &call.creds);
                metrics.plugin_call(call.plugin.name(), "get", start.elapsed());
                result.map(|(info, stats)| {
                    metrics.plugin_memory(call.plugin.name(), stats.memory_peak);
                    super::observe::observation(info)
                })
            })
            .await
            .unwrap_or_else(|e| self.failed(&job.plugin, "get", &e));
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
                self.children.wake(&job.ctx.namespace, &workflow);
            }
            if done {
                return;
            }
        }
    }

    /// The task's `mountAs: header` Secrets as credentials of `plugin`'s
    /// requests, read as the plugin's ServiceAccount (or the controller).
    async fn credentials(
        &self,
        plugin: &WebApiPlugin,
        namespace: &str,
        secrets: &[SecretRef],
    ) -> Result<Vec<Credential>, String> {
        let mut out = Vec::new();
        for (i, s) in secrets.iter().enumerate() {
            let Some(h) = &s.header else { continue };
            let field = format!("task.secrets[{i}]");
            let value = self
                .read_secret(plugin.name(), namespace, s)
                .await
                .map_err(|e| format!("{field}: {e}"))?;
            out.push(plugin.task_credential(&field, &h.name, &h.prefix, &h.hosts, &value)?);
        }
        Ok(out)
    }

    /// One key of a Secret, read as `plugin` would be. Errors name the
    /// Secret, the key and who read it; never the value.
    async fn read_secret(&self, plugin: &str, ns: &str, s: &SecretRef) -> Result<String, String> {
        let (client, user) = self.clients.client(plugin).map_err(|e| e.to_string())?;
        let name = format!("Secret {ns}/{}", s.name);
        let secret = match Api::<Secret>::namespaced(client, ns).get(&s.name).await {
            Ok(secret) => secret,
            Err(kube::Error::Api(e)) if e.code == 403 => {
                return Err(forbidden(plugin, ns, &s.name, user.as_deref()));
            }
            Err(kube::Error::Api(e)) if e.code == 404 => return Err(format!("{name} not found")),
            Err(e) => return Err(format!("{name}: {e}")),
        };
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&s.key))
            .ok_or_else(|| format!("{name} has no key {:?}", s.key))?;
        String::from_utf8(bytes.0.clone())
            .map_err(|_| format!("{name} key {:?}: the value is not UTF-8", s.key))
    }

    fn failed(&self, plugin: &WebApiPlugin, call: &str, e: &CallError) -> TaskObservation {
        self.metrics
            .plugin_failure(plugin.name(), call, e.metric_label());
        let reason = format!("Plugin{}", super::observe::capitalise(e.metric_label()));
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

/// What one attempt's `get` polls need.
struct Job {
    plugin: Arc<WebApiPlugin>,
    ctx: TaskContext,
    creds: Vec<Credential>,
    meta: String,
}

/// A task's Secret could not be read or used: the attempt fails before
/// any request, and a retry will not read it either until someone fixes
/// the Secret or its RBAC.
fn secret_unavailable(why: &str) -> TaskObservation {
    TaskObservation::failed(false, false, "SecretUnavailable", why)
}

/// Why `plugin` may not read a Secret, and how a namespace lets it.
fn forbidden(plugin: &str, ns: &str, secret: &str, user: Option<&str>) -> String {
    let Some(user) = user else {
        return format!(
            "the controller may not get Secret {ns}/{secret} (without --impersonate-plugins it reads a task's Secrets as itself)"
        );
    };
    let sa = user.strip_prefix("system:serviceaccount:").unwrap_or(user);
    let role = format!("weft-plugin-{plugin}-{secret}");
    format!(
        "plugin {plugin} may not get Secret {ns}/{secret} (it reads a task's Secrets as {user}); to let it send this Secret: \
         kubectl -n {ns} create role {role} --verb=get --resource=secrets --resource-name={secret} && \
         kubectl -n {ns} create rolebinding {role} --role={role} --serviceaccount={sa}"
    )
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

pub(super) fn plugin_ref(p: &WebApiPlugin) -> PluginRef {
    PluginRef {
        name: p.name().to_string(),
        digest: format!("sha256:{}", p.digest().hex()),
    }
}
