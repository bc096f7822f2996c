//! Controller throughput: 1,000 one-node workflows through the controller
//! on the embedded dev cluster, pods simulated (no process, as kwok does).
//! Prints workflows per minute and Kubernetes API writes per task node;
//! then the writes per node of ten 100-node workflows (10 layers of 10).
//! `cargo bench -p weft --bench controller` (after `make guests`);
//! `CONCURRENT_RECONCILES=N` sets `--concurrent-reconciles` (0: no limit);
//! `PROFILE_SECONDS=N` takes a CPU profile of the first N seconds of the
//! one-node run from `weft::profiling` (what `--profiling-addr` serves),
//! writes it to target/controller-cpu.pb.gz and prints its hottest Weft
//! functions; `PROFILE_IO_SECONDS=N` does the same for the first N seconds
//! of the data plane's first plain and first with-artifacts runs
//! (target/controller-plain0-cpu.pb.gz, target/controller-io0-cpu.pb.gz);
//! `IO_ROUNDS=N` sets how many rounds of both the data plane's line runs
//! (default 8, `common::paired`; `PROFILE_EVERY_ROUND=1` profiles every
//! round, target/controller-{plain,io}N-cpu.pb.gz); `DRIFT_ROUNDS=N` runs only the plain
//! one-node workflows N times and prints what changes from run to run.

mod common;

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use kube::api::{ListParams, PostParams};
use weft::api::{Workflow, WorkflowResourceSpec};

const WORKFLOWS: usize = 1_000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let (client, ctx) = (sim.client.clone(), sim.ctx.clone());
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");
    let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(
        "nodes:\n  - id: task\n    task: {type: pod, config: {image: busybox, command: ['true'], annotations: {weft.dev/simulate: 'true', weft.dev/simulate-duration: 10ms}}}\n",
    )?;
    if let Ok(rounds) = std::env::var("DRIFT_ROUNDS") {
        return drift(&api, &spec, rounds.parse()?).await;
    }

    let profile = match std::env::var("PROFILE_SECONDS") {
        Ok(secs) => Some(tokio::spawn(common::cpu_profile(
            secs.parse()?,
            "controller".into(),
        ))),
        Err(_) => None,
    };
    let start = Instant::now();
    stream::iter(0..WORKFLOWS)
        .for_each_concurrent(32, |i| {
            let (api, spec) = (api.clone(), spec.clone());
            async move {
                let wf = Workflow::new(&format!("bench-{i:04}"), WorkflowResourceSpec { spec });
                api.create(&PostParams::default(), &wf)
                    .await
                    .expect("create");
            }
        })
        .await;
    let submitted = start.elapsed();
    loop {
        let list = api.list(&ListParams::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|w| w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
            .count();
        if done == WORKFLOWS {
            let failed = list
                .items
                .iter()
                .filter(|w| {
                    w.status
                        .as_ref()
                        .is_some_and(|s| s.phase != weft_dag::WorkflowPhase::Succeeded)
                })
                .count();
            assert_eq!(failed, 0, "{failed} workflows did not succeed");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = start.elapsed();
    let per_min = WORKFLOWS as f64 / took.as_secs_f64() * 60.0;
    let writes = ctx.metrics.api_writes_total() as f64 / WORKFLOWS as f64;
    println!(
        "{WORKFLOWS} one-node workflows (submitted in {:.2}s) done in {:.2}s",
        submitted.as_secs_f64(),
        took.as_secs_f64()
    );
    println!("throughput: {per_min:.0} workflows/min");
    println!("API writes per task node (child, status, events, finalizer): {writes:.2}");
    print_writes(&ctx);
    if let Some(p) = profile {
        p.await??;
    }

    // Ten 100-node workflows: node (layer, i) depends on (layer - 1, i).
    let before = ctx.metrics.api_writes_total();
    let nodes: Vec<serde_json::Value> = (0..100)
        .map(|n| {
            let (layer, i) = (n / 10, n % 10);
            let deps: Vec<String> = (layer > 0)
                .then(|| format!("l{}-{i}", layer - 1))
                .into_iter()
                .collect();
            serde_json::json!({"id": format!("l{layer}-{i}"), "dependsOn": deps,
                "task": common::simulated_task()})
        })
        .collect();
    let wide = serde_json::json!({ "nodes": nodes });
    let start = Instant::now();
    let runs = stream::iter(0..10).map(|i| {
        let (api, wide) = (api.clone(), wide.clone());
        async move { common::run_to_success(&api, &format!("wide-{i}"), wide).await }
    });
    for took in runs.buffer_unordered(10).collect::<Vec<_>>().await {
        took?;
    }
    let writes = (ctx.metrics.api_writes_total() - before) as f64 / 1_000.0;
    println!(
        "10 workflows of 100 nodes done in {:.2}s; API writes per task node: {writes:.2}",
        start.elapsed().as_secs_f64()
    );
    print_writes(&ctx);
    artifacts_cost(&api, &ctx).await?;
    sim.shutdown().await;
    Ok(())
}

/// What the data plane adds (issue 42): the same 1,000 one-node
/// workflows, plain and with a task that reads an input artifact and
/// writes an output parameter from a file, so each attempt is planned,
/// presigned (SigV4, offline: an S3 repository that is never contacted)
/// and wrapped. Plain and with artifacts alternate (`common::paired`).
async fn artifacts_cost(
    api: &kube::Api<Workflow>,
    ctx: &weft::controller::Context,
) -> anyhow::Result<()> {
    let repo = weft::store::ArtifactRepository::parse(
        "bench",
        "s3: {endpoint: 'http://127.0.0.1:9', bucket: bench, insecure: true}",
    )?;
    let creds = weft::store::Credentials {
        access_key_id: "bench".into(),
        secret_access_key: "bench-secret".into(),
    };
    let store = weft::store::Store::open(&repo, Some(&creds))?;
    ctx.set_artifacts(std::sync::Arc::new(weft::pod_io::PodIo::new(
        store,
        "/usr/local/bin/weft",
        "weft:bench",
    )));
    let plain: weft_dag::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "nodes": [{"id": "task", "task": common::simulated_task()}]}))?;
    let mut task = common::simulated_task();
    task["inputs"] = serde_json::json!({"artifacts": [{"name": "data", "path": "/work/data",
        "from": "${inputs.data}"}]});
    task["outputs"] = serde_json::json!({"parameters": [{"name": "n", "path": "/work/n"}]});
    let data = serde_json::json!({"key": "default/uploads/bench/data", "digest": "sha256:00",
        "size": 1, "kind": "file"});
    let with: weft_dag::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "inputs": {"data": data}, "nodes": [{"id": "task", "task": task}]}))?;
    let profile = std::env::var("PROFILE_IO_SECONDS").ok();
    for (label, spec) in [("plain", &plain), ("io", &with)] {
        let (workflow, pod) = sizes(api, &format!("size-{label}"), spec).await?;
        println!("object sizes, {label}: Workflow {workflow} bytes, Pod {pod} bytes (JSON)");
    }
    // Each run starts from the same cluster (the runner deletes its
    // workflows) and is told its end by a watch.
    let rounds = common::paired::rounds("IO_ROUNDS", 8);
    let paired =
        common::paired::Paired::run(ctx, ["plain", "io"], rounds, WORKFLOWS, |v, round, name| {
            let spec = if v == 0 { &plain } else { &with };
            let p = profile
                .as_ref()
                .filter(|_| common::paired::profiles_round(round, 0))
                .map(|secs| {
                    let secs = secs.parse().expect("PROFILE_IO_SECONDS: seconds");
                    (secs, format!("controller-{name}"))
                });
            async move { common::profiled_run(api, &name, WORKFLOWS, spec, p).await }
        })
        .await?;
    paired.print("one-node workflows/min, plain vs with an input artifact and a file parameter");
    Ok(())
}

/// `rounds` runs of the same 1,000 one-node workflows, each deleted after
/// it: what changes from run to run (throughput, CPU, memory, what stays
/// in the cluster). `DRIFT_ROUNDS=N`; `PROFILE_IO_SECONDS` profiles the
/// first and the last run.
async fn drift(
    api: &kube::Api<Workflow>,
    spec: &weft_dag::WorkflowSpec,
    rounds: usize,
) -> anyhow::Result<()> {
    let client = api.clone().into_client();
    let events: kube::Api<k8s_openapi::api::core::v1::Event> = kube::Api::all(client.clone());
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client);
    let profile = std::env::var("PROFILE_IO_SECONDS").ok();
    for round in 0..rounds {
        let p = match &profile {
            Some(secs) if round == 0 || round + 1 == rounds => {
                Some((secs.parse()?, format!("controller-drift{round}")))
            }
            _ => None,
        };
        let (cpu, name) = (common::own_cpu(), format!("d{round}"));
        let per_min = common::profiled_run(api, &name, WORKFLOWS, spec, p).await?;
        let cpu = common::own_cpu() - cpu;
        let status = std::fs::read_to_string("/proc/self/status")?;
        let rss = status
            .lines()
            .find(|l| l.starts_with("VmRSS"))
            .unwrap_or("");
        let ev = events.list(&ListParams::default()).await?.items.len();
        let po = pods.list(&ListParams::default()).await?.items.len();
        println!(
            "drift run {round}: {per_min:.0} workflows/min, CPU {cpu:.2} s, {rss}, events {ev}, pods {po}"
        );
    }
    Ok(())
}

/// The JSON sizes of a finished one-node workflow of `spec` and of its pod.
async fn sizes(
    api: &kube::Api<Workflow>,
    name: &str,
    spec: &weft_dag::WorkflowSpec,
) -> anyhow::Result<(usize, usize)> {
    let spec = serde_json::to_value(spec)?;
    common::run_to_success(api, name, spec).await?;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.clone().into_client(), "default");
    let lp = ListParams::default().labels(&format!("weft.dev/workflow={name}"));
    let pod = pods.list(&lp).await?.items.pop();
    let pod = pod.ok_or_else(|| anyhow::anyhow!("{name} has no pod"))?;
    let workflow = api.get(name).await?;
    Ok((
        serde_json::to_vec(&workflow)?.len(),
        serde_json::to_vec(&pod)?.len(),
    ))
}

/// The API writes so far, by kind.
fn print_writes(ctx: &weft::controller::Context) {
    for line in ctx
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("weft_api_writes_total"))
    {
        println!("  {line}");
    }
}
