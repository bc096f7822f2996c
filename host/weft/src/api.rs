//! The `Workflow` custom resource (`weft.dev/v1alpha1`).
//!
//! The spec and status types live in `weft-dag`, which has no Kubernetes
//! client in it; this module only gives them a Kubernetes identity, so the
//! CRD in `deploy/` is generated from the same types the scheduler uses.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use weft_dag::{WorkflowSpec as Spec, WorkflowStatus};

/// The spec of a `Workflow`: [`weft_dag::WorkflowSpec`] under a Kubernetes name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "weft.dev",
    version = "v1alpha1",
    kind = "Workflow",
    plural = "workflows",
    shortname = "wf",
    namespaced,
    status = "WorkflowStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Progress","type":"string","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.message","priority":1}"#
)]
pub struct WorkflowResourceSpec {
    /// The DAG and its settings.
    #[serde(flatten)]
    pub spec: Spec,
}

/// The spec of a `WorkflowTemplate`: [`weft_dag::template::WorkflowTemplateSpec`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "weft.dev",
    version = "v1alpha1",
    kind = "WorkflowTemplate",
    plural = "workflowtemplates",
    shortname = "wftmpl",
    namespaced,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct WorkflowTemplateResourceSpec {
    /// The reusable workflow and its fixed inputs.
    #[serde(flatten)]
    pub spec: weft_dag::template::WorkflowTemplateSpec,
}

/// The spec of a `CronWorkflow`: [`weft_dag::cron::CronWorkflowSpec`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "weft.dev",
    version = "v1alpha1",
    kind = "CronWorkflow",
    plural = "cronworkflows",
    shortname = "cwf",
    namespaced,
    status = "weft_dag::cron::CronWorkflowStatus",
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#,
    printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Last","type":"date","jsonPath":".status.lastScheduledTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct CronWorkflowResourceSpec {
    /// The schedule and the Workflow it launches.
    #[serde(flatten)]
    pub spec: weft_dag::cron::CronWorkflowSpec,
}

/// The spec of a `TaskCache`: one namespace's cached results of one task
/// type (`docs/lifecycle.md`). A kind of Weft's own rather than
/// ConfigMaps, so the controller needs no cluster-wide access to
/// ConfigMaps (which hold other applications' configuration).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "weft.dev",
    version = "v1alpha1",
    kind = "TaskCache",
    plural = "taskcaches",
    namespaced,
    printcolumn = r#"{"name":"Task Type","type":"string","jsonPath":".spec.taskType"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TaskCacheSpec {
    /// The task type whose results it holds.
    pub task_type: String,
    /// Entries by cache key (a sha256 in hex, `weft_dag::cache::key`).
    #[serde(default)]
    #[schemars(schema_with = "cache_entries")]
    pub entries: std::collections::BTreeMap<String, weft_dag::cache::CacheEntry>,
}

fn cache_entries(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

/// `apiVersion` of Workflows.
pub const API_VERSION: &str = "weft.dev/v1alpha1";

/// Set to "true" on a Workflow (`weft resubmit` without `--memoized`):
/// its cached nodes run and refresh the cache instead of reading it.
pub const SKIP_CACHE_ANNOTATION: &str = "weft.dev/skip-cache";

/// The finalizer earlier controllers put on Workflows to stop their
/// children first. None is added now (the garbage collector deletes the
/// owned children); a Workflow that still carries it is aborted and
/// released when deleted (the controller's `settle` stage).
pub const FINALIZER: &str = "weft.dev/abort-children";

/// The finalizer on a Workflow whose artifacts are to be deleted from the
/// artifact repository (`artifactGC`, `controller/artifact_gc.rs`): the
/// Workflow stays, deleting, until its objects are gone, so a controller
/// killed midway finishes the job when it is back.
pub const ARTIFACT_GC_FINALIZER: &str = "weft.dev/artifact-gc";

/// Weft's CRDs by the file name each has in `deploy/crds/` (`weft crd
/// KIND` prints one).
pub fn crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("workflow.yaml", Workflow::crd()),
        ("workflowtemplate.yaml", WorkflowTemplate::crd()),
        ("cronworkflow.yaml", CronWorkflow::crd()),
        ("taskcache.yaml", TaskCache::crd()),
        ("lock.yaml", crate::sync::Lock::crd()),
    ]
}

/// A CRD as YAML, exactly as committed in `deploy/crds/`.
pub fn yaml_of(crd: &CustomResourceDefinition) -> String {
    let header = "# Generated from the Rust types by `weft crd`; do not edit.\n# A test fails when this file and the types drift apart.\n";
    let body = serde_yaml::to_string(crd).expect("a CRD serializes");
    format!("{header}{body}")
}

/// The Workflow CRD as YAML, exactly as committed in `deploy/crds/workflow.yaml`.
pub fn crd_yaml() -> String {
    yaml_of(&Workflow::crd())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed CRDs are what the types generate: regenerate them
    /// with `cargo run -p weft -- crd KIND > deploy/crds/KIND.yaml`.
    #[test]
    fn the_committed_crds_match_the_types() {
        for (file, crd) in crds() {
            let path = format!("{}/../../deploy/crds/{file}", env!("CARGO_MANIFEST_DIR"));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            let kind = file.trim_end_matches(".yaml");
            assert!(
                committed == yaml_of(&crd),
                "deploy/crds/{file} drifted from the Rust types; regenerate it with `cargo run -p weft -- crd {kind} > deploy/crds/{file}`"
            );
        }
    }

    #[test]
    fn the_schema_keeps_free_form_fields() {
        let yaml = crd_yaml();
        assert!(yaml.contains("x-kubernetes-preserve-unknown-fields: true"));
        assert!(yaml.contains("subresources:"));
        assert!(yaml.contains("shortNames:"));
    }
}
