//! The controller killed with SIGKILL five times while twenty five-node
//! workflows run, restarted each time: every workflow still completes, with
//! exactly one child per node and no status lost. On the dev cluster or the
//! real control plane (`WEFT_TEST_CLUSTER`); the controller is the real
//! `weft controller` binary, killed and started again.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::root;
use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use weft::api::Workflow;
use weft_dag::{NodePhase, WorkflowPhase};

/// The controller, its warnings appended to `log` (every start's).
fn start_controller(kubeconfig: &std::path::Path, log: &std::path::Path) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "controller",
            "--install-crd",
            "--metrics-addr",
            "127.0.0.1:0",
            "--plugins",
        ])
        .arg(root().join("target/plugins"))
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start weft controller")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_any_point_loses_nothing_and_duplicates_nothing() {
    let cluster = common::cluster::TestCluster::start().await;
    let (kubeconfig, client) = (cluster.kubeconfig.clone(), cluster.client.clone());
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");

    // Three diamonds of short steps that pass outputs along.
    let step = |v: &str| {
        format!(
            "{{type: pod, config: {{image: busybox, command: [sh, -c, 'sleep 0.4; echo \"{{\\\"v\\\": {v}}}\" > /dev/termination-log']}}}}"
        )
    };
    let spec = format!(
        "nodes:\n  - {{id: a, task: {}}}\n  - {{id: b, dependsOn: [a], inputs: {{x: '${{nodes.a.outputs.v}}'}}, task: {}}}\n  - {{id: c, dependsOn: [a], task: {}}}\n  - {{id: d, dependsOn: [b, c], task: {}}}\n  - {{id: e, dependsOn: [d], task: {}}}\n",
        step("1"),
        step("2"),
        step("3"),
        step("4"),
        step("5")
    );
    let names: Vec<String> = (1..=20).map(|i| format!("crash-{i}")).collect();
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("controller.log");
    let mut controller = start_controller(&kubeconfig, &log);
    for name in &names {
        let s: weft_dag::WorkflowSpec = serde_yaml::from_str(&spec).unwrap();
        api.create(
            &PostParams::default(),
            &Workflow::new(name, weft::api::WorkflowResourceSpec { spec: s }),
        )
        .await
        .unwrap();
    }
    // Kill it at several points of the run, restarting it each time.
    let mut mid_run_kills = 0;
    for ms in [150u64, 300, 90, 420, 250] {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let wfs = api.list(&ListParams::default()).await.unwrap().items;
        if wfs
            .iter()
            .any(|w| !w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        {
            mid_run_kills += 1;
        }
        controller.kill().unwrap(); // SIGKILL
        controller.wait().unwrap();
        controller = start_controller(&kubeconfig, &log);
    }
    // Then let it finish.
    let mut done = false;
    for _ in 0..1200 {
        let wfs = api.list(&ListParams::default()).await.unwrap().items;
        if wfs
            .iter()
            .all(|w| w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
            && wfs.len() == names.len()
        {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller.kill().ok();
    controller.wait().ok();
    let unfinished: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|w| !w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        .map(|w| {
            let nodes = w.status.as_ref().map(|s| {
                let phases = s.nodes.iter().map(|(id, n)| format!("{id}={:?}", n.phase));
                phases.collect::<Vec<_>>().join(" ")
            });
            format!("{}: {nodes:?}", w.metadata.name.as_deref().unwrap_or(""))
        })
        .collect();
    assert!(
        done,
        "not every workflow finished after the restarts on {}: {unfinished:#?}\ncontroller warnings:\n{}",
        cluster.name,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        mid_run_kills >= 3,
        "only {mid_run_kills} kills landed while workflows ran"
    );

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "default");
    for name in &names {
        let wf = api.get(name).await.unwrap();
        let status = wf.status.unwrap();
        assert_eq!(
            status.phase,
            WorkflowPhase::Succeeded,
            "{name}: {:?}",
            status.message
        );
        for id in ["a", "b", "c", "d", "e"] {
            let n = &status.nodes[id];
            assert_eq!(n.phase, NodePhase::Succeeded, "{name}/{id}");
            assert!(n.attempts <= 1, "{name}/{id} ran {} attempts", n.attempts);
            assert!(
                n.outputs.as_ref().is_some_and(|o| o.contains_key("v")),
                "{name}/{id}: outputs lost"
            );
        }
        let children = pods
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={name}")))
            .await
            .unwrap()
            .items;
        let mut child_names: Vec<String> = children.iter().map(|p| p.name_any()).collect();
        child_names.sort();
        let expected: Vec<String> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|id| format!("{name}-{id}-0"))
            .collect();
        assert_eq!(child_names, expected, "{name}: exactly one child per node");
    }
    cluster.stop().await;
}
