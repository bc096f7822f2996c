//! What a plugin costs in each language: component size, zstd-compressed
//! size (what a ConfigMap carries), compile time, instantiate, the first
//! call into a fresh instance, a call on a live instance, and what the
//! caller waits for per call as the host serves it (a spare instance
//! prepared ahead, host checks included), for the pod plugin (Rust), the
//! empty component (the floor) and the SDK examples (C, Python, JavaScript
//! with each engine).
//! `make guests && cargo bench -p weft --bench languages`; `CALLS`
//! overrides 300 calls per language.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_plugin::{EngineConfig, Plugin, PluginEngine, TaskContext, manifest::Manifest};

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cases = [
        (
            "empty (floor)",
            "target/test-guests/empty",
            "examples/tasks/hello-pod.json",
        ),
        (
            "Rust",
            "target/plugins/pod",
            "examples/tasks/hello-pod.json",
        ),
        (
            "C",
            "target/sdk-examples/c-configmap",
            "sdk/c/examples/configmap-writer/task.json",
        ),
        (
            "Python",
            "target/sdk-examples/py-rayjob",
            "sdk/python/examples/rayjob/task.json",
        ),
        (
            "JavaScript",
            "target/sdk-examples/js-job",
            "sdk/js/examples/k8s-job/task.json",
        ),
        (
            "JavaScript (SpiderMonkey)",
            "target/sdk-examples/starlingmonkey/js-job",
            "sdk/js/examples/k8s-job/task.json",
        ),
    ];
    println!("{calls} calls per language, build-resource of the example's task.json");
    println!(
        "| language | component | zstd | compile | instantiate | first call (fresh instance) | call (live instance) | per call, on a spare |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (lang, base, task) in cases {
        let wasm = std::fs::read(root.join(format!("{base}.wasm")))
            .map_err(|e| anyhow::anyhow!("{base}.wasm: {e}: run `make guests`"))?;
        let manifest = Manifest::parse(
            &std::fs::read_to_string(root.join(format!("{base}.yaml")))?,
            base,
        )?;
        let compressed = weft::hotload::package::compress(&wasm).len();
        // No disk cache: the compile is measured.
        let engine = PluginEngine::new(EngineConfig::default())?;
        let t = Instant::now();
        let (Plugin::Task(plugin), _) = Plugin::load(&engine, &wasm, manifest, base)? else {
            anyhow::bail!("{base} is not a task plugin");
        };
        let compile = t.elapsed();
        let t: Value = serde_json::from_str(&std::fs::read_to_string(root.join(task))?)?;
        let ctx = TaskContext::for_attempt(
            "bench",
            "00000000-0000-0000-0000-000000000000",
            "default",
            "task",
            0,
            t["taskType"].as_str().unwrap_or_default(),
            t["config"].clone(),
            t.get("inputs").cloned().unwrap_or(json!({})),
        );
        for _ in 0..5 {
            plugin.build_resource(&ctx)?;
        }
        let (mut inst, mut first, mut live, mut served) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..calls {
            let t = Instant::now();
            let mut fresh = plugin.warm_instance()?;
            inst.push(t.elapsed());
            let t = Instant::now();
            fresh.build_resource_raw(&ctx)?;
            first.push(t.elapsed());
            drop(fresh);
            // What a caller waits for when a spare is ready, as it is
            // when calls are further apart than one instantiation.
            while plugin.spares_ready() == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
            let t = Instant::now();
            plugin.build_resource(&ctx)?;
            served.push(t.elapsed());
        }
        let mut warm = plugin.warm_instance()?;
        for i in 0..calls {
            // A fresh warm instance every 64 calls: the pod plugin's
            // allocator never reuses memory (the host calls an instance
            // once), so one instance cannot take them all.
            if i % 64 == 0 {
                warm = plugin.warm_instance()?;
                warm.build_resource_raw(&ctx)?;
            }
            let t = Instant::now();
            warm.build_resource_raw(&ctx)?;
            live.push(t.elapsed());
        }
        drop(warm);
        println!(
            "| {lang} | {:.1} KB | {:.1} KB | {:.2} s | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |",
            wasm.len() as f64 / 1e3,
            compressed as f64 / 1e3,
            compile.as_secs_f64(),
            median(inst).as_secs_f64() * 1e6,
            median(first).as_secs_f64() * 1e6,
            median(live).as_secs_f64() * 1e6,
            median(served).as_secs_f64() * 1e6,
        );
    }
    Ok(())
}
