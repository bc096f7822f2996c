//! The Workflow watch, decoded one object at a time. kube-runtime's typed
//! watcher fails a whole list when one object does not decode (an API
//! server without the CRD's schema, a client that bypassed it, an older
//! version's field), so one bad Workflow would stall every other one and
//! log itself every retry. Here the watch reads untyped objects and
//! decodes each: a bad one is reported once per version (a Warning Event
//! on it, `weft_workflows_undecodable_total`, one log line naming it and
//! the field) and skipped; the rest flow on.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject},
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};

use super::Context;
use crate::api::Workflow;
use weft_dag::WorkflowStatus;

/// The watch of Workflows in `namespace` (all when `None`): the store the
/// controller reads and the stream that triggers reconciles.
pub fn workflows(
    ctx: Arc<Context>,
    namespace: Option<&str>,
) -> (
    Store<Workflow>,
    impl Stream<Item = Result<Workflow, watcher::Error>> + Send + 'static,
) {
    let ar = ApiResource::erase::<Workflow>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    let reported = Arc::new(Mutex::new(HashSet::new()));
    let ignore_status = ctx.gate("IgnoreStatusUpdates");
    let echoes = ctx.clone();
    let decoded = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |ev| {
            let (ctx, reported) = (ctx.clone(), reported.clone());
            async move { decode_event(ev, &ctx, &reported).await }
        })
        // Nothing reads them, and a large status's field list nearly
        // doubles the cached object (controller-runtime strips them too).
        .modify(|wf| wf.metadata.managed_fields = None);
    let (reader, writer) = reflector::store();
    let mut seen = std::collections::HashMap::new();
    let live = echoes.live.clone();
    live.lend(reader.clone());
    let stream = reflector::reflector(writer, decoded)
        .inspect(move |ev| {
            if let Ok(watcher::Event::InitDone) = ev {
                live.synced();
            }
        })
        .applied_objects()
        .filter(move |wf| {
            let pass = match wf {
                Ok(wf) if ignore_status => changed_beyond_status(wf, &mut seen),
                Ok(wf) => !echoes.echoes.is_echo(wf),
                _ => true,
            };
            futures::future::ready(pass)
        });
    (reader, stream)
}

/// Whether `wf` differs from its last version seen in more than its
/// status: its generation (the spec), labels, annotations (a gate's
/// approval), finalizers or deletion. The `IgnoreStatusUpdates` gate's
/// predicate: the controller's own status writes then cost no round.
fn changed_beyond_status(wf: &Workflow, seen: &mut HashMap<String, u64>) -> bool {
    let hash = beyond_status(wf);
    seen.insert(wf.uid().unwrap_or_default(), hash) != Some(hash)
}

/// A hash of what a Workflow is beyond its status (see
/// [`changed_beyond_status`]).
fn beyond_status(wf: &Workflow) -> u64 {
    use std::hash::{Hash, Hasher};
    let m = &wf.metadata;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (m.generation, &m.labels, &m.annotations, &m.finalizers).hash(&mut h);
    m.deletion_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut h);
    h.finish()
}

/// The waiting statuses written by a workflow's gate (`sync::gate`),
/// by uid, with the rest of the Workflow as it was: the watch event of
/// that write would reconcile it only to find the same wait (the lock's
/// watch wakes it when it holds the lock, and a waiting workflow is
/// reconciled every minute anyway). Without `IgnoreStatusUpdates`,
/// every other write of status still costs a round.
#[derive(Default)]
pub struct Echoes(Mutex<HashMap<String, (u64, WorkflowStatus)>>);

impl Echoes {
    /// The gate is about to write `status` for `wf`.
    pub(super) fn expect(&self, wf: &Workflow, status: &WorkflowStatus) {
        let uid = wf.uid().unwrap_or_default();
        self.lock().insert(uid, (beyond_status(wf), status.clone()));
    }

    /// Whether `wf` is the echo expected of its uid (which is forgotten
    /// either way: one event answers it).
    fn is_echo(&self, wf: &Workflow) -> bool {
        let Some((beyond, status)) = self.lock().remove(&wf.uid().unwrap_or_default()) else {
            return false;
        };
        beyond == beyond_status(wf) && wf.status.as_ref() == Some(&status)
    }

    /// A Workflow deleted, or a write that failed.
    pub(super) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, WorkflowStatus)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One watch event with its object decoded; `None` when it did not decode.
async fn decode_event(
    ev: Result<watcher::Event<DynamicObject>, watcher::Error>,
    ctx: &Context,
    reported: &Mutex<HashSet<(String, String)>>,
) -> Option<Result<watcher::Event<Workflow>, watcher::Error>> {
    use watcher::Event;
    let ev = match ev {
        Ok(ev) => ev,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(match ev {
        // A version that no longer decodes: the store forgets the last
        // one that did, so nothing reconciles a spec the user replaced.
        Event::Apply(o) => match decode(o, ctx, reported).await {
            Ok(wf) => Event::Apply(wf),
            Err(shell) => Event::Delete(shell),
        },
        Event::InitApply(o) => Event::InitApply(decode(o, ctx, reported).await.ok()?),
        Event::Delete(o) => {
            // Without a finalizer a deleted Workflow is never reconciled
            // again: forget it here.
            ctx.forget(&o.uid().unwrap_or_default());
            let ns = o.namespace().unwrap_or_default();
            super::sync::release(ctx, &o.uid().unwrap_or_default());
            ctx.queue.forget(&format!("{ns}/{}", o.name_any()));
            Event::Delete(shell(&o))
        }
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }))
}

/// A Workflow with only `o`'s metadata: its identity, for the store and
/// for Events.
fn shell(o: &DynamicObject) -> Workflow {
    let mut wf = Workflow::new(&o.name_any(), Default::default());
    wf.metadata = o.metadata.clone();
    wf
}

/// The Workflow `o` holds, or (when it does not decode, reported once per
/// version) a shell with its identity. Every Workflow event passes here:
/// the object's fields are moved, not copied, into the value decoded.
async fn decode(
    o: DynamicObject,
    ctx: &Context,
    reported: &Mutex<HashSet<(String, String)>>,
) -> Result<Workflow, Workflow> {
    let DynamicObject {
        types,
        metadata,
        mut data,
    } = o;
    if let (Some(t), Some(fields)) = (types, data.as_object_mut()) {
        fields.insert("apiVersion".into(), t.api_version.into());
        fields.insert("kind".into(), t.kind.into());
    }
    if let Some(fields) = data.as_object_mut() {
        fields.insert(
            "metadata".into(),
            serde_json::to_value(&metadata).unwrap_or_default(),
        );
    }
    let problem = match serde_path_to_error::deserialize::<_, Workflow>(&data) {
        Ok(wf) => return Ok(wf),
        Err(e) => field_problem(e, data.get("spec")),
    };
    let mut shell = Workflow::new(
        metadata.name.as_deref().unwrap_or_default(),
        Default::default(),
    );
    shell.metadata = metadata;
    let version = (
        shell.uid().unwrap_or_default(),
        shell.resource_version().unwrap_or_default(),
    );
    let first = reported
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(version);
    if first {
        report(&shell, &problem, ctx).await;
    }
    Err(shell)
}

/// The offending field's path and the problem: `spec.parallelism: invalid
/// type: ...`. The spec is flattened into the resource, which hides paths
/// below `spec`; reading it alone finds them.
fn field_problem(
    e: serde_path_to_error::Error<serde_json::Error>,
    spec: Option<&serde_json::Value>,
) -> String {
    let whole = format!("{}: {}", e.path(), e.inner());
    if e.path().to_string() != "spec" {
        return whole;
    }
    match spec.map(serde_path_to_error::deserialize::<_, weft_dag::WorkflowSpec>) {
        Some(Err(e)) => format!("spec.{}: {}", e.path(), e.inner()),
        _ => whole,
    }
}

/// Says once, in an Event on the object, a metric and a log line.
async fn report(shell: &Workflow, problem: &str, ctx: &Context) {
    let (ns, name) = (shell.namespace().unwrap_or_default(), shell.name_any());
    ctx.metrics.undecodable();
    tracing::warn!(workflow = %name, namespace = %ns, "skipping a Workflow that does not decode: {problem}");
    let message =
        format!("Weft cannot read this Workflow and skips it until it is fixed: {problem}");
    super::record_event(
        &ctx.client,
        &ctx.metrics,
        shell,
        "Warning",
        "InvalidWorkflow",
        &message,
    )
    .await;
}
