//! A Workflow whose reconcile keeps failing is retried with growing gaps
//! (controller-runtime's per-object exponential back-off), the others
//! are not held back, and fixing the cause lets it run at once. The
//! failure is real: its status would not fit etcd's 1.5 MiB (an input of
//! 800 kB is in its spec and again in its status), so the dev cluster
//! refuses every status write, as a real API server does.

mod common;

use std::time::{Duration, SystemTime};

use common::{ControllerProcess, dev_cluster, kubectl_ok};
use kube::Api;
use serde_json::{Value, json};
use weft::api::Workflow;
use weft_dag::WorkflowPhase;

fn workflow(name: &str, input: &str) -> Value {
    json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"inputs": {"blob": input}, "nodes": [{"id": "a", "task": {"type": "pod",
            "config": {"image": "busybox", "command": ["true"]}}}]}})
}

/// When the controller logged each failed reconcile of `name`.
fn failures(log: &str, name: &str) -> Vec<SystemTime> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("reconcile failed"))
                && v["fields"]["workflow"] == name
        })
        .filter_map(|v| humantime::parse_rfc3339_weak(v["timestamp"].as_str()?).ok())
        .collect()
}

async fn phase(api: &Api<Workflow>, name: &str) -> Option<WorkflowPhase> {
    let wf = api.get(name).await.ok()?;
    wf.status.map(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_workflow_backs_off_alone_and_resumes_once_fixed() {
    let (_dir, _cluster, kc, client) = dev_cluster().await;
    let controller = ControllerProcess::start(&kc, "backoff", &[]);
    let huge = "x".repeat(800_000);
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let create = |v: Value| {
        let api = api.clone();
        async move {
            let wf: Workflow = serde_json::from_value(v).unwrap();
            api.create(&Default::default(), &wf).await.unwrap();
        }
    };
    create(workflow("huge", &huge)).await;

    // Wait for enough failures to see the gaps grow.
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen = failures(&controller.log(), "huge");
        if seen.len() >= 9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen.len() >= 9,
        "failures logged: {seen:?}\n{}",
        controller.log()
    );
    let gaps: Vec<Duration> = seen
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).unwrap_or_default())
        .collect();
    // 5 ms doubling: the gaps after the 6th failure are 160, 320, 640 ms.
    let late = &gaps[5..];
    assert!(
        late.windows(2).all(|w| w[1] > w[0]) && late[0] >= Duration::from_millis(100),
        "growing gaps: {gaps:?}"
    );
    let log = controller.log();
    assert!(log.contains("etcdserver: request is too large"), "{log}");

    // Another Workflow meanwhile is not delayed by it.
    create(workflow("small", "y")).await;
    let mut small = None;
    for _ in 0..200 {
        small = phase(&api, "small").await;
        if small == Some(WorkflowPhase::Succeeded) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        small,
        Some(WorkflowPhase::Succeeded),
        "{}",
        controller.log()
    );
    assert_eq!(phase(&api, "huge").await, None, "no status fits yet");

    // Fixed (a small input): the change is an event, so it runs at once.
    let patch = json!({"spec": {"inputs": {"blob": "z"}}}).to_string();
    kubectl_ok(
        &kc,
        &["patch", "workflow", "huge", "--type=merge", "-p", &patch],
        None,
    )
    .await;
    let mut done = None;
    for _ in 0..200 {
        done = phase(&api, "huge").await;
        if done == Some(WorkflowPhase::Succeeded) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done, Some(WorkflowPhase::Succeeded), "{}", controller.log());
}
