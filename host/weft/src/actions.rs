//! What a user does to a Workflow after submitting it, as `argo` offers it:
//! retry, resubmit, suspend, resume, stop and terminate. The CLI and the
//! admin API both call [`act`], so both check and write the same thing.
//!
//! Every action is a write to the Workflow's spec or metadata that the
//! controller carries out (it alone writes status): what was asked is in
//! the spec, what was done in the status, both visible to `kubectl`, and
//! a restarted controller picks up where it was. Each is idempotent: doing
//! it twice is doing it once (a retry request carries an id the
//! controller acts on once).

use std::time::{SystemTime, UNIX_EPOCH};

use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use weft_dag::{
    WorkflowPhase,
    actions::{RETRY_ANNOTATION, RetryRequest},
};

use crate::api::SKIP_CACHE_ANNOTATION;
use crate::api::Workflow;
use crate::events::record_event;
use crate::metrics::Metrics;

/// An action on a Workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a Failed or Aborted workflow again from its failed and skipped
    /// nodes (and from `node` and its descendants, if given).
    Retry {
        /// Restart from this node too.
        node: Option<String>,
    },
    /// Create a new workflow with the same spec and inputs.
    Resubmit {
        /// Let its cached nodes read the cache (otherwise they run).
        memoized: bool,
    },
    /// Start no new node.
    Suspend,
    /// Start nodes again.
    Resume,
    /// Abort running nodes, then run the exit handlers.
    Stop,
    /// Abort running nodes; no exit handler runs.
    Terminate,
    /// Approve the approval gate `node`: the nodes after it may run.
    Approve {
        /// The gate's node id.
        node: String,
    },
    /// Reject the approval gate `node`: it fails with the reason.
    Reject {
        /// The gate's node id.
        node: String,
        /// Why (the node's message).
        reason: String,
    },
}

/// Why an action cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The workflow or node does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Not in a state the action applies to.
    #[error("{0}")]
    Precondition(String),
    /// The API server said no.
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

/// What an action did: the Workflow it changed (for a resubmit, the new
/// one) and a line for the user.
pub struct Done {
    /// The Workflow after the change.
    pub workflow: Workflow,
    /// What happened, e.g. `suspended`.
    pub message: String,
}

/// Does `action` to Workflow `namespace/name` on behalf of `by` (recorded
/// in an Event on it, e.g. `alice through the admin API`).
pub async fn act(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
    action: &Action,
    by: &str,
) -> Result<Done, ActionError> {
    let api: Api<Workflow> = Api::namespaced(client.clone(), namespace);
    let wf = api.get_opt(name).await?.ok_or_else(|| {
        ActionError::NotFound(format!("workflow {namespace}/{name} does not exist"))
    })?;
    let full = format!("{namespace}/{name}");
    let phase = wf.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let (patch, reason, message) = match action {
        Action::Resubmit { memoized } => {
            let new = resubmit(&api, &wf, *memoized).await?;
            metrics.api_write("workflow");
            let msg = format!("resubmitted as {}", new.name_any());
            record_event(
                client,
                metrics,
                &wf,
                "Normal",
                "Resubmitted",
                &format!("{msg} by {by}"),
            )
            .await;
            return Ok(Done {
                workflow: new,
                message: msg,
            });
        }
        Action::Retry { node } => retry_patch(&wf, &full, phase, node.as_deref())?,
        Action::Approve { node } => gate_patch(&wf, &full, node, None)?,
        Action::Reject { node, reason } => gate_patch(&wf, &full, node, Some(reason))?,
        other => {
            if phase.is_terminal() {
                return Err(ActionError::Precondition(format!(
                    "workflow {full} already ended ({phase:?}); only a running workflow can be {}",
                    verb(other)
                )));
            }
            let spec = match other {
                Action::Suspend => json!({"suspend": true}),
                Action::Resume => json!({"suspend": null}),
                Action::Stop => json!({"shutdown": "Stop"}),
                _ => json!({"shutdown": "Terminate"}),
            };
            let what = reason(other).trim_end_matches("Requested").to_lowercase();
            (
                json!({"spec": spec}),
                reason(other),
                format!("{what} requested"),
            )
        }
    };
    let wf = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    metrics.api_write("workflow");
    record_event(
        client,
        metrics,
        &wf,
        "Normal",
        reason,
        &format!("{message} by {by}"),
    )
    .await;
    Ok(Done {
        workflow: wf,
        message,
    })
}

fn verb(a: &Action) -> &'static str {
    match a {
        Action::Retry { .. } => "retried",
        Action::Resubmit { .. } => "resubmitted",
        Action::Suspend => "suspended",
        Action::Resume => "resumed",
        Action::Stop => "stopped",
        Action::Terminate => "terminated",
        Action::Approve { .. } => "approved",
        Action::Reject { .. } => "rejected",
    }
}

/// The reason of the Event that records a request.
fn reason(a: &Action) -> &'static str {
    match a {
        Action::Retry { .. } => "RetryRequested",
        Action::Resubmit { .. } => "Resubmitted",
        Action::Suspend => "SuspendRequested",
        Action::Resume => "ResumeRequested",
        Action::Stop => "StopRequested",
        Action::Terminate => "TerminateRequested",
        Action::Approve { .. } => "GateApproved",
        Action::Reject { .. } => "GateRejected",
    }
}

/// Approves or rejects (with the reason) an approval gate that still
/// waits, through its annotations (what `kubectl annotate` can do too:
/// `approve.weft.dev/NODE=true`, or `=false` with
/// `rejection.weft.dev/NODE=REASON`).
fn gate_patch(
    wf: &Workflow,
    full: &str,
    node: &str,
    rejection: Option<&String>,
) -> Result<(Value, &'static str, String), ActionError> {
    let status = wf.status.as_ref();
    let spec = status
        .and_then(|s| s.resolved_spec.as_deref())
        .unwrap_or(&wf.spec.spec);
    let gate =
        spec.nodes.iter().find(|n| n.id == node).ok_or_else(|| {
            ActionError::NotFound(format!("workflow {full} has no node {node:?}"))
        })?;
    if gate
        .gate
        .as_ref()
        .and_then(|g| g.approval.as_ref())
        .is_none()
    {
        return Err(ActionError::Precondition(format!(
            "node {node} of workflow {full} is not an approval gate"
        )));
    }
    if status
        .and_then(|s| s.nodes.get(node))
        .is_some_and(|n| n.phase.is_terminal())
    {
        return Err(ActionError::Precondition(format!(
            "gate {node} of workflow {full} has already ended"
        )));
    }
    let approve = weft_dag::spec::approval_annotation(node);
    let why = weft_dag::spec::rejection_annotation(node);
    Ok(match rejection {
        None => (
            json!({"metadata": {"annotations": {approve: "true"}}}),
            "GateApproved",
            format!("gate {node} approved"),
        ),
        Some(r) => (
            json!({"metadata": {"annotations": {approve: "false", why: r}}}),
            "GateRejected",
            format!("gate {node} rejected ({r})"),
        ),
    })
}

/// A retry: a new request id in the annotation, and any stop asked
/// before lifted (or the retried workflow would stop again at once).
fn retry_patch(
    wf: &Workflow,
    full: &str,
    phase: WorkflowPhase,
    node: Option<&str>,
) -> Result<(Value, &'static str, String), ActionError> {
    let status = wf.status.clone().unwrap_or_default();
    let pending = wf
        .annotations()
        .get(RETRY_ANNOTATION)
        .map(|v| RetryRequest::parse(v))
        .filter(|r| !r.done(&status));
    if let Some(r) = pending {
        let msg = format!("retry {} is already requested", r.id);
        return Ok((json!({}), "RetryRequested", msg));
    }
    if !matches!(phase, WorkflowPhase::Failed | WorkflowPhase::Aborted) {
        return Err(ActionError::Precondition(format!(
            "workflow {full} is {phase:?}; only a Failed or Aborted workflow can be retried"
        )));
    }
    let spec = status.resolved_spec.as_deref().unwrap_or(&wf.spec.spec);
    if let Some(n) = node
        && !spec.nodes.iter().any(|x| x.id == n)
    {
        return Err(ActionError::NotFound(format!(
            "workflow {full} has no node {n:?}"
        )));
    }
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let req = RetryRequest {
        id: format!("r{millis}"),
        node: node.map(str::to_string),
    };
    let patch = json!({
        "metadata": {"annotations": {RETRY_ANNOTATION: req.value()}},
        "spec": {"shutdown": null, "abort": null},
    });
    let from = node.map(|n| format!(" from node {n}")).unwrap_or_default();
    Ok((
        patch,
        "RetryRequested",
        format!("retry {}{from} requested", req.id),
    ))
}

/// A new Workflow from `wf`'s spec and inputs, named `<name>-<suffix>` by
/// the API server, with the user's labels; without `memoized` its cached
/// nodes run again (and refresh the cache).
async fn resubmit(
    api: &Api<Workflow>,
    wf: &Workflow,
    memoized: bool,
) -> Result<Workflow, kube::Error> {
    resubmit_as(api, wf, memoized, None).await
}

/// A new Workflow with `wf`'s spec and inputs (a live one's, or an
/// archived one's), named `name` or generated from `wf`'s.
pub async fn resubmit_as(
    api: &Api<Workflow>,
    wf: &Workflow,
    memoized: bool,
    name: Option<&str>,
) -> Result<Workflow, kube::Error> {
    let mut spec = wf.spec.spec.clone();
    spec.abort = false;
    spec.shutdown = None;
    spec.suspend = false;
    let mut annotations = std::collections::BTreeMap::from([(
        "weft.dev/resubmitted-from".to_string(),
        wf.name_any(),
    )]);
    if !memoized {
        annotations.insert(SKIP_CACHE_ANNOTATION.into(), "true".into());
    }
    let labels: std::collections::BTreeMap<String, String> = wf
        .labels()
        .iter()
        .filter(|(k, _)| !k.starts_with("weft.dev/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut new = Workflow::new("", crate::api::WorkflowResourceSpec { spec });
    new.metadata.name = name.map(str::to_string);
    if name.is_none() {
        new.metadata.generate_name = Some(format!("{}-", wf.name_any()));
    }
    new.metadata.labels = Some(labels);
    new.metadata.annotations = Some(annotations);
    api.create(&PostParams::default(), &new).await
}
