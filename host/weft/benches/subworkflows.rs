//! What template launches and sub-workflow trees cost: the same 1,000 task
//! nodes run (a) inline in one Workflow and (b) as a Workflow launched from
//! a WorkflowTemplate whose 10 sub-workflow nodes each run 100 of them in a
//! child Workflow. Pods are simulated (10 ms, no process) on the embedded
//! dev cluster. Runs alternate, three of each, each from an emptied
//! namespace; prints the medians and the tree's overhead over the inline
//! run.
//! `cargo bench -p weft --bench subworkflows` (after `make guests`).

mod common;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use weft::api::{Workflow, WorkflowTemplate};

const NODES: usize = 1_000;
const CHILDREN: usize = 10;
const RUNS: usize = 3;

/// `count` independent simulated pod nodes.
fn nodes(count: usize) -> Value {
    let task = common::simulated_task();
    (0..count)
        .map(|i| json!({"id": format!("t{i}"), "task": task}))
        .collect()
}

async fn run(api: &kube::Api<Workflow>, name: &str, spec: Value) -> anyhow::Result<Duration> {
    let took = common::run_to_success(api, name, spec).await?;
    clean(api).await?;
    Ok(took)
}

/// Deletes the run's Workflows and waits until their pods are gone, so
/// every run starts from the same empty namespace.
async fn clean(api: &kube::Api<Workflow>) -> anyhow::Result<()> {
    let dp = kube::api::DeleteParams::background();
    api.delete_collection(&dp, &Default::default()).await?;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.clone().into_client(), "default");
    for _ in 0..600 {
        let left = pods.list(&Default::default()).await?.items.len();
        let wfs = api.list(&Default::default()).await?.items.len();
        if left == 0 && wfs == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the namespace did not empty in 60 s")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let client = sim.client.clone();
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");
    let per_child = NODES / CHILDREN;
    let children: Vec<Value> = (0..CHILDREN)
        .map(|c| json!({"id": format!("c{c}"), "workflow": {"nodes": nodes(per_child)}}))
        .collect();
    let template: WorkflowTemplate = serde_json::from_value(json!({
        "apiVersion": "weft.dev/v1alpha1", "kind": "WorkflowTemplate",
        "metadata": {"name": "tree", "namespace": "default"},
        "spec": {"nodes": children}
    }))?;
    let templates: kube::Api<WorkflowTemplate> = kube::Api::namespaced(client.clone(), "default");
    templates
        .patch(
            "tree",
            &PatchParams::apply("bench"),
            &Patch::Apply(&template),
        )
        .await?;

    let (mut inline, mut tree) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        inline.push(run(&api, &format!("inline-{i}"), json!({"nodes": nodes(NODES)})).await?);
        let launch = json!({"workflowTemplateRef": {"name": "tree"}});
        tree.push(run(&api, &format!("tree-{i}"), launch).await?);
        println!("run {i}: inline {:?}, tree {:?}", inline[i], tree[i]);
    }
    let (a, b) = (median(inline), median(tree));
    println!(
        "{NODES} simulated pod nodes: inline {a:?}, template + {CHILDREN} sub-workflows {b:?} (median of {RUNS}); overhead {:+.1} %",
        (b.as_secs_f64() / a.as_secs_f64() - 1.0) * 100.0
    );
    sim.shutdown().await;
    Ok(())
}
