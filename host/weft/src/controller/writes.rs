//! The round's writes, made after it planned them: children applied and
//! deleted, child Workflows aborted, the status patched with only what
//! changed, the old finalizer removed, a finished Workflow deleted when its
//! time to live is over.

use std::time::{Duration, SystemTime};

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy},
};
use serde_json::{Value, json};
use weft_dag::WorkflowStatus;

use super::quota::{self, Wait};
use super::{Context, Error, MANAGER, Requeue, executor, lifecycle};
use crate::api::{FINALIZER, Workflow};

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

/// Deletes the children `spec.podGC` says are done with.
pub(super) async fn collect_children(ctx: &Context, wf: &Workflow, status: &WorkflowStatus) {
    let ns = wf.namespace().unwrap_or_default();
    for d in lifecycle::pod_gc(ctx, wf, status) {
        tracing::debug!(child = %d.name, "pod GC");
        delete_child(ctx, &ns, &d).await;
    }
}

/// A finished Workflow: deleted once its TTL is over (its children go
/// with it through their owner references), else looked at again then.
/// The due time comes from `finishedAt`, so a controller that was down
/// when it fell due deletes it on its first look.
/// When a finished Workflow's time to live ends (`None`: it has none).
pub(super) fn ttl_due(wf: &Workflow, status: &WorkflowStatus, ctx: &Context) -> Option<SystemTime> {
    let own = wf.spec.spec.ttl_strategy.as_ref();
    let resolved = status
        .resolved_spec
        .as_ref()
        .and_then(|s| s.ttl_strategy.as_ref());
    weft_dag::ttl::due(own.or(resolved), ctx.default_ttl(), status)
}

pub(super) async fn expire(
    api: &Api<Workflow>,
    wf: &Workflow,
    status: &WorkflowStatus,
    ctx: &Context,
) -> Result<Requeue, Error> {
    let Some(due) = ttl_due(wf, status, ctx) else {
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

pub(super) async fn write_status(
    api: &Api<Workflow>,
    name: &str,
    uid: &str,
    old: &WorkflowStatus,
    new: &WorkflowStatus,
    ctx: &Context,
) -> Result<(), Error> {
    let version = tracing::Instrument::instrument(
        patch_status(api, name, old, new, ctx),
        tracing::info_span!("status.patch", phase = ?new.phase),
    )
    .await?;
    ctx.written.record(uid, version, new);
    ctx.hold_status(uid, None);
    Ok(())
}

/// What a status patch's answer is read for: the version it made. The
/// rest of the object (a 1,000-node child's spec and compressed status)
/// is skipped, not decoded.
#[derive(serde::Deserialize)]
struct Stored {
    metadata: StoredMeta,
}

#[derive(serde::Deserialize)]
struct StoredMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// Writes only what changed from `old` to `new` in an object's status (a
/// JSON merge patch; nothing when nothing changed): a round that moves one
/// node of 10,000 writes one node. Returns the object's new
/// `resourceVersion` when it wrote.
pub(crate) async fn patch_status<K, S>(
    api: &Api<K>,
    name: &str,
    old: &S,
    new: &S,
    ctx: &Context,
) -> Result<Option<String>, kube::Error>
where
    K: kube::Resource,
    S: serde::Serialize,
{
    let old_v = serde_json::to_value(old).unwrap_or(Value::Null);
    let new_v = serde_json::to_value(new).unwrap_or(Value::Null);
    let Some(diff) = merge_diff(&old_v, &new_v) else {
        return Ok(None);
    };
    let patch = Patch::Merge(json!({"status": diff}));
    let request = kube::core::Request::new(api.resource_url())
        .patch_subresource("status", name, &PatchParams::default(), &patch)
        .map_err(kube::Error::BuildRequest)?;
    let started = std::time::Instant::now();
    let stored: Stored = ctx.client.request(request).await?;
    ctx.write_pace.record(started.elapsed());
    ctx.metrics.api_write("status");
    Ok(stored.metadata.resource_version)
}

pub(super) async fn remove_finalizer(
    api: &Api<Workflow>,
    wf: &Workflow,
    ctx: &Context,
) -> Result<(), Error> {
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

/// Applies (or creates) one child. A create refused for an exceeded
/// quota or by throttling is recorded as a wait (`quota.rs`) and
/// returned, for the round's Event; its node waits.
pub(super) async fn apply_child(
    ctx: &Context,
    ns: &str,
    apply: &executor::Apply,
) -> Result<Option<Wait>, Error> {
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
    let key = format!("{ns}/{api_version}/{kind}/{name}");
    match result {
        Ok(()) => {
            ctx.metrics.api_write("child");
            Ok(None)
        }
        Err(kube::Error::Api(s)) => {
            if let Some((reason, quota)) = quota::refusal(s.code, &s.message) {
                tracing::info!(%kind, %name, reason, "create refused, the node waits: {}", s.message);
                let wait = ctx.children.waits.refused(&key, reason, quota, &s.message);
                return Ok(Some(wait));
            }
            let Some(acting) = acting.filter(|_| s.code == 403) else {
                return Err(kube::Error::Api(s).into());
            };
            // Refused as the plugin: its node fails with the API server's
            // words (which name the ServiceAccount) instead of retrying.
            let why = format!(
                "plugin {}: the API server refused {kind} {name} to {acting}: {}",
                apply.plugin, s.message
            );
            tracing::warn!(plugin = %apply.plugin, "{why}");
            ctx.children.deny(&key, why);
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Aborts a child Workflow: it stops its own nodes (and its children),
/// and keeps its status for the user to read.
pub(super) async fn abort_workflow(api: &Api<Workflow>, name: &str, ctx: &Context) {
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

pub(super) async fn delete_child(ctx: &Context, ns: &str, d: &executor::Deletion) {
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
