//! Controller throughput: 1,000 one-node workflows through the controller
//! on the embedded dev cluster, pods simulated (no process, as kwok does).
//! Prints workflows per minute and Kubernetes API writes per task node.
//! `cargo bench -p weft --bench controller` (after `make guests`).

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
    for line in ctx
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("weft_api_writes_total"))
    {
        println!("  {line}");
    }
    sim.shutdown().await;
    Ok(())
}
