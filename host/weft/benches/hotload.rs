//! Hot loading latency: ConfigMap update -> first call served by the new
//! version, for a ~200 KB component (the pod plugin plus a custom section),
//! on the embedded dev cluster over HTTP. Two cases: a new digest each time
//! (compiled, no on-disk cache), and a digest compiled before (swapping
//! back and forth between two versions: the in-memory compile cache hits).
//! Prints p50/p99/max. `cargo bench -p weft --bench hotload` (after
//! `make guests`); `SWAPS` overrides the 40 swaps per case.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use weft::hotload::HotloadConfig;
use weft_plugin::{EngineConfig, Pinning, PluginEngine, Registry, TaskContext, engine::Digest};

const MANIFEST: &str = "name: bench\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [bench]\nresources: [{apiVersion: v1, kind: Pod}]\n";
const SIZE: usize = 200_000;

/// The pod plugin, padded with a custom section to SIZE bytes; `salt`
/// makes the digest.
fn component(pod: &[u8], salt: u64) -> Vec<u8> {
    let name = b"bench-salt";
    let mut payload = salt.to_le_bytes().to_vec();
    let mut x = salt | 1;
    // Incompressible, like code: the ConfigMap carries ~200 KB.
    while pod.len() + payload.len() + name.len() + 8 < SIZE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        payload.extend(x.to_le_bytes());
    }
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend(name);
    body.extend(payload);
    let mut out = pod.to_vec();
    out.push(0);
    leb128(body.len(), &mut out);
    out.extend(body);
    out
}

fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

async fn swap(client: &kube::Client, registry: &Registry, bytes: &[u8]) -> Duration {
    let want = Digest::of(bytes);
    let ctx = TaskContext::for_attempt(
        "bench",
        "uid",
        "default",
        "n",
        0,
        "bench",
        json!({"image": "busybox", "command": ["true"]}),
        json!({}),
    );
    let start = Instant::now();
    weft::hotload::push(client, "default", "bench", bytes, MANIFEST, Pinning::Pinned)
        .await
        .expect("push");
    loop {
        if let Ok(p) = registry.task_plugin("bench")
            && p.digest() == want
        {
            p.build_resource(&ctx).expect("call");
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never served");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn report(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let pct = |p: f64| v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1];
    println!(
        "{name}: n={} p50={:.1} ms p99={:.1} ms max={:.1} ms",
        v.len(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        v[v.len() - 1].as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let swaps: usize = std::env::var("SWAPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let pod = std::fs::read(root.join("target/plugins/pod.wasm"))
        .map_err(|e| anyhow::anyhow!("target/plugins/pod.wasm: {e}: run `make guests`"))?;
    let dir = tempfile::tempdir()?;
    let cluster = weft::dev::start(dir.path()).await?;
    let client = weft::runtime::client_for(&cluster.base_url())?;
    weft::runtime::install_crd(&client).await?;
    // No on-disk cache: every new digest is compiled.
    let engine = PluginEngine::new(EngineConfig::default())?;
    let registry = Arc::new(Registry::default());
    let metrics = Arc::new(weft::controller::metrics::Metrics::default());
    let (loader, _task) = weft::runtime::spawn_hotload(
        client.clone(),
        engine,
        registry.clone(),
        metrics,
        HotloadConfig {
            namespaces: vec!["default".into()],
            ..Default::default()
        },
        std::future::pending(),
    );
    loader.synced().await;
    println!(
        "component: {} bytes (pod.wasm {} bytes + custom section)",
        component(&pod, 0).len(),
        pod.len()
    );
    // Warm up the API path and the engine.
    swap(&client, &registry, &component(&pod, 1)).await;

    let mut cold = Vec::new();
    for i in 0..swaps {
        cold.push(swap(&client, &registry, &component(&pod, 1000 + i as u64)).await);
    }
    report("new digest (compile included)", cold);

    let (a, b) = (component(&pod, 7), component(&pod, 8));
    swap(&client, &registry, &a).await;
    swap(&client, &registry, &b).await;
    let mut warm = Vec::new();
    for i in 0..swaps {
        let bytes = if i % 2 == 0 { &a } else { &b };
        warm.push(swap(&client, &registry, bytes).await);
    }
    report("known digest (compile cache hit)", warm);
    cluster.shutdown().await;
    Ok(())
}
