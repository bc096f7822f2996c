//! The admission webhook over HTTPS with a certificate it made itself,
//! called as the API server calls it (an AdmissionReview v1 POSTed over
//! TLS, the CA from its caBundle), here by curl.

mod common;

use std::sync::Arc;

use weft::webhook::{Validator, certs, server};

fn review(nodes: &str) -> String {
    format!(
        r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{
        "uid": "u-7", "kind": {{"group": "weft.dev", "version": "v1alpha1", "kind": "Workflow"}},
        "resource": {{"group": "weft.dev", "version": "v1alpha1", "resource": "workflows"}},
        "name": "wf", "namespace": "default", "operation": "CREATE", "userInfo": {{"username": "alice"}},
        "object": {{"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
                    "metadata": {{"name": "wf", "namespace": "default"}}, "spec": {{"nodes": {nodes}}}}}}}}}"#
    )
}

async fn curl(ca: &std::path::Path, port: u16, body: &str) -> serde_json::Value {
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--fail-with-body", "--cacert"])
        .arg(ca)
        .args([
            "-H",
            "content-type: application/json",
            "--data-binary",
            body,
        ])
        .arg(format!("https://localhost:{port}/validate"))
        .output()
        .await
        .expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_refuses_a_bad_workflow_over_tls_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let names = vec![
        "localhost".to_string(),
        "weft-webhook.weft-system.svc".into(),
    ];
    let issued = certs::Issued::new(&names, std::time::Duration::from_secs(3600)).unwrap();
    issued.write_to(dir.path()).unwrap();
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let (_, registry) =
        weft::runtime::load_plugins(&common::root().join("target/plugins"), None).unwrap();
    let validator = Arc::new(Validator::new(registry, false));
    let resolver = certs::Resolver::new(&issued.cert, &issued.key).unwrap();
    let addr = server::serve("127.0.0.1:0".parse().unwrap(), resolver, validator)
        .await
        .unwrap();
    let ca = dir.path().join("ca.crt");

    let ok = curl(
        &ca,
        addr.port(),
        &review(r#"[{"id": "a", "task": {"type": "pod"}}]"#),
    )
    .await;
    assert_eq!(ok["response"]["uid"], "u-7");
    assert_eq!(ok["response"]["allowed"], true, "{ok}");

    let bad = curl(
        &ca,
        addr.port(),
        &review(
            r#"[{"id": "a", "dependsOn": ["b"], "task": {"type": "pod"}},
                {"id": "b", "dependsOn": ["a"], "task": {"type": "pod"}},
                {"id": "c", "dependsOn": ["ghost"], "task": {"type": "pod"}},
                {"id": "d", "when": "1 +", "task": {"type": "pod"}},
                {"id": "e", "task": {"type": "no-such-type"}}]"#,
        ),
    )
    .await;
    assert_eq!(bad["response"]["allowed"], false, "{bad}");
    let message = bad["response"]["status"]["message"].as_str().unwrap();
    for part in [
        "cycle",
        "\"ghost\" is not a node",
        "node d: when: invalid CEL",
        "no plugin serves task type \"no-such-type\"",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

/// `weft controller --webhook-port` serves it, with the hot loader's
/// registry (what it knows is what the controller knows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_controller_serves_the_webhook() {
    let (dir, _cluster, kubeconfig, _client) = common::dev_cluster().await;
    let port = common::free_port();
    let certs = dir.path().join("webhook-certs");
    let controller = common::ControllerProcess::start(
        &kubeconfig,
        "webhook",
        &[
            "--webhook-port",
            &port.to_string(),
            "--webhook-cert-dir",
            certs.to_str().unwrap(),
            "--webhook-names",
            "localhost",
        ],
    );
    controller.metrics().await;
    let answer = curl(
        &certs.join("ca.crt"),
        port,
        &review(r#"[{"id": "a", "task": {"type": "spark-typo"}}]"#),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("no plugin serves task type \"spark-typo\""),
        "{message}"
    );
    // Managed in a Secret of its namespace, the files written beside.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(_client.clone(), "default");
    let secret = secrets.get("weft-webhook-certs").await.unwrap();
    let ca = std::fs::read(certs.join("ca.crt")).unwrap();
    assert_eq!(secret.data.unwrap()["ca.crt"].0, ca);
}
