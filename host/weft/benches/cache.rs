//! What the task cache costs: a 1,000-node workflow of cached simulated
//! pod nodes on the embedded dev cluster, run three ways — uncached (the
//! reference), cached with an empty cache (every node misses and stores),
//! and again (every node hits: no pod) — then the look-up itself, timed
//! one node at a time against the TaskCache the real run filled (key
//! digest, watch-cache read, entry parse), next to the key digest alone.
//! `cargo bench -p weft --bench cache` (after `make guests`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};
use weft::api::Workflow;
use weft_dag::cache::{CacheSpec, key};

const NODES: usize = 1_000;
const PASSES: usize = 20;

fn task() -> weft_dag::TaskSpec {
    serde_json::from_value(common::simulated_task()).expect("a task")
}

/// `NODES` independent simulated pod nodes, cached when `cache`.
fn spec(cache: bool) -> Value {
    let nodes: Vec<Value> = (0..NODES)
        .map(|i| {
            let mut n = json!({"id": format!("t{i}"), "task": task(), "inputs": {"i": i}});
            if cache {
                n["cache"] = json!({"version": "1"});
            }
            n
        })
        .collect();
    json!({ "nodes": nodes })
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let client = sim.client.clone();
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");
    let plain = common::run_to_success(&api, "plain", spec(false)).await?;
    let miss = common::run_to_success(&api, "miss", spec(true)).await?;
    let hit = common::run_to_success(&api, "hit", spec(true)).await?;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().labels("weft.dev/workflow=hit");
    anyhow::ensure!(
        pods.list(&lp).await?.items.is_empty(),
        "the hit run created pods"
    );
    println!(
        "{NODES} simulated pod nodes: uncached {plain:?}, cached and missing {miss:?}, cached and hitting {hit:?}"
    );

    // The look-up alone, against the TaskCache the runs filled.
    let metrics = Arc::new(weft::controller::metrics::Metrics::default());
    let cache = weft::controller::cache::TaskCache::start(client.clone(), Some("default"), metrics);
    let (task, spec) = (
        task(),
        CacheSpec {
            version: "1".into(),
            ..Default::default()
        },
    );
    let inputs: Vec<Map<String, Value>> = (0..NODES)
        .map(|i| Map::from_iter([("i".to_string(), json!(i))]))
        .collect();
    let now = SystemTime::now();
    let k0 = key(&task, &inputs[0], &[], &spec, None);
    while cache.lookup("default", "pod", &k0, None, now).is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut lookups, mut digests) = (Vec::new(), Vec::new());
    for _ in 0..PASSES {
        for i in &inputs {
            let t = Instant::now();
            std::hint::black_box(key(&task, i, &[], &spec, None));
            digests.push(t.elapsed());
            let t = Instant::now();
            let k = key(&task, i, &[], &spec, None);
            let hit = cache.lookup("default", "pod", &k, spec.max_age(), now);
            lookups.push(t.elapsed());
            anyhow::ensure!(hit.is_some(), "a miss for {k}");
        }
    }
    println!(
        "cache look-up per node ({} look-ups over {NODES} entries): p50 {:?}, p99 {:?}; key digest alone p50 {:?}, p99 {:?}",
        lookups.len(),
        percentile(&mut lookups, 0.5),
        percentile(&mut lookups, 0.99),
        percentile(&mut digests, 0.5),
        percentile(&mut digests, 0.99),
    );
    cache.stop();
    sim.shutdown().await;
    Ok(())
}
