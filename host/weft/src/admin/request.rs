//! Reading what a caller sent: a spec or a whole manifest, and the
//! cluster's answers as gRPC statuses a client can act on.

use tonic::Status;
use weft_dag::WorkflowSpec;

use crate::admin::pb;
use crate::api::Workflow;

/// A spec from JSON or YAML text (YAML is a superset of JSON): a bare
/// spec, or a whole Workflow manifest (then also its metadata).
pub(super) fn parse_spec(
    text: &str,
) -> Result<(WorkflowSpec, Option<kube::api::ObjectMeta>), Status> {
    if text.trim().is_empty() {
        return Err(Status::invalid_argument(
            "spec: required (a Workflow spec or manifest as JSON or YAML)",
        ));
    }
    let bad = |e: String| Status::invalid_argument(format!("spec: {e}"));
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let is_manifest = value.get("apiVersion").is_some() || value.get("kind").is_some();
    if !is_manifest {
        return serde_yaml::from_value(value)
            .map(|s| (s, None))
            .map_err(|e| bad(e.to_string()));
    }
    let (api_version, kind) = (value.get("apiVersion"), value.get("kind"));
    let (api_version, kind) = (
        api_version.and_then(|v| v.as_str()).unwrap_or_default(),
        kind.and_then(|v| v.as_str()).unwrap_or_default(),
    );
    if api_version != "weft.dev/v1alpha1" || kind != "Workflow" {
        return Err(bad(format!(
            "a manifest of apiVersion {api_version:?} kind {kind:?}; expected apiVersion weft.dev/v1alpha1, kind Workflow"
        )));
    }
    let wf: Workflow =
        serde_yaml::from_value(value).map_err(|e| bad(format!("the manifest: {e}")))?;
    Ok((wf.spec.spec, Some(wf.metadata)))
}

/// What the request leaves empty comes from the manifest's metadata.
pub(super) fn fill_from_manifest(
    req: &mut pb::CreateExecutionRequest,
    meta: kube::api::ObjectMeta,
) {
    if req.namespace.is_empty() {
        req.namespace = meta.namespace.unwrap_or_else(|| "default".into());
    }
    if req.name.is_empty() && req.generate_name.is_empty() {
        req.name = meta.name.unwrap_or_default();
        req.generate_name = meta.generate_name.unwrap_or_default();
    }
    for (k, v) in meta.labels.unwrap_or_default() {
        req.labels.entry(k).or_insert(v);
    }
}

/// A kube error as the gRPC status a client can act on.
pub(super) fn kube_status(e: kube::Error, what: &str) -> Status {
    match &e {
        kube::Error::Api(s) => {
            let msg = format!("{what}: {}", s.message);
            match s.code {
                404 => Status::not_found(msg),
                409 => Status::already_exists(msg),
                400 | 422 => Status::invalid_argument(msg),
                403 => Status::permission_denied(msg),
                429 => Status::resource_exhausted(msg),
                _ => Status::unavailable(msg),
            }
        }
        _ => Status::unavailable(format!("{what}: the cluster did not answer: {e}")),
    }
}
