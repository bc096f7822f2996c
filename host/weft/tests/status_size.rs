//! A large Workflow's status keeps its nodes compressed (Argo's
//! `compressedNodes`, above 256 KiB of nodes): written so through the API
//! with kubectl, kept by the API server (the CRD declares the field), and
//! read back as nodes by a kube client and by `weft get` (graph and YAML).

mod common;

use common::{dev_cluster, kubectl_ok, weft_ok};
use kube::Api;
use serde_json::json;
use weft::api::Workflow;
use weft_dag::{NodePhase, NodeStatus, WorkflowPhase, WorkflowStatus};

const WORKFLOW: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata:
  name: big
spec:
  nodes:
    - id: greet
      task:
        type: pod
";

/// A finished status of 3,000 nodes with outputs (about 370 KB as a map):
/// `greet` failed, the rest succeeded.
fn large_status() -> WorkflowStatus {
    let mut status = WorkflowStatus {
        phase: WorkflowPhase::Failed,
        ..Default::default()
    };
    for i in 0..3_000 {
        let node = NodeStatus {
            phase: NodePhase::Succeeded,
            started_at: Some("2026-11-25T10:00:00Z".into()),
            finished_at: Some(format!("2026-11-25T10:{:02}:{:02}Z", i / 60 % 60, i % 60)),
            outputs: json!({"rows": i}).as_object().cloned(),
            ..Default::default()
        };
        status.nodes.insert(format!("part-{i}"), node);
    }
    status.nodes.get_mut("part-0").unwrap().phase = NodePhase::Failed;
    let greet = status.nodes.remove("part-0").unwrap();
    status.nodes.insert("greet".into(), greet);
    status
}

#[tokio::test]
async fn a_large_status_is_stored_compressed_and_read_back_as_nodes() {
    let (_dir, _cluster, kc, client) = dev_cluster().await;
    kubectl_ok(&kc, &["create", "-f", "-"], Some(WORKFLOW)).await;

    let status = large_status();
    let patch = json!({ "status": status });
    let packed = patch["status"]["compressedNodes"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !packed.is_empty() && patch["status"].get("nodes").is_none(),
        "3,000 nodes are written compressed"
    );
    kubectl_ok(
        &kc,
        &[
            "patch",
            "workflow",
            "big",
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
        None,
    )
    .await;

    // The API server kept the field as written.
    let stored = kubectl_ok(
        &kc,
        &[
            "get",
            "workflow",
            "big",
            "-o",
            "jsonpath={.status.compressedNodes}",
        ],
        None,
    )
    .await;
    assert_eq!(stored.trim(), packed);

    // A kube client reads nodes.
    let wf = Api::<Workflow>::namespaced(client, "default")
        .get("big")
        .await
        .unwrap();
    let read = wf.status.expect("a status");
    assert_eq!(read.nodes.len(), 3_000);
    assert_eq!(read, status);

    // So does `weft get`: the graph shows greet's phase from the nodes.
    let out = weft_ok(&kc, &["get", "big", "-n", "default", "-o", "mermaid"]).await;
    assert!(out.contains("greet<br/>pod<br/>Failed"), "{out}");
    // And its YAML shows them as nodes, as `argo get` does.
    let out = weft_ok(&kc, &["get", "big", "-n", "default"]).await;
    let yaml: serde_json::Value = serde_yaml::from_str(&out).unwrap();
    assert_eq!(
        yaml["status"]["nodes"]["part-2999"]["outputs"]["rows"],
        2999
    );
    assert!(
        yaml["status"].get("compressedNodes").is_none(),
        "{out:.300}"
    );
}
