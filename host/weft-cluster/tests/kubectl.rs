//! The real `kubectl` (1.32) against the dev cluster, as a user runs it.
//! Skipped, loudly, when no `kubectl` is on PATH.

mod common;

use std::process::Stdio;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_describe_logs_delete() {
    let t = start_with(with_runner).await;
    let Some(k) = Kubectl::new(&t) else { return };
    let manifest = write(
        t.dir.path(),
        "app.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: demo}
data:
  mode: fast
---
apiVersion: v1
kind: Pod
metadata:
  name: hello
  labels: {app: demo}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: alpine:3
    command: [sh, -c, "echo hello from $MODE; echo done > /dev/termination-log"]
    env:
    - name: MODE
      valueFrom: {configMapKeyRef: {name: settings, key: mode}}
"#,
    );
    let out = k.ok(&["apply", "-f", &manifest]).await;
    assert!(
        out.contains("configmap/settings created") && out.contains("pod/hello created"),
        "{out}"
    );

    // Re-applying a change patches; an unchanged object stays unchanged.
    let changed = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("mode: fast", "mode: slow");
    std::fs::write(&manifest, changed).unwrap();
    let out = k.ok(&["apply", "-f", &manifest]).await;
    assert!(
        out.contains("configmap/settings configured") && out.contains("pod/hello unchanged"),
        "{out}"
    );
    let cm = k.json(&["get", "configmap", "settings"]).await;
    assert_eq!(cm["data"]["mode"], "slow");
    let yaml = k.ok(&["get", "configmap", "settings", "-o", "yaml"]).await;
    assert!(
        yaml.contains("mode: slow") && yaml.contains("kind: ConfigMap"),
        "{yaml}"
    );

    // Server-side apply takes over.
    let out = k
        .ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &manifest,
        ])
        .await;
    assert!(out.contains("serverside-applied"), "{out}");

    let list = k.json(&["get", "cm,pods", "-l", "app=demo"]).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let table = k.ok(&["get", "pods"]).await;
    assert!(table.contains("hello"), "{table}");
    assert!(
        table.starts_with("NAME") && table.contains("STATUS"),
        "server-side columns: {table}"
    );

    eventually("pod done", || async {
        let (_, out, _) = k
            .run(&["get", "pod", "hello", "-o", "jsonpath={.status.phase}"])
            .await;
        (out == "Succeeded").then_some(())
    })
    .await;
    let logs = k.ok(&["logs", "hello"]).await;
    assert!(
        logs == "hello from fast\n" || logs == "hello from slow\n",
        "{logs}"
    );
    let described = k.ok(&["describe", "pod", "hello"]).await;
    assert!(described.contains("ImageNotPulled"), "{described}");
    assert!(described.contains("Succeeded"), "{described}");

    let out = k.ok(&["delete", "-f", &manifest]).await;
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, err) = k.run(&["get", "configmap", "settings"]).await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (NotFound): configmaps \"settings\" not found"),
        "{err}"
    );
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_installs_the_spark_crd_and_manages_custom_resources() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sparkoperator.k8s.io_sparkapplications.yaml"
    );
    // Client-side apply stores the whole CRD in an annotation, over the
    // 256 KiB limit: refused, as by a real API server.
    let (ok, _, err) = k.run(&["apply", "-f", crd]).await;
    assert!(!ok);
    assert!(
        err.contains("Too long: must have at most 262144 bytes"),
        "{err}"
    );
    k.ok(&["apply", "--server-side", "-f", crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/sparkapplications.sparkoperator.k8s.io",
    ])
    .await;

    let app = write(
        t.dir.path(),
        "pi.yaml",
        r#"apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: pi
spec:
  type: Scala
  mode: cluster
  sparkVersion: 3.5.0
  mainApplicationFile: local:///opt/spark/examples.jar
  driver: {}
  executor: {}
"#,
    );
    let out = k.ok(&["apply", "-f", &app]).await;
    assert!(
        out.contains("sparkapplication.sparkoperator.k8s.io/pi created"),
        "{out}"
    );
    k.ok(&[
        "patch",
        "sparkapp",
        "pi",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"sparkVersion":"3.5.1"}}"#,
    ])
    .await;
    let got = k.json(&["get", "sparkapplications", "pi"]).await;
    assert_eq!(got["spec"]["sparkVersion"], "3.5.1");
    assert_eq!(got["metadata"]["generation"], 2);
    k.ok(&[
        "patch",
        "sparkapp",
        "pi",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"applicationState":{"state":"COMPLETED"},"driverInfo":{}}}"#,
    ])
    .await;
    let got = k.json(&["get", "sparkapp", "pi"]).await;
    assert_eq!(got["status"]["applicationState"]["state"], "COMPLETED");
    let table = k.ok(&["get", "sparkapp"]).await;
    assert!(table.contains("pi"), "{table}");
    k.ok(&["delete", "-f", &app]).await;
    let list = k.json(&["get", "sparkapp"]).await;
    assert!(list["items"].as_array().unwrap().is_empty());
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    let mut child = k
        .cmd(&[
            "get",
            "configmaps",
            "-w",
            "--output-watch-events",
            "-o",
            "json",
            "-v=6",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let stdout = child.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut buf = String::new();
        let mut events = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            buf.push_str(&line);
            buf.push('\n');
            // Each event is a pretty-printed JSON document.
            if let Ok(v) = serde_json::from_str::<Value>(&buf) {
                buf.clear();
                let summary = format!(
                    "{} {}",
                    v["type"].as_str().unwrap_or(""),
                    v["object"]["data"]["v"].as_str().unwrap_or("")
                );
                events.push(summary);
                if events.len() == 3 {
                    return events;
                }
            }
        }
        events
    });
    // Wait until kubectl has listed and started its watch (its -v=6 log
    // shows the request), then change things.
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("watch=true") {
            break;
        }
    }
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "w"}, "data": {"v": "1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    cms.delete("w", &Default::default()).await.unwrap();
    let events = tokio::time::timeout(std::time::Duration::from_secs(60), reader)
        .await
        .unwrap()
        .unwrap();
    let _ = child.kill().await;
    assert_eq!(events, ["ADDED 1", "MODIFIED 2", "DELETED 2"]);
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_follow() {
    let t = start_with(with_runner).await;
    let Some(k) = Kubectl::new(&t) else { return };
    k.ok(&[
        "run",
        "counter",
        "--image=busybox",
        "--restart=Never",
        "--command",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3; do echo tick $i; sleep 0.3; done",
    ])
    .await;
    let out = eventually("logs -f", || async {
        let (ok, out, _) = k.run(&["logs", "-f", "counter"]).await;
        ok.then_some(out)
    })
    .await;
    assert_eq!(out, "tick 1\ntick 2\ntick 3\n");
    k.ok(&["delete", "pod", "counter"]).await;
    t.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_and_namespace_deletion() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    // These generators send protobuf bodies.
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&[
        "create",
        "configmap",
        "cfg",
        "-n",
        "team",
        "--from-literal=a=1",
    ])
    .await;
    k.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team",
        "--from-literal=token=t0k",
    ])
    .await;
    k.ok(&["create", "serviceaccount", "bot", "-n", "team"])
        .await;
    let secret = k.json(&["get", "secret", "creds", "-n", "team"]).await;
    assert_eq!(secret["data"]["token"], "dDBr");
    assert_eq!(secret["type"], "Opaque");
    let cm = k.json(&["get", "configmap", "cfg", "-n", "team"]).await;
    assert_eq!(cm["data"]["a"], "1");

    // Deleting a namespace empties it first; kubectl waits for it to go.
    k.ok(&["delete", "namespace", "team"]).await;
    let (ok, _, err) = k.run(&["get", "namespace", "team"]).await;
    assert!(!ok && err.contains("NotFound"), "{err}");
    let left = k
        .json(&["get", "configmaps,secrets,serviceaccounts", "-n", "team"])
        .await;
    assert!(left["items"].as_array().unwrap().is_empty());
    t.cluster.shutdown().await;
}
