//! The product on the real control plane (issue 39): kube-apiserver, etcd,
//! the controller-manager's garbage collector and kube-scheduler built from
//! their Go modules (`make k8s`), one cluster for this file. Pods run on a
//! `weft node` registered as a Node with node credentials; the controller
//! runs as a separate process, as in a cluster.

mod common;

use std::time::Duration;

use common::k8s::{NodeProcess, RealCluster, shared};
use common::{ControllerProcess, kubectl, kubectl_ok, weft_ok};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tokio::sync::OnceCell;

/// The Node and the controller every test here shares, started once.
struct Bed {
    cluster: &'static RealCluster,
    _node: NodeProcess,
    controller: ControllerProcess,
}

static BED: OnceCell<Bed> = OnceCell::const_new();

async fn bed() -> &'static Bed {
    BED.get_or_init(|| async {
        let cluster = shared();
        let client = cluster.client().await;
        weft::runtime::install_crd(&client).await.unwrap();
        let node = NodeProcess::start(cluster, "weft-1");
        // Artifacts in a local directory, as `weft dev` keeps them: the
        // node runs pods as processes of this machine.
        let dir = tempfile::tempdir().unwrap().keep();
        let repo = dir.join("artifact-repository.yaml");
        let local = format!("local: {{path: {}}}\n", dir.join("artifacts").display());
        std::fs::write(&repo, local).unwrap();
        let args = [
            "--artifact-repository",
            repo.to_str().unwrap(),
            "--io-binary",
            env!("CARGO_BIN_EXE_weft"),
        ];
        let controller = ControllerProcess::start(&cluster.kubeconfig, "real", &args);
        // Statics are never dropped: the cluster's reaper stops them.
        cluster.adopt(node.pid());
        cluster.adopt(controller.pid());
        controller.started_metrics().await;
        Bed {
            cluster,
            _node: node,
            controller,
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_ends_as_it_says_through_kubectl_on_kube_apiserver() {
    let bed = bed().await;
    let kc = &bed.cluster.kubeconfig;
    let client = bed.cluster.client().await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(client.clone(), "default");
    for example in common::examples::examples() {
        common::examples::check_through_kubectl(kc, &workflows, &example).await;
    }
    // hello's pod ran on the node; its output comes back through
    // kube-apiserver's proxy to the node's kubelet endpoint.
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let lp = ListParams::default().labels("weft.dev/node=greet");
    let greet = pods.list(&lp).await.unwrap().items;
    let pod = greet
        .iter()
        .find(|p| p.labels()["weft.dev/workflow"].starts_with("hello-"))
        .expect("hello's greet pod");
    assert_eq!(
        pod.spec.as_ref().unwrap().node_name.as_deref(),
        Some("weft-1")
    );
    let logs = kubectl_ok(kc, &["logs", &pod.name_any()], None).await;
    assert_eq!(logs.trim(), "hello, world", "{:#?}", pod.status);
    let wf = pod.labels()["weft.dev/workflow"].clone();
    let out = weft_ok(kc, &["logs", &wf]).await;
    assert!(out.contains("hello, world"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_workflow_deletes_its_pods_through_the_garbage_collector() {
    let bed = bed().await;
    let kc = &bed.cluster.kubeconfig;
    let client = bed.cluster.client().await;
    let wf = r#"{"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "gc-me", "namespace": "gc"},
        "spec": {"nodes": [
            {"id": "a", "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}},
            {"id": "b", "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}}]}}"#;
    kubectl_ok(kc, &["create", "namespace", "gc"], None).await;
    kubectl_ok(kc, &["create", "-f", "-"], Some(wf)).await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(client.clone(), "gc");
    let done = |w: &weft::api::Workflow| w.status.as_ref().is_some_and(|s| s.phase.is_terminal());
    let w = common::wait_workflow(&workflows, "gc-me", done).await;
    let phase = w.status.map(|s| format!("{:?}", s.phase));
    assert_eq!(
        phase.as_deref(),
        Some("Succeeded"),
        "{}",
        bed.controller.log()
    );
    let pods: Api<Pod> = Api::namespaced(client, "gc");
    let lp = ListParams::default().labels("weft.dev/workflow=gc-me");
    assert_eq!(pods.list(&lp).await.unwrap().items.len(), 2);
    kubectl_ok(kc, &["delete", "workflow", "gc-me", "-n", "gc"], None).await;
    for _ in 0..600 {
        if pods.list(&lp).await.unwrap().items.is_empty() {
            // And the namespace controller empties and removes a namespace.
            kubectl_ok(
                kc,
                &["delete", "namespace", "gc", "--wait=true", "--timeout=120s"],
                None,
            )
            .await;
            let out = kubectl(kc, &["get", "namespace", "gc"], None).await;
            assert!(!out.status.success());
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the garbage collector left gc-me's pods; kube-controller-manager:\n{}",
        bed.cluster.log("kube-controller-manager")
    );
}
