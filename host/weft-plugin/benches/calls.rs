//! Per-call cost on a spare instance, with the page faults and the
//! preparer's CPU time behind it, for task and middleware plugins of every
//! language: where the time of a served call goes. `make guests && cargo
//! bench -p weft-plugin --bench calls`; `CALLS` overrides 1000 calls per
//! plugin, `ONLY` (a substring) picks plugins, `NO_FAULTS` skips reading
//! the fault counter around each call (a /proc read, which leaves the
//! caches colder), `MAPS=FILE` copies /proc/self/maps there after each
//! plugin (to place the addresses of `perf record -e page-faults -d`),
//! `SPARES` sets the spares per version (the engine's default otherwise).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_plugin::{
    EngineConfig, MiddlewareCall, Plugin, PluginEngine, TaskContext, registry::load_file,
};

/// The isolation guests' task (inline): a secret to keep.
const LEAK_TASK: &str = r#"{"taskType": "leak", "config": {"secret": "bench"}}"#;

/// Minor page faults of the calling thread so far.
fn faults() -> u64 {
    if std::env::var_os("NO_FAULTS").is_some() {
        return 0;
    }
    minflt(Path::new("/proc/thread-self/stat"))
}

/// The minor-fault count of a /proc `stat` file: the 10th field, the 8th
/// after the command name (which ends with ')' and may hold spaces).
fn minflt(stat: &Path) -> u64 {
    let stat = std::fs::read_to_string(stat).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    rest.split_whitespace()
        .nth(7)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// CPU time (ns) and minor faults of the engine's preparer thread so far.
fn preparer() -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "weft-plugin-pre" {
            let run = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            let ns = run
                .split_whitespace()
                .next()
                .and_then(|f| f.parse().ok())
                .unwrap_or(0);
            return (ns, minflt(&t.path().join("stat")));
        }
    }
    (0, 0)
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn pct(mut d: Vec<Duration>, p: f64) -> Duration {
    d.sort();
    d[((d.len() as f64 * p) as usize).min(d.len() - 1)]
}

/// Runs `call` once a spare is ready, `n` times; prints one row.
fn measure(name: &str, n: usize, ready: impl Fn() -> usize, call: impl Fn()) {
    for _ in 0..20 {
        call();
    }
    let (mut times, mut flts) = (Vec::with_capacity(n), 0u64);
    let (cpu0, pflt0) = preparer();
    for _ in 0..n {
        while ready() == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        let f = faults();
        let t = Instant::now();
        call();
        times.push(t.elapsed());
        flts += faults() - f;
    }
    while ready() == 0 {
        std::thread::sleep(Duration::from_micros(50));
    }
    let (cpu1, pflt1) = preparer();
    if let Ok(to) = std::env::var("MAPS") {
        let _ = std::fs::copy("/proc/self/maps", to);
    }
    println!(
        "| {name} | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} | {:.1} µs | {:.1} |",
        median(times.clone()).as_secs_f64() * 1e6,
        times.iter().sum::<Duration>().as_secs_f64() * 1e6 / n as f64,
        pct(times, 0.99).as_secs_f64() * 1e6,
        flts as f64 / n as f64,
        (cpu1 - cpu0) as f64 / n as f64 / 1e3,
        (pflt1 - pflt0) as f64 / n as f64,
    );
}

fn main() {
    let n: usize = std::env::var("CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let only = std::env::var("ONLY").unwrap_or_default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut config = EngineConfig::default();
    if let Some(n) = std::env::var("SPARES").ok().and_then(|s| s.parse().ok()) {
        config.spares = n;
    }
    println!("{} spares per version", config.spares);
    let engine = PluginEngine::new(config).expect("engine");
    println!("{n} calls per plugin, each once a spare is ready");
    println!(
        "| plugin | per call on a spare, p50 | mean | p99 | page faults per call | preparer CPU per call | preparer faults per call |"
    );
    println!("|---|---|---|---|---|---|---|");
    let tasks = [
        (
            "empty",
            "target/test-guests/empty",
            "examples/tasks/hello-pod.json",
        ),
        ("pod", "target/plugins/pod", "examples/tasks/hello-pod.json"),
        (
            "c-configmap",
            "target/sdk-examples/c-configmap",
            "sdk/c/examples/configmap-writer/task.json",
        ),
        (
            "py-rayjob",
            "target/sdk-examples/py-rayjob",
            "sdk/python/examples/rayjob/task.json",
        ),
        (
            "js-job",
            "target/sdk-examples/js-job",
            "sdk/js/examples/k8s-job/task.json",
        ),
        (
            "js-job (SpiderMonkey)",
            "target/sdk-examples/starlingmonkey/js-job",
            "sdk/js/examples/k8s-job/task.json",
        ),
        // Each SDK's floor: its isolation guest, which swaps one global and
        // answers a three-field ConfigMap.
        ("py-leak", "target/sdk-examples/py-leak", LEAK_TASK),
        ("js-leak", "target/sdk-examples/js-leak", LEAK_TASK),
        (
            "js-leak (SpiderMonkey)",
            "target/sdk-examples/starlingmonkey/js-leak",
            LEAK_TASK,
        ),
    ];
    for (name, base, task) in tasks {
        if !name.contains(&only) {
            continue;
        }
        let Ok((Plugin::Task(plugin), _)) = load_file(&engine, &root.join(format!("{base}.wasm")))
        else {
            panic!("{base}.wasm: run `make guests`");
        };
        let text = if task.starts_with('{') {
            task.to_string()
        } else {
            std::fs::read_to_string(root.join(task)).unwrap()
        };
        let t: Value = serde_json::from_str(&text).unwrap();
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
        measure(
            name,
            n,
            || plugin.spares_ready(),
            || {
                plugin.build_resource(&ctx).expect("builds");
            },
        );
    }
    let call = MiddlewareCall {
        method: "/weft.admin.v1.AdminService/GetExecution".into(),
        metadata: vec![
            ("authorization".into(), "Bearer bench-token".into()),
            ("x-request-id".into(), "0b6f3c1e-bench".into()),
            ("user-agent".into(), "tonic/0.14".into()),
        ],
        peer: Some("127.0.0.1:50000".into()),
        request: Some(r#"{"id":{"namespace":"default","name":"bench"}}"#.into()),
    };
    for (name, dir) in [
        ("empty-mw", "test-guests"),
        ("request-id", "plugins"),
        ("auth-token", "plugins"),
        ("rate-limit", "plugins"),
        ("audit", "plugins"),
    ] {
        if !name.contains(&only) {
            continue;
        }
        let Ok((Plugin::Middleware(plugin), _)) =
            load_file(&engine, &root.join(format!("target/{dir}/{name}.wasm")))
        else {
            panic!("{name}.wasm: run `make guests`");
        };
        let mut plugin = (*plugin).clone();
        match name {
            "auth-token" => plugin.set_config_overrides(
                json!({"tokens": {"bench-token": "bench"}})
                    .as_object()
                    .unwrap(),
            ),
            "rate-limit" => {
                plugin.set_config_overrides(json!({"rate": 1e9, "burst": 1e9}).as_object().unwrap())
            }
            _ => {}
        }
        measure(
            name,
            n,
            || plugin.spares_ready(),
            || {
                plugin.on_request(&call).expect("verdict");
            },
        );
    }
}
