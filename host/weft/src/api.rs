//! The `Workflow` custom resource (`weft.dev/v1alpha1`).
//!
//! The spec and status types live in `weft-dag`, which has no Kubernetes
//! client in it; this module only gives them a Kubernetes identity, so the
//! CRD in `deploy/` is generated from the same types the scheduler uses.

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

/// `apiVersion` of Workflows.
pub const API_VERSION: &str = "weft.dev/v1alpha1";

/// The finalizer that lets the controller stop a workflow's children
/// (through each plugin's abort behaviour) before the Workflow goes away.
pub const FINALIZER: &str = "weft.dev/abort-children";

/// The CRD as YAML, exactly as committed in `deploy/crds/workflow.yaml`.
pub fn crd_yaml() -> String {
    let header = "# Generated from the Rust types by `weft crd`; do not edit.\n# A test fails when this file and the types drift apart.\n";
    let body = serde_yaml::to_string(&Workflow::crd()).expect("a CRD serializes");
    format!("{header}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed CRD is what the types generate: regenerate it with
    /// `cargo run -p weft -- crd > deploy/crds/workflow.yaml`.
    #[test]
    fn the_committed_crd_matches_the_types() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/crds/workflow.yaml"
        );
        let committed = std::fs::read_to_string(path).expect("deploy/crds/workflow.yaml");
        assert!(
            committed == crd_yaml(),
            "deploy/crds/workflow.yaml drifted from the Rust types; regenerate it with `cargo run -p weft -- crd > deploy/crds/workflow.yaml`"
        );
    }

    #[test]
    fn the_schema_keeps_free_form_fields() {
        let yaml = crd_yaml();
        assert!(yaml.contains("x-kubernetes-preserve-unknown-fields: true"));
        assert!(yaml.contains("subresources:"));
        assert!(yaml.contains("shortNames:"));
    }
}
