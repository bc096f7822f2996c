//! The controller's operating knobs as controller-runtime and client-go
//! users know them, each checked on a real `weft controller` process
//! against the dev cluster:
//!
//! - `--kube-api-qps 20 --kube-api-burst 40`: 200 Workflows created at
//!   once all succeed, and the dev cluster's request log shows the
//!   controller's requests never above the bucket (burst + rate × time,
//!   in every window); meanwhile a CPU profile taken from
//!   `--profiling-addr` decodes as pprof with the controller's functions,
//!   and the heap profile decodes too;
//! - controller-runtime's and client-go's metrics are exposed under their
//!   names and move as the work does (scraped before and after);
//! - SIGTERM: running work finishes within the grace period, the Lease is
//!   released, exit 0; `--sync-period` reconciles with no event;
//!   `--feature-gates IgnoreStatusUpdates=false` (the opt-out of the beta gate) still runs workflows.

mod common;

use std::io::Read;
use std::time::{Duration, SystemTime};

use common::{ControllerProcess, dev_cluster, free_port, sample, sum};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use serde_json::json;
use weft::api::Workflow;
use weft_dag::WorkflowPhase;

/// The user the controller's requests are logged as (its bearer token).
const CONTROLLER: &str = "weft-controller-under-test";

fn one_node(name: &str, input: &str) -> Workflow {
    serde_json::from_value(
        json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"inputs": {"blob": input}, "nodes": [{"id": "a", "task": {"type": "pod",
            "config": {"image": "busybox", "command": ["true"]}}}]}}),
    )
    .unwrap()
}

async fn phases(api: &Api<Workflow>) -> Vec<(String, Option<WorkflowPhase>)> {
    let list = api.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .map(|w| {
            let name = w.metadata.name.clone().unwrap_or_default();
            (name, w.status.map(|s| s.phase))
        })
        .collect()
}

/// Waits until every Workflow but `except` has Succeeded.
async fn all_succeed(api: &Api<Workflow>, expect: usize, except: &str, log: impl Fn() -> String) {
    let mut last = Vec::new();
    for _ in 0..1800 {
        last = phases(api).await;
        let done = last
            .iter()
            .filter(|(n, p)| n != except && *p == Some(WorkflowPhase::Succeeded))
            .count();
        if done == expect {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pending: Vec<_> = last
        .iter()
        .filter(|(_, p)| *p != Some(WorkflowPhase::Succeeded))
        .take(10)
        .collect();
    panic!("not all succeeded: {pending:?}\n{}", log());
}

/// The most requests of `times` (sorted) in any window, beyond what a
/// bucket of `burst` refilled at `qps` allows there: > 0 is a breach.
fn worst_excess(times: &[SystemTime], qps: f64, burst: f64) -> f64 {
    let mut worst = f64::MIN;
    for i in 0..times.len() {
        for j in i..times.len() {
            let span = times[j].duration_since(times[i]).unwrap_or_default();
            let allowed = burst + qps * span.as_secs_f64();
            worst = worst.max((j - i + 1) as f64 - allowed);
        }
    }
    worst
}

/// GET `path` on `port` with a long timeout: the body's bytes.
async fn fetch(port: u16, path: &str) -> (u16, Vec<u8>) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let out = tokio::process::Command::new("curl")
        .args(["-s", "-m", "60", "-o", "-", "-w", "\n%{http_code}", &url])
        .output()
        .await
        .expect("curl");
    let mut body = out.stdout;
    let at = body.iter().rposition(|b| *b == b'\n').expect("status line");
    let code = String::from_utf8_lossy(&body[at + 1..])
        .trim()
        .parse()
        .unwrap_or(0);
    body.truncate(at);
    (code, body)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzipped profile");
    out
}

fn decode(bytes: &[u8]) -> pprof::protos::Profile {
    <pprof::protos::Profile as pprof::protos::Message>::decode(gunzip(bytes).as_slice())
        .expect("a pprof Profile")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_workflows_under_a_client_bucket_with_standard_metrics_and_profiles() {
    let (_dir, cluster, kc, client) = dev_cluster().await;
    let as_controller = kc.with_file_name("controller.kubeconfig");
    std::fs::write(&as_controller, cluster.kubeconfig_as(CONTROLLER)).unwrap();
    let profiling = free_port();
    let profiling_addr = format!("127.0.0.1:{profiling}");
    let controller = ControllerProcess::start(
        &as_controller,
        "throttled",
        &[
            "--kube-api-qps",
            "20",
            "--kube-api-burst",
            "40",
            "--concurrent-reconciles",
            "4",
            "--profiling-addr",
            &profiling_addr,
        ],
    );
    let before = controller.started_metrics().await;
    for name in [
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_retries_total",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
    ] {
        assert!(
            before.lines().any(|l| l
                .starts_with(&format!("# HELP {}", name.trim_end_matches("_total")))
                || l.starts_with(name)),
            "{name} is not exposed:\n{before}"
        );
    }
    assert_eq!(
        sample(
            &before,
            r#"controller_runtime_max_concurrent_reconciles{controller="workflow"}"#
        ),
        Some(4.0)
    );

    // A CPU profile of the busy part.
    let cpu = tokio::spawn(async move { fetch(profiling, "/debug/pprof/profile?seconds=6").await });
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    // One that cannot succeed (its status cannot fit etcd): errors, retries.
    api.create(&Default::default(), &one_node("huge", &"x".repeat(800_000)))
        .await
        .unwrap();
    let creates = (0..200).map(|i| {
        let api = api.clone();
        async move {
            api.create(&Default::default(), &one_node(&format!("w{i:03}"), "y"))
                .await
                .unwrap()
        }
    });
    futures::future::join_all(creates).await;
    all_succeed(&api, 200, "huge", || controller.log()).await;

    // The request log: the controller never beat its bucket.
    let times: Vec<SystemTime> = cluster
        .audit_timed()
        .into_iter()
        .filter(|(_, r)| r.user == CONTROLLER)
        .map(|(t, _)| t)
        .collect();
    assert!(times.len() > 400, "controller requests: {}", times.len());
    let excess = worst_excess(&times, 20.0, 40.0);
    assert!(
        excess <= 2.0,
        "{} requests: {excess} above the bucket in some window",
        times.len()
    );
    // And the bucket was what paced it: at 20/s, the work took its time.
    let span = times.last().unwrap().duration_since(times[0]).unwrap();
    assert!(
        span.as_secs_f64() >= (times.len() as f64 - 40.0) / 20.0 * 0.9,
        "{} requests in {span:?}",
        times.len()
    );

    // The Namespace (its parallelism annotation) is read once per 10 s it
    // is kept, however many workers miss it at once: reads are 10 s apart.
    let reads: Vec<SystemTime> = cluster
        .audit_timed()
        .into_iter()
        .filter(|(_, r)| r.user == CONTROLLER && r.resource == "namespaces" && r.verb == "get")
        .map(|(t, _)| t)
        .collect();
    let most = span.as_secs() / 10 + 1;
    assert!(
        !reads.is_empty() && reads.len() as u64 <= most,
        "{} reads of the Namespace in {span:?} (at most {most})",
        reads.len()
    );

    // The metrics moved with the work.
    let after = controller.metrics().await;
    let delta = |series: &str| {
        sample(&after, series).unwrap_or(0.0) - sample(&before, series).unwrap_or(0.0)
    };
    assert!(
        delta(r#"controller_runtime_reconcile_total{controller="workflow",result="success"}"#)
            >= 200.0,
        "{after}"
    );
    assert!(
        delta(r#"controller_runtime_reconcile_errors_total{controller="workflow"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        delta(r#"controller_runtime_reconcile_total{controller="workflow",result="error"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        delta(r#"controller_runtime_reconcile_time_seconds_count{controller="workflow"}"#) >= 400.0,
        "{after}"
    );
    assert!(
        delta(r#"workqueue_adds_total{controller="workflow",name="workflow"}"#) >= 201.0,
        "{after}"
    );
    assert!(
        delta(r#"workqueue_retries_total{controller="workflow",name="workflow"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        delta(r#"workqueue_queue_duration_seconds_count{controller="workflow",name="workflow"}"#)
            >= 200.0,
        "{after}"
    );
    assert!(
        delta(r#"workqueue_work_duration_seconds_count{controller="workflow",name="workflow"}"#)
            >= 200.0,
        "{after}"
    );
    assert!(
        sample(
            &after,
            r#"controller_runtime_active_workers{controller="workflow"}"#
        )
        .is_some(),
        "{after}"
    );
    assert!(
        sample(
            &after,
            r#"workqueue_depth{controller="workflow",name="workflow"}"#
        )
        .is_some(),
        "{after}"
    );
    let host = cluster
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    // Pods are created by server-side apply: a PATCH answered 201.
    let pods = format!(r#"rest_client_requests_total{{code="201",method="PATCH",host="{host}"}}"#);
    assert!(delta(&pods) >= 200.0, "{pods}:\n{after}");
    let refused =
        format!(r#"rest_client_requests_total{{code="413",method="PATCH",host="{host}"}}"#);
    assert!(delta(&refused) >= 1.0, "{refused}:\n{after}");
    let requests =
        sum(&after, "rest_client_requests_total") - sum(&before, "rest_client_requests_total");
    assert!(requests >= 400.0, "{after}");
    let timed =
        format!(r#"rest_client_request_duration_seconds_count{{verb="PATCH",host="{host}"}}"#);
    assert!(delta(&timed) >= 200.0, "{timed}:\n{after}");
    let waited =
        format!(r#"rest_client_rate_limiter_duration_seconds_count{{verb="PATCH",host="{host}"}}"#);
    assert!(delta(&waited) >= 200.0, "{waited}:\n{after}");

    // Every standard metric the Grafana dashboard plots is exposed.
    let dashboard =
        std::fs::read_to_string(common::root().join("deploy/grafana/weft-dashboard.json")).unwrap();
    let plotted: std::collections::BTreeSet<&str> = dashboard
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            ["controller_runtime_", "workqueue_", "rest_client_"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .collect();
    assert!(plotted.len() >= 10, "{plotted:?}");
    for name in plotted {
        assert!(
            after.lines().any(|l| l.starts_with(name)),
            "the dashboard plots {name}, /metrics has none:\n{after}"
        );
    }

    // The CPU profile: pprof protobuf, with the controller's functions.
    let (code, body) = cpu.await.unwrap();
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let profile = decode(&body);
    assert!(!profile.sample.is_empty(), "no samples");
    let functions: Vec<&str> = profile
        .function
        .iter()
        .map(|f| profile.string_table[f.name as usize].as_str())
        .collect();
    assert!(
        functions.iter().any(|f| f.contains("weft::controller::")),
        "no controller function among {} functions: {:?}",
        functions.len(),
        &functions[..functions.len().min(40)]
    );
    // The heap profile, sampled since the start.
    let (code, body) = fetch(profiling, "/debug/pprof/heap").await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let heap = decode(&body);
    assert!(!heap.sample.is_empty(), "no heap samples");
    assert!(heap.string_table.iter().any(|s| s == "inuse_space"));
    // Never on the public ports.
    assert!(
        common::http_get(controller.metrics_port, "/debug/pprof/heap")
            .await
            .is_none_or(|b| !b.contains("inuse"))
    );
}

async fn lease_holder(client: &Client, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease = leases.get(name).await.ok()?;
    lease.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_releases_the_lease_and_exits_zero_and_resyncs_reconcile_unprompted() {
    let (_dir, _cluster, kc, client) = dev_cluster().await;
    let mut controller = ControllerProcess::start(
        &kc,
        "graceful",
        &[
            "--leader-elect",
            "--leader-elect-namespace",
            "default",
            "--leader-election-id",
            "weft-graceful",
            "--sync-period",
            "1s",
            "--feature-gates",
            "IgnoreStatusUpdates=false",
            "--graceful-shutdown-timeout",
            "20s",
        ],
    );
    controller.metrics().await;
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let chain: Workflow = serde_json::from_value(json!({"apiVersion": "weft.dev/v1alpha1",
        "kind": "Workflow", "metadata": {"name": "chain", "namespace": "default"},
        "spec": {"nodes": [
            {"id": "a", "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}},
            {"id": "b", "dependsOn": ["a"], "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}},
            {"id": "c", "dependsOn": ["b"], "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}}]}}))
    .unwrap();
    api.create(&Default::default(), &chain).await.unwrap();
    all_succeed(&api, 1, "", || controller.log()).await;
    assert_eq!(
        lease_holder(&client, "weft-graceful").await.as_deref(),
        Some("graceful"),
        "{}",
        controller.log()
    );

    // Nothing changes, yet the resync reconciles it again.
    let series = r#"controller_runtime_reconcile_total{controller="workflow",result="success"}"#;
    let then = sample(&controller.metrics().await, series).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let now = sample(&controller.metrics().await, series).unwrap_or(0.0);
    assert!(now >= then + 2.0, "resyncs: {then} -> {now}");

    let status = controller.terminate().expect("exit status");
    let log = controller.log();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("shutting down"), "{log}");
    assert!(log.contains("released the leader lease"), "{log}");
    assert_eq!(lease_holder(&client, "weft-graceful").await, None);
}
