//! Per-plugin RBAC, enforced by the API server: the dev cluster with RBAC
//! on, deploy/'s Roles applied, and the real `weft controller` running as
//! its ServiceAccount with `--impersonate-plugins`, as deploy/ runs it.

mod common;

use std::time::Duration;

use common::{ControllerProcess, kubectl, kustomize, root};
use kube::{Api, api::PostParams};
use weft_dag::WorkflowPhase;

const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";

/// Applies YAML with the admin kubeconfig (no token: the cluster admin).
async fn apply(kubeconfig: &std::path::Path, yaml: &str) {
    let out = kubectl(kubeconfig, &["apply", "-f", "-"], Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// deploy/'s namespace, ServiceAccounts and RBAC (production overlay).
fn deployed_rbac() -> String {
    let keep = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    kustomize("deploy/overlays/production")
        .split("\n---\n")
        .filter(|doc| {
            keep.iter().any(|k| {
                doc.contains(&format!("\nkind: {k}\n")) || doc.starts_with(&format!("kind: {k}\n"))
            })
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

async fn run(
    workflows: &Api<weft::api::Workflow>,
    name: &str,
    task_type: &str,
) -> weft::api::Workflow {
    let spec = format!(
        "nodes:\n  - {{id: a, task: {{type: {task_type}, config: {{image: busybox, command: [\"true\"]}}}}}}\n"
    );
    let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(&spec).unwrap();
    let wf = weft::api::Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
    workflows.create(&PostParams::default(), &wf).await.unwrap();
    for _ in 0..600 {
        let wf = workflows.get(name).await.unwrap();
        if wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_write_as_their_service_accounts_and_the_api_server_refuses_undeclared_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft::dev::start_with(dir.path(), weft_cluster::Authorization::Rbac)
        .await
        .unwrap();
    let server = cluster.base_url();
    let admin = weft::runtime::client_for(&server).unwrap();
    weft::runtime::install_crd(&admin).await.unwrap();
    let admin_kubeconfig = dir.path().join("kubeconfig");
    apply(&admin_kubeconfig, &deployed_rbac()).await;

    // The controller as deploy/ runs it, under its ServiceAccount's name,
    // with the pod plugin (whose RBAC is in deploy/base), the echo guest
    // (declares Pods; no RBAC applied) and a guest that builds a kind it
    // did not declare.
    let kubeconfig = dir.path().join("controller.kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig_as(CONTROLLER)).unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (from, name) in [
        ("target/plugins", "pod"),
        ("target/test-guests", "echo"),
        ("target/test-guests", "undeclared-kind"),
    ] {
        for ext in ["wasm", "yaml"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(root().join(from).join(&file), plugins.join(&file)).unwrap();
        }
    }
    let controller = ControllerProcess::start(
        &kubeconfig,
        "weft-controller-0",
        &[
            "--plugins",
            plugins.to_str().unwrap(),
            "--plugin-namespace=weft-system",
            "--impersonate-plugins",
        ],
    );
    controller.metrics().await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(admin.clone(), "default");

    // The pod plugin's Pod is written as weft-plugin-pod.
    let ok = run(&workflows, "as-pod", "pod").await;
    assert_eq!(
        ok.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{}",
        controller.log()
    );
    let pod_sa = "system:serviceaccount:weft-system:weft-plugin-pod";
    let audit = cluster.audit();
    assert!(
        audit.iter().any(|r| r.user == pod_sa
            && r.resource == "pods"
            && r.verb == "patch"
            && r.impersonator.as_deref() == Some(CONTROLLER)),
        "no Pod written as {pod_sa}"
    );
    assert!(
        !audit
            .iter()
            .any(|r| r.user == CONTROLLER && r.resource == "pods" && r.verb == "patch"),
        "the controller wrote a Pod as itself"
    );

    // echo declares Pods, but no Role grants its ServiceAccount anything:
    // the API server refuses, and the node fails saying so.
    let refused = run(&workflows, "as-echo", "echo").await;
    let status = refused.status.as_ref().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let message = status.nodes["a"].message.clone().unwrap_or_default();
    assert!(
        message.contains("User \"system:serviceaccount:weft-system:weft-plugin-echo\" cannot")
            && message.contains("resource \"pods\""),
        "{message}"
    );

    // A kind the plugin did not declare: the host refuses it first...
    let undeclared = run(&workflows, "as-undeclared", "test-undeclared-kind").await;
    let status = undeclared.status.as_ref().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let message = status.nodes["a"].message.clone().unwrap_or_default();
    assert!(
        message.contains("not declared") || message.contains("undeclared"),
        "{message}"
    );
    // ...and the API server refuses it too, as the plugin's ServiceAccount:
    // an impersonated apply of a ConfigMap as weft-plugin-pod (kube-rs, as
    // the controller's own credentials do it) and `kubectl --as`.
    let mut config = kube::Config::new(server.parse().unwrap());
    config.auth_info.token = Some(CONTROLLER.to_string().into());
    config.auth_info.impersonate = Some(pod_sa.into());
    let as_pod = kube::Client::try_from(config).unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(as_pod, "default");
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "sneaky"}})).unwrap();
    let err = cms
        .patch(
            "sneaky",
            &kube::api::PatchParams::apply("weft").force(),
            &kube::api::Patch::Apply(&cm),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err}")
    };
    assert_eq!(s.code, 403);
    assert!(
        s.message.contains(&format!("User \"{pod_sa}\"")),
        "{}",
        s.message
    );
    let out = kubectl(
        &admin_kubeconfig,
        &[
            "--as",
            pod_sa,
            "create",
            "configmap",
            "sneaky",
            "-n",
            "default",
        ],
        None,
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is forbidden") && err.contains(pod_sa),
        "{err}"
    );
    drop(controller);
    cluster.shutdown().await;
}
