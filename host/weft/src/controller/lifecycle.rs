//! What happens to a Workflow besides its rounds: a retry the user asked
//! for, and pod GC (`spec.podGC`). Both are computed from the Workflow as
//! stored (annotation, status, the children watch cache), so a controller
//! that restarts in the middle finishes the job.

use std::collections::HashMap;

use kube::ResourceExt;
use weft_dag::{
    Compiled, WorkflowSpec, WorkflowStatus,
    actions::{RETRY_ANNOTATION, RetryRecord, RetryRequest},
    status::{NodeStatus, timestamp},
};

use super::{Context, executor::Deletion};
use crate::api::Workflow;

/// The retry the Workflow's annotation asks for, unless it was carried
/// out (or refused) already: each request id is acted on once.
pub fn pending_retry(wf: &Workflow, status: &WorkflowStatus) -> Option<RetryRequest> {
    let req = RetryRequest::parse(wf.annotations().get(RETRY_ANNOTATION)?);
    (!req.id.is_empty() && !req.done(status)).then_some(req)
}

/// Carries out a retry on the status; a refused one is recorded with its
/// reason so that it is not tried again. The Event's reason and message.
pub fn retry(
    compiled: &Compiled,
    status: &mut WorkflowStatus,
    req: &RetryRequest,
) -> (&'static str, String) {
    let now = std::time::SystemTime::now();
    match weft_dag::actions::retry(compiled, status, req, now) {
        Ok(nodes) => (
            "WorkflowRetried",
            format!(
                "retry {}: running again from nodes {}",
                req.id,
                nodes.join(", ")
            ),
        ),
        Err(why) => {
            status.retries.push(RetryRecord {
                id: req.id.clone(),
                node: req.node.clone(),
                at: timestamp(now),
                nodes: Vec::new(),
                error: Some(why.clone()),
            });
            ("RetryRefused", format!("retry {}: {why}", req.id))
        }
    }
}

/// The spec a Workflow runs (its own, or the template's it resolved).
fn running_spec<'a>(wf: &'a Workflow, status: &'a WorkflowStatus) -> &'a WorkflowSpec {
    status.resolved_spec.as_deref().unwrap_or(&wf.spec.spec)
}

/// The children `spec.podGC` says go now: those of nodes done in the
/// strategy's sense (their node status and outputs stay), or all of them
/// once the workflow is. Found in the watch caches, so what a previous
/// run of the controller did not delete yet is deleted now.
pub fn pod_gc(ctx: &Context, wf: &Workflow, status: &WorkflowStatus) -> Vec<Deletion> {
    let Some(gc) = running_spec(wf, status).pod_gc else {
        return Vec::new();
    };
    let whole = gc.strategy.workflow_done(status.phase);
    let exit = status.on_exit.iter().flat_map(|e| e.nodes.iter());
    let done: HashMap<&str, &NodeStatus> = status
        .nodes
        .iter()
        .chain(exit)
        .filter(|(_, st)| whole || gc.strategy.node_done(st.phase))
        .map(|(id, st)| (id.as_str(), st))
        .collect();
    if done.is_empty() {
        return Vec::new();
    }
    let ns = wf.namespace().unwrap_or_default();
    let mut out = Vec::new();
    for (kind, name, node) in ctx.children.of_workflow(&ns, &wf.name_any()) {
        // An array item's children carry `<node>-<index>`.
        let st = done.get(node.as_str()).or_else(|| {
            let (base, index) = node.rsplit_once('-')?;
            index.parse::<usize>().ok()?;
            done.get(base).filter(|st| !st.items.is_empty())
        });
        if let Some(st) = st {
            out.push(Deletion {
                api_version: kind.resource.api_version.clone(),
                kind: kind.resource.kind.clone(),
                name,
                plugin: st
                    .plugin
                    .as_ref()
                    .map(|p| p.name.clone())
                    .unwrap_or_default(),
            });
        }
    }
    out
}
