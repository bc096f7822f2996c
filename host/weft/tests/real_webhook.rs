//! Weft's admission webhook called by kube-apiserver (issue 39), through
//! deploy/base/webhook.yaml's own configurations: the controller manages
//! the certificate and writes the caBundle, kube-apiserver calls it over
//! TLS at `weft-webhook.weft-system.svc` and refuses a bad Workflow at
//! `kubectl create` with every problem, and admits good ones across
//! certificate renewals; with the webhook down,
//! `failurePolicy` decides. Its own control plane: the configurations it
//! installs would stand in the other tests' way.
//! (How the apiserver reaches a local process: `RealCluster::route_webhooks`.)

mod common;

use std::time::Duration;

use common::k8s::shared;
use common::{ControllerProcess, free_port, kubectl, kubectl_ok, root};

const BAD: &str = r#"{"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
  "metadata": {"name": "bad"}, "spec": {"nodes": [
    {"id": "a", "dependsOn": ["b"], "task": {"type": "pod"}},
    {"id": "b", "dependsOn": ["a"], "task": {"type": "pod"}},
    {"id": "c", "dependsOn": ["ghost"], "task": {"type": "pod"}},
    {"id": "d", "when": "1 +", "task": {"type": "pod"}},
    {"id": "e", "task": {"type": "no-such-type"}}]}}"#;

fn good(name: &str) -> String {
    format!(
        r#"{{"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow", "metadata": {{"name": "{name}"}},
        "spec": {{"nodes": [{{"id": "a", "task": {{"type": "pod",
          "config": {{"image": "busybox", "command": ["true"]}}}}}}]}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_calls_the_webhook_deploy_registers() {
    let cluster = shared();
    let kc = &cluster.kubeconfig;
    let client = cluster.client().await;
    weft::runtime::install_crd(&client).await.unwrap();
    kubectl_ok(kc, &["create", "namespace", "weft-system"], None).await;
    let webhook = root().join("deploy/base/webhook.yaml");
    let apply = ["apply", "--server-side", "-f", webhook.to_str().unwrap()];
    kubectl_ok(kc, &apply, None).await;
    let port = free_port();
    cluster.route_webhooks(port);

    // Before any controller ran: no caBundle, and failurePolicy Fail refuses.
    let out = kubectl(kc, &["create", "-f", "-"], Some(&good("early"))).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "created with no webhook serving");
    assert!(err.contains("failed calling webhook"), "{err}");

    let controller = ControllerProcess::start(
        kc,
        "webhook",
        &[
            "--webhook-port",
            &port.to_string(),
            "--leader-elect-namespace",
            "weft-system",
            // Renewed every 2 s or so: the rotation below.
            "--webhook-cert-validity",
            "6s",
        ],
    );
    controller.started_metrics().await;
    // The controller writes its CA into the configuration's caBundle.
    let bundle = "jsonpath={.webhooks[0].clientConfig.caBundle}";
    let mut ok = false;
    for _ in 0..300 {
        let out = kubectl_ok(
            kc,
            &[
                "get",
                "validatingwebhookconfiguration",
                "weft-validating",
                "-o",
                bundle,
            ],
            None,
        )
        .await;
        if !out.is_empty() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "no caBundle written:\n{}", controller.log());

    // A bad Workflow is refused by kube-apiserver with every problem.
    let mut refused = String::new();
    for _ in 0..100 {
        let out = kubectl(kc, &["create", "-f", "-"], Some(BAD)).await;
        assert!(!out.status.success(), "the bad Workflow was created");
        refused = String::from_utf8_lossy(&out.stderr).to_string();
        if refused.contains("denied the request") {
            break;
        }
        // The apiserver may hold the old (empty) caBundle for a moment.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for part in [
        "admission webhook \"workflows.validate.weft.dev\" denied the request",
        "cycle",
        "\"ghost\" is not a node",
        "node d: when: invalid CEL",
        "no plugin serves task type \"no-such-type\"",
    ] {
        assert!(
            refused.contains(part),
            "{part}: {refused}\n{}",
            controller.log()
        );
    }
    kubectl_ok(kc, &["create", "-f", "-"], Some(&good("fine"))).await;

    // Across certificate renewals (same CA, the caBundle stays), every
    // create kube-apiserver admits through the webhook succeeds.
    let not_after = "jsonpath={.items[0].metadata.annotations.weft\\.dev/not-after}";
    let secret = ["get", "secrets", "-A", "--field-selector"];
    let mut seen = std::collections::BTreeSet::new();
    let start = std::time::Instant::now();
    for i in 0.. {
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        let name = format!("rotated-{i}");
        let out = kubectl(kc, &["create", "-f", "-"], Some(&good(&name))).await;
        assert!(
            out.status.success(),
            "{name} refused during a rotation: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            controller.log()
        );
        let args = [
            &secret[..],
            &["metadata.name=weft-webhook-certs", "-o", not_after],
        ]
        .concat();
        seen.insert(kubectl_ok(kc, &args, None).await);
    }
    assert!(seen.len() >= 3, "renewed {} times: {seen:?}", seen.len());

    // The webhook down: Fail refuses, Ignore lets Workflows through.
    drop(controller);
    let out = kubectl(kc, &["create", "-f", "-"], Some(&good("down"))).await;
    assert!(!out.status.success(), "created with the webhook down");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("failed calling webhook"), "{err}");
    let ignore = r#"[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]"#;
    let config = "validatingwebhookconfiguration/weft-validating";
    kubectl_ok(kc, &["patch", config, "--type=json", "-p", ignore], None).await;
    kubectl_ok(kc, &["create", "-f", "-"], Some(&good("down"))).await;
}
