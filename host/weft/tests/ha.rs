//! High availability with real `weft controller` processes against the
//! dev cluster or, with `WEFT_TEST_CLUSTER=k8s`, kube-apiserver's real
//! Leases (run one test at a time there: they share one control plane):
//! two replicas behind one leader Lease (exactly one
//! reconciles; SIGKILL the leader and the standby takes over within the
//! lease's bounds, finishing the run with no duplicate child), and two
//! shards (each workflow reconciled by exactly one; a dead shard stops
//! only its own workflows until it returns).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ControllerProcess, kubectl, sample, sum};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use weft::api::Workflow;
use weft::controller::shard::shard_of;
use weft_dag::{NodePhase, WorkflowPhase};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

/// The election flags every process here runs with (and every Event, whose
/// reporting instance says which replica finished a workflow).
fn election() -> Vec<String> {
    vec![
        "--workflow-events=all".into(),
        "--leader-elect".into(),
        format!("--leader-elect-lease-duration={}ms", LEASE.as_millis()),
        format!("--leader-elect-renew-deadline={}ms", RENEW.as_millis()),
        format!("--leader-elect-retry-period={}ms", RETRY.as_millis()),
    ]
}

fn start(kubeconfig: &Path, identity: &str, extra: &[&str]) -> ControllerProcess {
    let mut args = election();
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ControllerProcess::start(kubeconfig, identity, &args)
}

/// The Lease's holder, as `kubectl` reads it ("" when free or absent).
async fn holder(kubeconfig: &Path, lease: &str) -> String {
    let out = kubectl(
        kubeconfig,
        &[
            "get",
            "lease",
            lease,
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    )
    .await;
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until the Lease is held by one of `candidates`; returns who.
async fn wait_for_holder(kubeconfig: &Path, lease: &str, candidates: &[&str]) -> String {
    for _ in 0..300 {
        let h = holder(kubeconfig, lease).await;
        if candidates.contains(&h.as_str()) {
            return h;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("lease {lease} was not taken by any of {candidates:?}");
}

/// A chain of `n` pod steps of `secs` seconds each.
fn chain(n: usize, secs: f32) -> weft_dag::WorkflowSpec {
    let mut yaml = String::from("nodes:\n");
    for i in 0..n {
        let deps = if i == 0 {
            String::new()
        } else {
            format!(", dependsOn: [s{}]", i - 1)
        };
        yaml.push_str(&format!(
            "  - {{id: s{i}{deps}, task: {{type: pod, config: {{image: busybox, command: [sh, -c, 'sleep {secs}']}}}}}}\n"
        ));
    }
    serde_yaml::from_str(&yaml).unwrap()
}

async fn submit(client: &Client, name: &str, spec: weft_dag::WorkflowSpec) {
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &Workflow::new(name, weft::api::WorkflowResourceSpec { spec }),
    )
    .await
    .unwrap();
}

async fn status_of(client: &Client, name: &str) -> Option<weft_dag::WorkflowStatus> {
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    api.get(name).await.unwrap().status
}

/// Waits (up to `secs`) for the workflow to end; returns its status.
async fn finished(client: &Client, name: &str, secs: u64) -> weft_dag::WorkflowStatus {
    for _ in 0..secs * 10 {
        if let Some(s) = status_of(client, name).await
            && s.phase.is_terminal()
        {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{name} did not finish in {secs}s: {:?}",
        status_of(client, name).await
    );
}

/// Who recorded the Events about a workflow (Events' reportingInstance).
async fn reporters(client: &Client, workflow: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    // The workflow's Events follow the status write that ended it.
    let mut who: Vec<String> = Vec::new();
    for _ in 0..50 {
        who = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(workflow))
            .filter_map(|e| e.reporting_instance)
            .collect();
        if !who.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    who.sort();
    who.dedup();
    who
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_from_a_killed_leader_without_duplicating_children() {
    let cluster = common::cluster::TestCluster::start().await;
    let (kubeconfig, client) = (cluster.kubeconfig.clone(), cluster.client.clone());

    let a = start(&kubeconfig, "replica-a", &[]);
    let b = start(&kubeconfig, "replica-b", &[]);
    let leader_id =
        wait_for_holder(&kubeconfig, "weft-controller", &["replica-a", "replica-b"]).await;
    let (mut leader, standby) = if leader_id == "replica-a" {
        (a, b)
    } else {
        (b, a)
    };

    let name = "failover";
    let steps = 8;
    submit(&client, name, chain(steps, 0.6)).await;
    // Let the leader get a few steps in.
    for _ in 0..300 {
        let done = status_of(&client, name).await.map_or(0, |s| {
            s.nodes
                .values()
                .filter(|n| n.phase == NodePhase::Succeeded)
                .count()
        });
        if done >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Exactly one of them reconciles.
    let lm = leader.metrics().await;
    let sm = standby.metrics().await;
    assert_eq!(sample(&lm, "weft_leader{shard=\"0\"}"), Some(1.0), "{lm}");
    assert!(sum(&lm, "weft_reconciles_total") > 0.0, "{lm}");
    assert_ne!(sample(&sm, "weft_leader{shard=\"0\"}"), Some(1.0), "{sm}");
    assert_eq!(
        sum(&sm, "weft_reconciles_total"),
        0.0,
        "the standby reconciled:\n{sm}"
    );
    assert_eq!(
        sum(&sm, "weft_api_writes_total"),
        0.0,
        "the standby wrote:\n{sm}"
    );
    let before = status_of(&client, name).await.unwrap();
    assert!(
        !before.phase.is_terminal(),
        "the run ended before the failover"
    );

    // SIGKILL the leader: it cannot release the lease.
    leader.kill();
    let killed = Instant::now();
    let mut took = None;
    for _ in 0..200 {
        if holder(&kubeconfig, "weft-controller").await == standby.identity {
            took = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = took.expect("the standby never took the lease");
    // client-go's bound: the standby judges expiry by when it saw the last
    // renewal (up to one retry period late) and looks once per retry
    // period; a kubectl poll adds its own latency.
    let bound = LEASE + RETRY * 2 + Duration::from_millis(500);
    assert!(
        took <= bound,
        "the standby took over {took:?} after the kill (bound {bound:?})"
    );
    eprintln!("failover: the standby took the lease {took:?} after SIGKILL");

    let status = finished(&client, name, 90).await;
    assert_eq!(
        status.phase,
        WorkflowPhase::Succeeded,
        "{:?}",
        status.message
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut children: Vec<String> = pods
        .list(&ListParams::default().labels(&format!("weft.dev/workflow={name}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    children.sort();
    let mut expected: Vec<String> = (0..steps).map(|i| format!("{name}-s{i}-0")).collect();
    expected.sort();
    assert_eq!(children, expected, "exactly one child per node");
    for (id, n) in &status.nodes {
        assert!(n.attempts <= 1, "{id} ran {} attempts", n.attempts);
    }
    // The new leader finished it (and says so in the Events).
    let sm = standby.metrics().await;
    assert_eq!(sample(&sm, "weft_leader{shard=\"0\"}"), Some(1.0), "{sm}");
    assert!(sum(&sm, "weft_reconciles_total") > 0.0, "{sm}");
    assert_eq!(
        reporters(&client, name).await,
        vec![standby.identity.clone()]
    );
    // Its log lines are JSON with the workflow's name on them.
    let log = standby.log();
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|l| l["span"]["workflow"] == name || l["fields"]["workflow"] == name),
        "no JSON log line names the workflow:\n{log}"
    );
    drop(standby);
    cluster.stop().await;
}

/// Names of workflows, `per_shard` of each of 2 shards, as the controller
/// hashes them.
fn names_by_shard(prefix: &str, per_shard: usize) -> BTreeMap<u32, Vec<String>> {
    let mut by: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in 0.. {
        let name = format!("{prefix}-{i}");
        let s = shard_of(&format!("default/{name}"), 2);
        let v = by.entry(s).or_default();
        if v.len() < per_shard {
            v.push(name);
        }
        if by.len() == 2 && by.values().all(|v| v.len() == per_shard) {
            break;
        }
    }
    by
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shard_reconciles_only_its_workflows() {
    let cluster = common::cluster::TestCluster::start().await;
    let (kubeconfig, client) = (cluster.kubeconfig.clone(), cluster.client.clone());

    let shard0 = start(&kubeconfig, "shard-0", &["--shards=2", "--shard=0"]);
    let mut shard1 = start(&kubeconfig, "shard-1", &["--shards=2", "--shard=1"]);
    wait_for_holder(&kubeconfig, "weft-controller-shard-0", &["shard-0"]).await;
    wait_for_holder(&kubeconfig, "weft-controller-shard-1", &["shard-1"]).await;

    let first = names_by_shard("sharded", 2);
    for names in first.values() {
        for n in names {
            submit(&client, n, chain(1, 0.1)).await;
        }
    }
    for (shard, names) in &first {
        for n in names {
            let s = finished(&client, n, 60).await;
            assert_eq!(s.phase, WorkflowPhase::Succeeded, "{n}: {:?}", s.message);
            assert_eq!(
                reporters(&client, n).await,
                vec![format!("shard-{shard}")],
                "{n} belongs to shard {shard} alone"
            );
        }
    }
    for p in [&shard0, &shard1] {
        let m = p.metrics().await;
        assert_eq!(
            sample(
                &m,
                &format!("weft_leader{{shard=\"{}\"}}", &p.identity[6..])
            ),
            Some(1.0),
            "{m}"
        );
    }

    // Shard 1 dies: only its workflows stop.
    shard1.kill();
    let second = names_by_shard("after-kill", 1);
    let (mine, orphan) = (&second[&0][0], &second[&1][0]);
    submit(&client, orphan, chain(1, 0.1)).await;
    submit(&client, mine, chain(1, 0.1)).await;
    let s = finished(&client, mine, 60).await;
    assert_eq!(s.phase, WorkflowPhase::Succeeded);
    tokio::time::sleep(LEASE).await;
    assert!(
        status_of(&client, orphan).await.is_none(),
        "shard 0 touched shard 1's workflow {orphan}"
    );

    // It returns (same pod name) and picks its workflow up.
    let shard1 = start(&kubeconfig, "shard-1", &["--shards=2", "--shard=1"]);
    let s = finished(&client, orphan, 60).await;
    assert_eq!(s.phase, WorkflowPhase::Succeeded, "{:?}", s.message);
    assert_eq!(
        reporters(&client, orphan).await,
        vec!["shard-1".to_string()]
    );
    drop((shard0, shard1));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_by_sigterm_hands_over_without_waiting_for_expiry() {
    let cluster = common::cluster::TestCluster::start().await;
    let kubeconfig = cluster.kubeconfig.clone();
    // A long lease: only a release can hand over quickly.
    let slow = [
        "--leader-elect",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=500ms",
    ];
    let a = ControllerProcess::start(&kubeconfig, "rolling-a", &slow);
    let b = ControllerProcess::start(&kubeconfig, "rolling-b", &slow);
    let first = wait_for_holder(&kubeconfig, "weft-controller", &["rolling-a", "rolling-b"]).await;
    let (mut leader, standby) = if first == "rolling-a" { (a, b) } else { (b, a) };
    leader.metrics().await;
    standby.metrics().await;
    leader.terminate();
    let stopped = Instant::now();
    wait_for_holder(&kubeconfig, "weft-controller", &[standby.identity.as_str()]).await;
    let took = stopped.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the standby waited {took:?}: the stopped leader did not release the lease"
    );
    drop(standby);
    cluster.stop().await;
}
