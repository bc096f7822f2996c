//! Dev-cluster fidelity (issue 39): the same requests sent to Weft's dev
//! cluster and to kube-apiserver, answers compared — status code, reason,
//! causes, message, `Warning` headers and the returned object (without
//! uids, timestamps, resourceVersions, managedFields, continue tokens).
//! Watches (410 Gone after a compaction, initial events and their
//! bookmark) are compared by their events, and kubectl commands (a
//! `kind: List`, `create role` in protobuf, `--validate` strict, warn and
//! ignore) by exit status and output. `DIFF_SHOW=PREFIX` prints the
//! answers of the cases whose names start so.
//! Every difference must be listed, with its reason, in
//! host/weft-cluster/README.md's "Differences from kube-apiserver" table;
//! a new one, or a listed one that went away, fails the test.

mod common;

use std::collections::BTreeSet;

use kube::Client;
use serde_json::{Value, json};

/// One request of the sequence, sent as `user` (None: the admin).
struct Case {
    name: &'static str,
    user: Option<&'static str>,
    method: &'static str,
    path: &'static str,
    content_type: &'static str,
    body: Value,
    impersonate: Option<&'static str>,
    /// Compact both servers' history first (etcd's; the dev cluster keeps
    /// a short one here), so an old resourceVersion is gone.
    compacted: bool,
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn case(name: &'static str, method: &'static str, path: &'static str, body: Value) -> Case {
    Case {
        name,
        user: None,
        method,
        path,
        content_type: JSON,
        body,
        impersonate: None,
        compacted: false,
    }
}

fn workflow(extra: Value) -> Value {
    let mut w = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "w", "namespace": "diff"},
        "spec": {"nodes": [{"id": "a", "task": {"type": "pod"}}]}});
    if let (Some(w), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            w.insert(k.clone(), v.clone());
        }
    }
    w
}

/// The requests the controller and kubectl make, and the error cases.
fn cases() -> Vec<Case> {
    const CMS: &str = "/api/v1/namespaces/diff/configmaps";
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}})
    };
    vec![
        case(
            "create-namespace",
            "POST",
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff"}}),
        ),
        case("create-configmap", "POST", CMS, cm("a")),
        case(
            "get-configmap",
            "GET",
            "/api/v1/namespaces/diff/configmaps/a",
            Value::Null,
        ),
        case("create-duplicate", "POST", CMS, cm("a")),
        case(
            "get-missing",
            "GET",
            "/api/v1/namespaces/diff/configmaps/nope",
            Value::Null,
        ),
        case("create-invalid-name", "POST", CMS, cm("Bad_Name")),
        case(
            "update-stale",
            "PUT",
            "/api/v1/namespaces/diff/configmaps/a",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "stale"}}),
        ),
        Case {
            content_type: MERGE,
            ..case(
                "merge-patch",
                "PATCH",
                "/api/v1/namespaces/diff/configmaps/a",
                json!({"data": {"k2": "v2"}}),
            )
        },
        case("create-b", "POST", CMS, cm("b")),
        case("create-c", "POST", CMS, cm("c")),
        case(
            "list-label-selector",
            "GET",
            "/api/v1/namespaces/diff/configmaps?labelSelector=app%3Dx",
            Value::Null,
        ),
        case(
            "list-field-selector",
            "GET",
            "/api/v1/namespaces/diff/configmaps?fieldSelector=metadata.name%3Db",
            Value::Null,
        ),
        case(
            "list-bad-selector",
            "GET",
            "/api/v1/namespaces/diff/configmaps?labelSelector=a%3D%3D%3Db",
            Value::Null,
        ),
        case(
            "list-page",
            "GET",
            "/api/v1/namespaces/diff/configmaps?limit=1",
            Value::Null,
        ),
        Case {
            content_type: APPLY,
            ..case(
                "apply-alice",
                "PATCH",
                "/api/v1/namespaces/diff/configmaps/d?fieldManager=alice",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"k": "alice"}}),
            )
        },
        Case {
            content_type: APPLY,
            ..case(
                "apply-bob-conflict",
                "PATCH",
                "/api/v1/namespaces/diff/configmaps/d?fieldManager=bob",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"k": "bob"}}),
            )
        },
        Case {
            content_type: APPLY,
            ..case(
                "apply-bob-force",
                "PATCH",
                "/api/v1/namespaces/diff/configmaps/d?fieldManager=bob&force=true",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"k": "bob"}}),
            )
        },
        case(
            "workflow-strict",
            "POST",
            "/apis/weft.dev/v1alpha1/namespaces/diff/workflows?fieldValidation=Strict",
            workflow(json!({"bogus": 1})),
        ),
        case(
            "workflow-warn",
            "POST",
            "/apis/weft.dev/v1alpha1/namespaces/diff/workflows?fieldValidation=Warn",
            workflow(json!({"bogus": 1})),
        ),
        case(
            "workflow-schema",
            "POST",
            "/apis/weft.dev/v1alpha1/namespaces/diff/workflows",
            workflow(
                json!({"metadata": {"name": "w2", "namespace": "diff"}, "spec": {"nodes": "not a list"}}),
            ),
        ),
        Case {
            user: Some("eve"),
            ..case(
                "rbac-denied",
                "GET",
                "/api/v1/namespaces/diff/configmaps",
                Value::Null,
            )
        },
        Case {
            impersonate: Some("eve"),
            ..case(
                "impersonated-denied",
                "GET",
                "/api/v1/namespaces/diff/configmaps/a",
                Value::Null,
            )
        },
        // Watches end by timeoutSeconds; their events are compared.
        case(
            "create-service",
            "POST",
            "/api/v1/namespaces/diff/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"type": "ExternalName", "externalName": "example.com"}}),
        ),
        Case {
            compacted: true,
            ..case(
                "watch-too-old",
                "GET",
                "/api/v1/namespaces/diff/services?watch=true&resourceVersion=1&timeoutSeconds=1",
                Value::Null,
            )
        },
        case(
            "watch-initial-events-bookmark",
            "GET",
            "/api/v1/namespaces/diff/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
            Value::Null,
        ),
        case(
            "delete-configmap",
            "DELETE",
            "/api/v1/namespaces/diff/configmaps/b",
            Value::Null,
        ),
        case(
            "delete-missing",
            "DELETE",
            "/api/v1/namespaces/diff/configmaps/b",
            Value::Null,
        ),
    ]
}

/// A kubectl command run against both clusters: its exit status, standard
/// output and standard error are compared.
struct KubectlCase {
    name: &'static str,
    args: &'static [&'static str],
    stdin: Option<String>,
}

/// What kubectl does beyond single JSON requests: a `kind: List`, a
/// protobuf body (`kubectl create role`), and client-side schema checks
/// against the server's OpenAPI under `--validate` strict, warn and ignore.
fn kubectl_cases() -> Vec<KubectlCase> {
    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l1", "namespace": "diff"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l2", "namespace": "diff"}}]}"#;
    let bogus = |name: &str| {
        let mut w = workflow(json!({"bogus": 1}));
        w["metadata"]["name"] = name.into();
        Some(w.to_string())
    };
    let k = |name, args, stdin| KubectlCase { name, args, stdin };
    vec![
        k(
            "kubectl-list",
            &["create", "-f", "-"],
            Some(list.to_string()),
        ),
        k(
            "kubectl-create-role",
            &[
                "create",
                "role",
                "r",
                "-n",
                "diff",
                "--verb=get",
                "--resource=configmaps",
            ],
            None,
        ),
        k(
            "kubectl-validate-strict",
            &["create", "--validate=strict", "-f", "-"],
            bogus("v-strict"),
        ),
        k(
            "kubectl-validate-warn",
            &["create", "--validate=warn", "-f", "-"],
            bogus("v-warn"),
        ),
        k(
            "kubectl-validate-ignore",
            &["create", "--validate=ignore", "-f", "-"],
            bogus("v-ignore"),
        ),
    ]
}

/// A kubectl case's outcome on one cluster, the server's address removed.
async fn run_kubectl(kubeconfig: &std::path::Path, c: &KubectlCase) -> Answer {
    let out = common::kubectl(kubeconfig, c.args, c.stdin.as_deref()).await;
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    Answer {
        code: out.status.code().unwrap_or(-1) as u16,
        warnings: Vec::new(),
        body: json!({"stdout": text(&out.stdout), "stderr": text(&out.stderr)}),
    }
}

/// What an answer is compared by.
#[derive(Debug)]
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(client: &Client, c: &Case) -> Answer {
    let mut req = http::Request::builder()
        .method(c.method)
        .uri(c.path)
        .header("content-type", c.content_type)
        .header("accept", JSON);
    if let Some(who) = c.impersonate {
        req = req.header("Impersonate-User", who);
    }
    let body = match &c.body {
        Value::Null => Vec::new(),
        v => serde_json::to_vec(v).unwrap(),
    };
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| events(&bytes));
    Answer {
        code,
        warnings,
        body: normalize(body),
    }
}

/// A watch's answer: one event per line, as an array; or the text.
fn events(bytes: &[u8]) -> Value {
    let events: Result<Vec<Value>, _> = serde_json::Deserializer::from_slice(bytes)
        .into_iter()
        .collect();
    match events {
        Ok(events) if !events.is_empty() => Value::Array(events),
        _ => Value::String(String::from_utf8_lossy(bytes).into()),
    }
}

/// Drops what differs between any two servers (and runs).
fn normalize(mut v: Value) -> Value {
    if let Some(events) = v.as_array_mut() {
        for e in events.iter_mut() {
            if let Some(object) = e.get_mut("object") {
                *object = normalize(object.take());
            }
        }
        return v;
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ] {
            m.remove(k);
        }
        if m.contains_key("continue") {
            m.insert("continue".into(), "<token>".into());
        }
        if m.get("remainingItemCount").is_some() {
            m.insert("remainingItemCount".into(), "<n>".into());
        }
        if m.is_empty() {
            v.as_object_mut().unwrap().remove("metadata");
        }
    }
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        for i in items.iter_mut() {
            *i = normalize(i.take());
        }
    }
    if let Some(d) = v.get_mut("details").and_then(Value::as_object_mut) {
        d.remove("uid");
        if let Some(causes) = d.get_mut("causes").and_then(Value::as_array_mut) {
            causes.sort_by_key(|c| c.to_string());
        }
    }
    v
}

/// The aspects in which two answers differ.
fn differences(dev: &Answer, real: &Answer) -> Vec<&'static str> {
    let mut out = Vec::new();
    if dev.code != real.code {
        // Another outcome: the rest differs with it.
        return vec!["code"];
    }
    // A Status, or a watch's ERROR event (which carries one).
    let status = |a: &Answer| match a.body["type"] == "ERROR" {
        true => a.body["object"].clone(),
        false => a.body.clone(),
    };
    let (d, r) = (status(dev), status(real));
    if d["kind"] == "Status" && r["kind"] == "Status" {
        for key in ["reason", "message", "code"] {
            if d[key] != r[key] {
                out.push(key);
            }
        }
        if d["details"]["causes"] != r["details"]["causes"] {
            out.push("causes");
        }
    } else if dev.body != real.body {
        out.push("object");
    }
    if dev.warnings != real.warnings {
        out.push("warnings");
    }
    out
}

/// (case, aspect) pairs listed in the dev cluster's README.
fn listed() -> BTreeSet<(String, String)> {
    let readme =
        std::fs::read_to_string(common::root().join("host/weft-cluster/README.md")).unwrap();
    let section = readme
        .split("## Differences from kube-apiserver")
        .nth(1)
        .expect("host/weft-cluster/README.md has a \"Differences from kube-apiserver\" section");
    section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() >= 4 && cells[1].starts_with('`'))
                .then(|| (cells[1].trim_matches('`').to_string(), cells[2].to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_cluster_answers_as_kube_apiserver_or_says_why_not() {
    let real = common::k8s::shared();
    let dir = tempfile::tempdir().unwrap();
    // A history of ten changes: the cases make more, so a watch from the
    // first resourceVersion is gone here as after etcd's compaction.
    let config = weft_cluster::Config {
        history_limit: 10,
        ..weft_cluster::Config::new(std::path::absolute(dir.path()).unwrap())
            .with_authorization(weft_cluster::Authorization::Rbac)
    };
    let dev = weft_cluster::DevCluster::start(config).await.unwrap();
    let dev_kc = dir.path().join("admin.kubeconfig");
    dev.write_kubeconfig(&dev_kc).unwrap();
    let eve_kc = dir.path().join("eve.kubeconfig");
    std::fs::write(&eve_kc, dev.kubeconfig_as("eve")).unwrap();
    let clients = [
        (
            common::k8s::client_for(&dev_kc).await,
            common::k8s::client_for(&eve_kc).await,
        ),
        (
            real.client().await,
            common::k8s::client_for(&real.kubeconfig_as("eve", None)).await,
        ),
    ];
    for (admin, _) in &clients {
        weft::runtime::install_crd(admin).await.unwrap();
    }
    let mut found = BTreeSet::new();
    let mut report = String::new();
    for c in cases() {
        if c.compacted {
            real.compact_etcd();
        }
        let mut answers = Vec::new();
        for (admin, eve) in &clients {
            let client = if c.user.is_some() { eve } else { admin };
            let answer = tokio::time::timeout(std::time::Duration::from_secs(20), send(client, &c))
                .await
                .unwrap_or_else(|_| Answer {
                    code: 0,
                    warnings: Vec::new(),
                    body: "no answer in 20 s".into(),
                });
            answers.push(answer);
        }
        if std::env::var("DIFF_SHOW").is_ok_and(|v| c.name.starts_with(&v)) {
            eprintln!("{}: {answers:?}", c.name);
        }
        for aspect in differences(&answers[0], &answers[1]) {
            found.insert((c.name.to_string(), aspect.to_string()));
            report.push_str(&format!(
                "\n{} / {aspect}:\n  dev cluster:    {} {:?} {}\n  kube-apiserver: {} {:?} {}\n",
                c.name,
                answers[0].code,
                answers[0].warnings,
                answers[0].body,
                answers[1].code,
                answers[1].warnings,
                answers[1].body
            ));
        }
    }
    let kubeconfigs = [dev_kc.clone(), real.kubeconfig.clone()];
    for c in kubectl_cases() {
        let mut answers = Vec::new();
        for kc in &kubeconfigs {
            answers.push(run_kubectl(kc, &c).await);
        }
        if std::env::var("DIFF_SHOW").is_ok_and(|v| c.name.starts_with(&v)) {
            eprintln!("{}: {answers:?}", c.name);
        }
        for aspect in differences(&answers[0], &answers[1]) {
            found.insert((c.name.to_string(), aspect.to_string()));
            report.push_str(&format!(
                "\n{} / {aspect}:\n  dev cluster:    {} {}\n  kube-apiserver: {} {}\n",
                c.name, answers[0].code, answers[0].body, answers[1].code, answers[1].body
            ));
        }
    }
    let listed = listed();
    let new: Vec<_> = found.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "differences not listed in host/weft-cluster/README.md: {new:?}\nlisted but gone: {gone:?}\n{report}"
    );
    dev.shutdown().await;
}
