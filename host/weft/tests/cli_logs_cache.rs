//! `weft logs` and `weft cache` as a user drives them: the real binary
//! against a dev cluster (through its kubeconfig, as kubectl finds it),
//! the in-process controller running the workflows, whose pods run real
//! local processes. The cache's TaskCache is written with kubectl, as the
//! controller would write it. One dev cluster for the file.

mod common;

use common::{stderr, stdout, weft, weft_err, weft_ok};

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::kubectl_ok;
use serde_json::{Value, json};
use weft_dag::WorkflowPhase;

/// A two-node DAG, `a` then `b`, each echoing its own lines (after
/// `pause` seconds, in `a`).
fn two_steps(pause: u32) -> String {
    format!(
        "nodes:\n\
         \x20 - {{id: a, task: {{type: pod, config: {{image: busybox:1.36, command: [sh, -c, 'sleep {pause}; echo hello from a; echo more from a']}}}}}}\n\
         \x20 - {{id: b, dependsOn: [a], task: {{type: pod, config: {{image: busybox:1.36, command: [sh, -c, 'echo hello from b']}}}}}}\n"
    )
}

/// The lines of an output.
fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_cache_through_the_binary() {
    let env = common::Env::start().await;
    let kc = env.dir.path().join("kubeconfig");
    logs(&env, &kc).await;
    cache(&kc).await;
    env.stop().await;
}

async fn logs(env: &common::Env, kc: &Path) {
    // A finished Workflow: every pod's whole log, in DAG order.
    env.submit("two", &two_steps(0)).await;
    let wf = env.finish("two", 120).await;
    assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Succeeded);
    let out = weft_ok(kc, &["logs", "two"]).await;
    assert_eq!(
        lines(&out),
        ["a: hello from a", "a: more from a", "b: hello from b"],
        "{out}"
    );
    let out = weft_ok(kc, &["logs", "two", "--node", "b"]).await;
    assert_eq!(lines(&out), ["b: hello from b"], "{out}");
    let err = weft_err(kc, &["logs", "two", "--node", "c"]).await;
    assert!(
        err.contains("workflow two has no node c (its nodes: a, b)"),
        "{err}"
    );

    // Followed from before it ends: b's pod does not exist yet when
    // following starts; the command ends with the Workflow.
    env.submit("slow", &two_steps(2)).await;
    let follow = tokio::spawn({
        let kc = kc.to_path_buf();
        async move {
            let out = weft(&kc, &["logs", "slow", "-f"]).await;
            (out, SystemTime::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let early = env.workflows().get("slow").await.unwrap();
    assert!(
        !early.status.is_some_and(|s| s.phase.is_terminal()),
        "the workflow ended before the test could follow it"
    );
    assert!(
        env.pods_of("slow")
            .await
            .iter()
            .all(|p| common::name(p) != "slow-b-0"),
        "b started before a's sleep ended"
    );
    let (out, exited) = tokio::time::timeout(Duration::from_secs(120), follow)
        .await
        .expect("weft logs -f did not end with the workflow")
        .unwrap();
    assert!(
        out.status.success(),
        "weft logs -f failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    for line in ["a: hello from a", "a: more from a", "b: hello from b"] {
        assert!(
            lines(&text).contains(&line),
            "no {line:?} in:\n{text}\nstderr:\n{}",
            stderr(&out)
        );
    }
    let wf = env.workflows().get("slow").await.unwrap();
    let finished = wf
        .status
        .as_ref()
        .and_then(|s| s.finished_at.as_deref())
        .map(|t| humantime::parse_rfc3339(t).unwrap())
        .expect("the workflow finished before weft logs -f ended");
    // finishedAt has one-second precision.
    assert!(
        exited + Duration::from_secs(1) >= finished,
        "weft logs -f ended at {exited:?}, before the workflow ({finished:?})"
    );

    // A Workflow that is not there, in either namespace.
    let err = weft_err(kc, &["logs", "nope"]).await;
    assert!(
        err.contains("workflow nope not found in namespace default"),
        "{err}"
    );
    let err = weft_err(kc, &["logs", "two", "-n", "elsewhere"]).await;
    assert!(
        err.contains("workflow two not found in namespace elsewhere"),
        "{err}"
    );
}

/// Two keys sharing their first 6 characters, so a 6-character prefix is
/// ambiguous and a 7-character one is not.
const FRESH: &str = "abcdef1111111111111111111111111111111111111111111111111111111111";
const OLD: &str = "abcdef2222222222222222222222222222222222222222222222222222222222";

fn entry(node: &str, created: SystemTime, max_age: &str) -> Value {
    let created = humantime::format_rfc3339_seconds(created).to_string();
    json!({"taskType": "pod", "version": "1", "workflow": "wf-a", "node": node,
           "createdAt": created, "maxAge": max_age, "outputs": {"rows": 42}})
}

/// `kubectl get taskcache weft-cache-pod -o json`: its entries.
async fn stored(kc: &Path) -> serde_json::Map<String, Value> {
    let out = kubectl_ok(
        kc,
        &["get", "taskcache", "weft-cache-pod", "-o", "json"],
        None,
    )
    .await;
    let cache: Value = serde_json::from_str(&out).unwrap();
    cache["spec"]["entries"]
        .as_object()
        .cloned()
        .unwrap_or_else(|| panic!("no entries in {out}"))
}

/// Runs after the logs part: the controller collects expired entries when
/// it starts, then every 5 minutes, so the expired entry stays meanwhile.
async fn cache(kc: &Path) {
    let now = SystemTime::now();
    let fresh = entry("train", now - Duration::from_secs(3600), "24h");
    let old = entry("prep", now - Duration::from_secs(3 * 3600), "1h");
    let cache = json!({
        "apiVersion": "weft.dev/v1alpha1",
        "kind": "TaskCache",
        "metadata": {
            "name": "weft-cache-pod",
            "labels": {"weft.dev/cache": "true", "weft.dev/task-type": "pod"},
        },
        "spec": {"taskType": "pod", "entries": {FRESH: fresh, OLD: old}},
    });
    kubectl_ok(kc, &["create", "-f", "-"], Some(&cache.to_string())).await;

    // Newest first, the old one expired; SIZE is the entry's JSON.
    let out = weft_ok(kc, &["cache", "list"]).await;
    let rows = lines(&out);
    assert_eq!(rows.len(), 3, "{out}");
    assert!(
        rows[0].starts_with("KEY            TASK TYPE   NODE    WORKFLOW   AGE   EXPIRES   SIZE"),
        "{out}"
    );
    let cells = |row: &str| row.split_whitespace().map(String::from).collect::<Vec<_>>();
    let size = |e: &Value| e.to_string().len().to_string();
    assert_eq!(
        cells(rows[1]),
        [
            &FRESH[..12],
            "pod",
            "train",
            "wf-a",
            "60m",
            "in",
            "22h",
            &size(&fresh)
        ],
        "{out}"
    );
    assert_eq!(
        cells(rows[2]),
        [
            &OLD[..12],
            "pod",
            "prep",
            "wf-a",
            "3h",
            "expired",
            &size(&old)
        ],
        "{out}"
    );
    let out = weft_ok(kc, &["cache", "list", "--task-type", "pod", "-o", "json"]).await;
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(listed[0]["key"], FRESH, "{out}");
    assert_eq!(listed[1]["expired"], true, "{out}");
    let out = weft(kc, &["cache", "list", "--task-type", "spark"]).await;
    assert!(out.status.success() && stdout(&out).is_empty());
    assert!(stderr(&out).contains("No cache entries found in namespace default."));

    // By a unique prefix: the whole entry, with its full key.
    let out = weft_ok(kc, &["cache", "get", &FRESH[..7]]).await;
    let got: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(got["key"], FRESH, "{out}");
    assert_eq!(got["node"], "train", "{out}");
    assert_eq!(got["outputs"]["rows"], 42, "{out}");
    let err = weft_err(kc, &["cache", "get", "abcdef"]).await;
    assert!(
        err.contains("cache key abcdef is ambiguous in namespace default")
            && err.contains(FRESH)
            && err.contains(OLD),
        "{err}"
    );
    let err = weft_err(kc, &["cache", "get", "012345"]).await;
    assert!(
        err.contains("no cache entry 012345 in namespace default"),
        "{err}"
    );

    // Deleting one entry leaves the other.
    let out = weft_ok(kc, &["cache", "delete", &OLD[..8]]).await;
    assert!(
        out.contains(&format!(
            "cache entry {OLD} deleted (pod, node prep of workflow wf-a)"
        )),
        "{out}"
    );
    let entries = stored(kc).await;
    assert!(
        entries.contains_key(FRESH) && !entries.contains_key(OLD),
        "{entries:?}"
    );
    assert_eq!(entries[FRESH], fresh);

    // A key that is not there is named; nothing else is deleted.
    let err = weft_err(kc, &["cache", "delete", FRESH, OLD]).await;
    assert!(
        err.contains(&format!("no cache entry {OLD} in namespace default"))
            && err.contains("nothing deleted"),
        "{err}"
    );
    assert!(stored(kc).await.contains_key(FRESH));

    // --all removes the TaskCache.
    let out = weft_ok(kc, &["cache", "delete", "--all"]).await;
    assert!(
        out.contains("taskcache/weft-cache-pod deleted (1 entry)"),
        "{out}"
    );
    let gone = common::kubectl(kc, &["get", "taskcache", "weft-cache-pod"], None).await;
    assert!(!gone.status.success(), "the TaskCache is still there");
}
