//! Artifact GC (Argo's `artifactGC`, issue 42): the objects a workflow's
//! tasks stored are deleted from the artifact repository once it finished
//! (`OnWorkflowCompletion`) or when it is deleted (`OnWorkflowDeletion`),
//! or kept (`Never`, the default), by `spec.artifactGC` and each output
//! artifact's own `artifactGC`.
//!
//! The store, not the status, says what there is: the workflow's prefix
//! `<namespace>/<workflow>/<uid>/` is listed, so the uploads of failed
//! attempts go too. A Workflow with something to collect carries
//! [`ARTIFACT_GC_FINALIZER`] from before its first pod, so its deletion
//! waits for the objects (and a TTL deletion with it); deletes are
//! idempotent, so a controller killed midway collects the rest when it is
//! back. A store that refuses is retried with back-off and said in a
//! Warning Event. Three hooks call in: [`guard`] before the round,
//! [`on_completion`] and [`on_deletion`] when the Workflow is settled;
//! nothing here runs inside the round.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use weft_dag::artifacts::ArtifactGcStrategy as Strategy;
use weft_dag::{TaskSpec, WorkflowSpec, WorkflowStatus};

use super::{Context, Error, Requeue, report};
use crate::api::{ARTIFACT_GC_FINALIZER, Workflow};
use crate::store::{Store, StoreError};

/// The first wait after the store failed; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between attempts: a store that comes back is used
/// within five minutes.
const MAX_WAIT: Duration = Duration::from_secs(300);
/// How long after its deletion began a Workflow's sweep waits for its
/// pods to end.
const POD_WAIT: Duration = Duration::from_secs(120);
/// Deletes in flight per workflow.
const PARALLEL_DELETES: usize = 16;

/// What the controller remembers of artifact GC, by Workflow uid.
#[derive(Default)]
pub struct Collector {
    /// Whether this controller last added (true) or removed (false) the
    /// finalizer: newer than a watch cache that may lag behind the write.
    held: Mutex<HashMap<String, bool>>,
    /// The finishes (uid, `finishedAt`) whose completion objects are gone:
    /// a finished Workflow is looked at often, the store listed once (a
    /// retried workflow finishes again, with new objects).
    completed: Mutex<HashSet<(String, String)>>,
    /// Failures in a row, for the back-off.
    failures: Mutex<HashMap<String, u32>>,
}

impl Collector {
    /// Whether `wf` carries the finalizer.
    pub fn held(&self, wf: &Workflow) -> bool {
        let uid = wf.uid().unwrap_or_default();
        let known = lock(&self.held).get(&uid).copied();
        known.unwrap_or_else(|| wf.finalizers().iter().any(|f| f == ARTIFACT_GC_FINALIZER))
    }

    /// Forgets a Workflow that is gone.
    pub fn forget(&self, uid: &str) {
        lock(&self.held).remove(uid);
        lock(&self.failures).remove(uid);
        lock(&self.completed).retain(|(u, _)| u != uid);
    }

    /// The store failed again for `uid`: how long to wait.
    fn failed(&self, uid: &str) -> Duration {
        let mut f = lock(&self.failures);
        let n = f.entry(uid.to_string()).or_insert(0);
        let wait = FIRST_WAIT.saturating_mul(1 << (*n).min(16));
        *n += 1;
        wait.min(MAX_WAIT)
    }

    fn succeeded(&self, uid: &str) {
        lock(&self.failures).remove(uid);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The strategies of one workflow's objects: its default, and each
/// declared output artifact's (by node id and name).
#[derive(Debug, Default)]
pub struct Strategies {
    default: Strategy,
    declared: HashMap<(String, String), Strategy>,
    /// Array nodes: their items' keys carry `<node>-<index>`.
    arrays: HashSet<String>,
}

impl Strategies {
    /// From the spec the workflow runs (a template's, once resolved).
    pub fn of(spec: &WorkflowSpec) -> Strategies {
        let default = spec.artifact_gc.map(|g| g.strategy).unwrap_or_default();
        let mut s = Strategies {
            default,
            ..Default::default()
        };
        for n in spec.nodes.iter().chain(&spec.on_exit) {
            if n.array.is_some() {
                s.arrays.insert(n.id.clone());
            }
            for t in tasks(n) {
                for a in &t.outputs.artifacts {
                    let own = a.artifact_gc.map_or(default, |g| g.strategy);
                    s.declared.insert((n.id.clone(), a.name.clone()), own);
                }
            }
        }
        s
    }

    /// Whether anything is ever collected: then the Workflow carries the
    /// finalizer. A default other than `Never` counts even without a
    /// declared artifact, for the workflow's other objects (offloaded
    /// outputs, archived logs).
    pub fn collects_any(&self) -> bool {
        self.default != Strategy::Never || self.declared.values().any(|s| *s != Strategy::Never)
    }

    fn any(&self, strategy: Strategy) -> bool {
        self.declared.values().any(|s| *s == strategy)
    }

    /// The strategy of the object at `rest` (its key after the workflow's
    /// prefix: `<node>/<attempt>/<name>`), when it is a declared output
    /// artifact.
    pub fn declared(&self, rest: &str) -> Option<Strategy> {
        let mut parts = rest.split('/');
        let (node, attempt, name) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || attempt.parse::<u32>().is_err() {
            return None;
        }
        let find = |node: &str| self.declared.get(&(node.to_string(), name.to_string()));
        find(node)
            .or_else(|| {
                let (base, index) = node.rsplit_once('-')?;
                index.parse::<usize>().ok()?;
                self.arrays.contains(base).then(|| find(base))?
            })
            .copied()
    }

    /// Whether the object at `rest` goes now. On deletion: whatever is
    /// not kept, and objects that are not declared output artifacts (the
    /// data plane's other objects of the workflow) by the default. On
    /// completion: only declared artifacts that say so; the Workflow,
    /// whose status refers to the rest, stays.
    pub fn collects(&self, rest: &str, deleting: bool) -> bool {
        match (self.declared(rest), deleting) {
            (Some(s), true) => s != Strategy::Never,
            (Some(s), false) => s == Strategy::OnWorkflowCompletion,
            (None, true) => self.default != Strategy::Never,
            (None, false) => false,
        }
    }
}

/// The tasks a node runs in its own workflow (a dynamic node's generated
/// nodes run in a child Workflow, under that one's keys).
fn tasks(n: &weft_dag::NodeSpec) -> impl Iterator<Item = &TaskSpec> {
    let array = n.array.as_ref().map(|a| &a.task);
    let dynamic = n.dynamic.as_ref().map(|d| &d.task);
    n.task.iter().chain(array).chain(dynamic)
}

/// The spec a Workflow runs (its own, or the template's it resolved).
fn running_spec<'a>(wf: &'a Workflow, status: &'a WorkflowStatus) -> &'a WorkflowSpec {
    status.resolved_spec.as_deref().unwrap_or(&wf.spec.spec)
}

/// The workflow's prefix in the store.
fn prefix(wf: &Workflow) -> String {
    let (ns, uid) = (
        wf.namespace().unwrap_or_default(),
        wf.uid().unwrap_or_default(),
    );
    format!("{ns}/{}/{uid}/", wf.name_any())
}

/// Before the round: a workflow whose artifacts will be collected gets
/// the finalizer before any pod of it can upload.
pub(super) async fn guard(
    ctx: &Context,
    wf: &Workflow,
    spec: &WorkflowSpec,
    deleting: bool,
) -> Result<(), Error> {
    if deleting || ctx.artifacts().is_none() || ctx.gc.held(wf) {
        return Ok(());
    }
    if !Strategies::of(spec).collects_any() {
        return Ok(());
    }
    add_finalizer(ctx, wf).await
}

/// A finished Workflow: its `OnWorkflowCompletion` objects deleted, once
/// per finish. `Some(wait)`: the store failed; look again then.
pub(super) async fn on_completion(
    ctx: &Context,
    wf: &Workflow,
    status: &WorkflowStatus,
) -> Option<Duration> {
    if !ctx.gc.held(wf) {
        return None;
    }
    let uid = wf.uid().unwrap_or_default();
    let finish = (uid.clone(), status.finished_at.clone().unwrap_or_default());
    if lock(&ctx.gc.completed).contains(&finish) {
        return None;
    }
    let strategies = Strategies::of(running_spec(wf, status));
    if strategies.any(Strategy::OnWorkflowCompletion) {
        let store = match store_of(ctx, wf).await {
            Ok(store) => store,
            Err(wait) => return Some(wait),
        };
        match sweep(&store, &prefix(wf), &strategies, false).await {
            Ok(n) => {
                tracing::info!(workflow = %wf.name_any(), objects = n, "artifact GC on completion")
            }
            Err(e) => return Some(refused(ctx, wf, &e.to_string()).await),
        }
    }
    ctx.gc.succeeded(&uid);
    lock(&ctx.gc.completed).insert(finish);
    None
}

/// A deleted Workflow that carries the finalizer (and whose nodes have
/// stopped): its objects deleted, then the finalizer removed. Until then
/// it is looked at again with back-off.
pub(super) async fn on_deletion(
    ctx: &Context,
    wf: &Workflow,
    status: &WorkflowStatus,
) -> Result<Requeue, Error> {
    let store = match store_of(ctx, wf).await {
        Ok(store) => store,
        Err(wait) => return Ok(Some(wait)),
    };
    if uploads_may_come(ctx, wf) {
        // The pod's end wakes the Workflow; this is the fallback.
        return Ok(Some(Duration::from_secs(1)));
    }
    let strategies = Strategies::of(running_spec(wf, status));
    match sweep(&store, &prefix(wf), &strategies, true).await {
        Ok(n) => tracing::info!(workflow = %wf.name_any(), objects = n, "artifact GC on deletion"),
        Err(e) => return Ok(Some(refused(ctx, wf, &e.to_string()).await)),
    }
    ctx.gc.succeeded(&wf.uid().unwrap_or_default());
    remove_finalizer(ctx, wf).await?;
    Ok(None)
}

/// Whether a pod of the workflow has not ended yet (one the round has
/// just stopped is still terminating) and so may still upload: the sweep
/// waits for it, for at most [`POD_WAIT`] after the deletion began (a pod
/// on a lost node never ends).
fn uploads_may_come(ctx: &Context, wf: &Workflow) -> bool {
    let since = wf.metadata.deletion_timestamp.as_ref().map(|t| {
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
        Duration::from_secs(age.as_secs().max(0) as u64)
    });
    if since.is_none_or(|age| age > POD_WAIT) {
        return false;
    }
    let Some(pods) = ctx.children.kind("v1", "Pod") else {
        return false;
    };
    let (ns, name) = (wf.namespace(), wf.name_any());
    pods.store.state().iter().any(|p| {
        let label = p.labels().get(weft_plugin::plugin::LABEL_WORKFLOW);
        // The labels first: only this workflow's pods are parsed.
        p.metadata.namespace == ns
            && label == Some(&name)
            && !matches!(
                p.field("status")["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
    })
}

/// Deletes the objects under `prefix` that `strategies` collect now; how
/// many. Deleting is idempotent, so a sweep cut short is simply run again.
async fn sweep(
    store: &Store,
    prefix: &str,
    strategies: &Strategies,
    deleting: bool,
) -> Result<usize, StoreError> {
    let keys: Vec<String> = store
        .list(prefix)
        .await?
        .into_iter()
        .filter(|k| strategies.collects(k.strip_prefix(prefix).unwrap_or(k), deleting))
        .collect();
    let n = keys.len();
    futures::stream::iter(keys)
        .map(|k| async move { store.delete(&k).await })
        .buffer_unordered(PARALLEL_DELETES)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(n)
}

/// The store refused: a Warning Event naming the refusal, and the wait
/// before the next try.
async fn refused(ctx: &Context, wf: &Workflow, why: &str) -> Duration {
    let wait = ctx.gc.failed(&wf.uid().unwrap_or_default());
    tracing::warn!(workflow = %wf.name_any(), retry_in = ?wait, "artifact GC: {why}");
    let said = s3_refusal(why).map_or(String::new(), |r| format!("the store says {r}. "));
    let message = format!(
        "cannot delete the workflow's artifacts (retrying in {}s): {said}{why}",
        wait.as_secs()
    );
    report::publish(ctx, wf, "Warning", "ArtifactGCFailed", &message).await;
    wait
}

/// An S3 error's code and message (`SignatureDoesNotMatch: ...`), from
/// the XML body the store's error carries: put first, as an Event's
/// message is cut at 1,024 characters and the request's text is long.
fn s3_refusal(why: &str) -> Option<String> {
    let between = |open: &str, close: &str| {
        let from = why.find(open)? + open.len();
        let len = why[from..].find(close)?;
        Some(why[from..from + len].to_string())
    };
    let code = between("<Code>", "</Code>")?;
    Some(match between("<Message>", "</Message>") {
        Some(m) => format!("{code}: {}", m.trim_end_matches('.')),
        None => code,
    })
}

/// The store the workflow's namespace uses (its own repository, else the
/// controller's), or, when there is none or its ConfigMap is wrong, the
/// wait after saying so.
async fn store_of(ctx: &Context, wf: &Workflow) -> Result<Store, Duration> {
    match ctx.artifacts_for(&wf.namespace().unwrap_or_default()).await {
        Ok(Some(io)) => Ok(io.store().clone()),
        Ok(None) => Err(no_repository(ctx, wf).await),
        Err(why) => Err(refused(ctx, wf, &why).await),
    }
}

/// The finalizer is there and this controller has no repository: said,
/// and the finalizer kept (the objects are still in the store).
async fn no_repository(ctx: &Context, wf: &Workflow) -> Duration {
    let why = format!(
        "this controller has no artifact repository (--artifact-repository), so it cannot delete them; the finalizer {ARTIFACT_GC_FINALIZER} stays until a controller with one does (or is removed by hand, leaving the objects)"
    );
    refused(ctx, wf, &why).await
}

/// Adds the finalizer: a JSON patch that tests the list it extends, so a
/// finalizer another party added meanwhile is not lost.
async fn add_finalizer(ctx: &Context, wf: &Workflow) -> Result<(), Error> {
    let fins = wf.finalizers();
    let ops = if fins.is_empty() {
        json!([{"op": "add", "path": "/metadata/finalizers", "value": [ARTIFACT_GC_FINALIZER]}])
    } else {
        json!([{"op": "test", "path": "/metadata/finalizers", "value": fins},
               {"op": "add", "path": "/metadata/finalizers/-", "value": ARTIFACT_GC_FINALIZER}])
    };
    patch_finalizers(ctx, wf, ops, true).await
}

/// Removes the finalizer (tested at its index, so only it goes).
async fn remove_finalizer(ctx: &Context, wf: &Workflow) -> Result<(), Error> {
    let at = wf
        .finalizers()
        .iter()
        .position(|f| f == ARTIFACT_GC_FINALIZER);
    let Some(i) = at else {
        lock(&ctx.gc.held).insert(wf.uid().unwrap_or_default(), false);
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{i}");
    let ops = json!([{"op": "test", "path": path, "value": ARTIFACT_GC_FINALIZER},
                     {"op": "remove", "path": path}]);
    patch_finalizers(ctx, wf, ops, false).await
}

async fn patch_finalizers(
    ctx: &Context,
    wf: &Workflow,
    ops: serde_json::Value,
    held: bool,
) -> Result<(), Error> {
    let ns = wf.namespace().unwrap_or_default();
    let api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let patch: json_patch::Patch =
        serde_json::from_value(ops).map_err(|e| anyhow::anyhow!("finalizer patch: {e}"))?;
    match api
        .patch(
            &wf.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => ctx.metrics.api_write("finalizer"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    lock(&ctx.gc.held).insert(wf.uid().unwrap_or_default(), held);
    Ok(())
}

#[cfg(test)]
mod tests;
