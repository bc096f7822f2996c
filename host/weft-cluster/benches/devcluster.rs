//! Dev cluster benchmark: persisted creates per second, and watch delivery
//! latency with 10 watchers, both through kube-rs over HTTP.
//!
//! `cargo bench -p weft-cluster --bench devcluster` (env: `CREATES`,
//! `CONCURRENCY`, `WATCH_EVENTS`). Prints a Markdown table row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"bench": "weft"}},
        "data": {"payload": "x".repeat(256)}
    }))
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

#[tokio::main]
async fn main() {
    let creates = env("CREATES", 20_000);
    let concurrency = env("CONCURRENCY", 64);
    let watch_events = env("WATCH_EVENTS", 2_000);
    let dir = tempfile::tempdir().unwrap();
    let mut config = weft_cluster::Config::new(dir.path());
    config.runner.enabled = false;
    let cluster = weft_cluster::DevCluster::start(config).await.unwrap();
    let client = Client::try_from(kube::Config::new(cluster.base_url().parse().unwrap())).unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in ["bench-create", "bench-watch"] {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        nss.create(&PostParams::default(), &n).await.unwrap();
    }

    // 1. Persisted creates per second: every create is acknowledged only
    // after its redb transaction is durable.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-create");
    let start = Instant::now();
    futures::stream::iter(0..creates)
        .map(|i| {
            let cms = cms.clone();
            async move {
                cms.create(&PostParams::default(), &cm(&format!("cm-{i}")))
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(concurrency)
        .for_each(|_| async {})
        .await;
    let elapsed = start.elapsed();
    let per_sec = creates as f64 / elapsed.as_secs_f64();

    // 2. Watch delivery latency: 10 watchers, one writer creating objects
    // one after another; latency = event received - create request sent.
    let wcms: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-watch");
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let rv = wcms
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..10 {
        let stream = wcms.watch(&WatchParams::default(), &rv).await.unwrap();
        let sent = sent.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut lat = Vec::with_capacity(watch_events);
            while lat.len() < watch_events {
                if let Some(WatchEvent::Added(o)) = stream.try_next().await.unwrap() {
                    let at = Instant::now();
                    let t0 = sent.lock().unwrap()[&o.name_any()];
                    lat.push(at - t0);
                }
            }
            lat
        }));
    }
    for i in 0..watch_events {
        let name = format!("w-{i}");
        sent.lock().unwrap().insert(name.clone(), Instant::now());
        wcms.create(&PostParams::default(), &cm(&name))
            .await
            .unwrap();
    }
    let mut all: Vec<Duration> = Vec::new();
    for w in watchers {
        all.extend(w.await.unwrap());
    }
    all.sort();
    let p50 = percentile(&all, 0.50);
    let p99 = percentile(&all, 0.99);
    cluster.shutdown().await;

    println!("creates: {creates} with {concurrency} concurrent clients in {elapsed:.2?}");
    println!("| persisted creates/s | watch p50 | watch p99 | samples |");
    println!("|---|---|---|---|");
    println!(
        "| {per_sec:.0} | {:.2} ms | {:.2} ms | {} (10 watchers x {watch_events}) |",
        p50.as_secs_f64() * 1000.0,
        p99.as_secs_f64() * 1000.0,
        all.len()
    );
}
