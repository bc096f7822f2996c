//! The controller bench on the real control plane (issue 39): etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler built by
//! tests/k8s/build.sh, pods on kwok's simulated nodes (Running at once,
//! Succeeded after `POD_RUN_MS`, default 10 ms, as the dev-cluster bench's
//! simulated pods), the release `weft controller` as a process with its
//! own client certificate. 1,000 one-node workflows submitted 32 at a
//! time, then ten 100-node workflows (10 layers of 10). Prints
//! workflows/min, the controller's API requests per task node by verb from
//! kube-apiserver's audit log, its CPU seconds and peak RSS (/proc).
//! `cargo bench -p weft --bench kwok` (after `make plugins k8s`); the
//! dev-cluster figures of the same run: `cargo bench -p weft --bench controller`.

/// The tests' control-plane helper (`super::{root, free_port}` are below).
#[allow(dead_code)]
#[path = "../tests/common/k8s.rs"]
mod k8s;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[path = "../tests/common/port.rs"]
mod port;
use port::free_port;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s::RealCluster;
use kube::api::{ListParams, PostParams};
use weft::api::{Workflow, WorkflowResourceSpec};

const CONTROLLER: &str = "weft-controller";

/// CPU seconds and peak RSS from /proc, as the peers bench measures them.
#[allow(dead_code)]
#[path = "peers/measure.rs"]
mod measure;
use measure::usage;

/// The controller's requests by verb, from the audit log, since `skip`
/// lines; returns them and the new line count.
fn requests(cluster: &RealCluster, skip: usize) -> (BTreeMap<String, usize>, usize) {
    let audit = cluster.audit();
    let mut by_verb = BTreeMap::new();
    for e in audit.iter().skip(skip) {
        let stage = e["stage"].as_str().unwrap_or("");
        let watch = e["verb"] == "watch";
        // One line per request: completed ones, and watches when they start.
        if e["user"]["username"] != CONTROLLER
            || !(stage == "ResponseComplete" && !watch || stage == "ResponseStarted" && watch)
        {
            continue;
        }
        *by_verb
            .entry(e["verb"].as_str().unwrap_or("").to_string())
            .or_insert(0) += 1;
    }
    (by_verb, audit.len())
}

async fn wait_all(api: &kube::Api<Workflow>, n: usize) -> anyhow::Result<()> {
    loop {
        let list = api.list(&ListParams::default()).await?;
        let done: Vec<_> = list
            .items
            .iter()
            .filter(|w| w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
            .collect();
        if done.len() == n {
            let failed = done
                .iter()
                .filter(|w| w.status.as_ref().unwrap().phase != weft_dag::WorkflowPhase::Succeeded)
                .count();
            anyhow::ensure!(failed == 0, "{failed} workflows did not succeed");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn report(what: &str, nodes: usize, took: Duration, verbs: &BTreeMap<String, usize>, cpu: f64) {
    let total: usize = verbs.values().sum();
    let per: Vec<String> = verbs
        .iter()
        .map(|(v, n)| format!("{v} {:.2}", *n as f64 / nodes as f64))
        .collect();
    println!(
        "{what}: {:.2}s; API requests per task node {:.2} ({}); controller CPU {cpu:.1}s",
        took.as_secs_f64(),
        total as f64 / nodes as f64,
        per.join(", ")
    );
}

fn start_controller(cluster: &RealCluster) -> Child {
    let kubeconfig = cluster.kubeconfig_as(CONTROLLER, Some("system:masters"));
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "controller",
            "--no-admin",
            "--metrics-addr",
            "127.0.0.1:0",
            "--plugins",
        ])
        .arg(root().join("target/plugins"))
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(cluster.dir.join("controller.log")).unwrap())
        .spawn()
        .expect("start weft controller")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let run_ms: u64 = std::env::var("POD_RUN_MS").map_or(Ok(10), |v| v.parse())?;
    let workflows: usize = std::env::var("WORKFLOWS").map_or(Ok(1_000), |v| v.parse())?;
    let mut cluster = RealCluster::start();
    cluster.start_kwok(4, run_ms);
    let client = cluster.client().await;
    weft::runtime::install_crd(&client).await?;
    let mut controller = start_controller(&cluster);
    cluster.adopt(controller.id());
    let result = measure(&cluster, &client, controller.id(), workflows).await;
    let _ = controller.kill();
    let _ = controller.wait();
    result
}

async fn measure(
    cluster: &RealCluster,
    client: &kube::Client,
    pid: u32,
    workflows: usize,
) -> anyhow::Result<()> {
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");
    let one: weft_dag::WorkflowSpec = serde_yaml::from_str(
        "nodes:\n  - id: task\n    task: {type: pod, config: {image: busybox, command: ['true']}}\n",
    )?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, skip) = requests(cluster, 0);
    let (cpu0, _) = usage(pid);
    let start = Instant::now();
    stream::iter(0..workflows)
        .for_each_concurrent(32, |i| {
            let (api, spec) = (api.clone(), one.clone());
            async move {
                let wf = Workflow::new(&format!("bench-{i:04}"), WorkflowResourceSpec { spec });
                api.create(&PostParams::default(), &wf)
                    .await
                    .expect("create");
            }
        })
        .await;
    wait_all(&api, workflows).await?;
    let took = start.elapsed();
    let (cpu1, _) = usage(pid);
    let (verbs, skip) = requests(cluster, skip);
    println!(
        "{workflows} one-node workflows on kube-apiserver + kwok: {:.0} workflows/min",
        workflows as f64 / took.as_secs_f64() * 60.0
    );
    report("one-node", workflows, took, &verbs, cpu1 - cpu0);

    // Ten 100-node workflows: 10 layers of 10, each node after one of the
    // layer before.
    let mut nodes = String::from("nodes:\n");
    for layer in 0..10 {
        for i in 0..10 {
            let deps = if layer == 0 {
                String::new()
            } else {
                format!(", dependsOn: [n{}-{i}]", layer - 1)
            };
            nodes.push_str(&format!(
                "  - {{id: n{layer}-{i}{deps}, task: {{type: pod, config: {{image: busybox, command: ['true']}}}}}}\n"
            ));
        }
    }
    let wide: weft_dag::WorkflowSpec = serde_yaml::from_str(&nodes)?;
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "wide");
    cluster.kubectl(&["create", "namespace", "wide"]);
    let start = Instant::now();
    for i in 0..10 {
        let wf = Workflow::new(
            &format!("wide-{i}"),
            WorkflowResourceSpec { spec: wide.clone() },
        );
        api.create(&PostParams::default(), &wf).await?;
    }
    wait_all(&api, 10).await?;
    let took = start.elapsed();
    let (cpu2, peak) = usage(pid);
    let (verbs, _) = requests(cluster, skip);
    report("ten 100-node", 1_000, took, &verbs, cpu2 - cpu1);
    println!("controller peak RSS: {peak:.1} MiB");
    Ok(())
}
