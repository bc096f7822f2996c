//! The pod plugin's build-resource as the host serves it: on a spare
//! instance prepared ahead of time, instantiated inline (the previous
//! path), call-only on a warm instance, and the same logic compiled
//! natively; each next to the floor, an empty component that parses
//! nothing. `cargo bench -p weft-plugin --bench pod` (after `make guests`);
//! figures go to docs/benchmarks.md.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use weft_plugin::{
    EngineConfig, Plugin, PluginEngine, TaskContext, TaskPlugin, registry::load_file,
};

fn task() -> TaskContext {
    TaskContext::for_attempt(
        "nightly-etl",
        "3f1c9a4e-1111-2222-3333-444455556666",
        "team-a",
        "train",
        0,
        "pod",
        json!({"container": {"image": "ghcr.io/acme/train:1.4", "command": ["python", "train.py"],
               "args": ["--rows", "{{inputs.rows}}"], "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}}),
        json!({"rows": 42, "table": "events"}),
    )
}

fn load(engine: &PluginEngine, file: &str) -> Arc<TaskPlugin> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .join(file);
    assert!(
        path.is_file(),
        "{} missing: run `make guests`",
        path.display()
    );
    match load_file(engine, &path) {
        Ok((Plugin::Task(p), _)) => p,
        other => panic!("{file}: {other:?}"),
    }
}

fn engine(spares: usize) -> PluginEngine {
    PluginEngine::new(EngineConfig {
        spares,
        ..EngineConfig::default()
    })
    .expect("engine")
}

/// Calls timed one at a time, each once a spare is ready again (the
/// wait is not timed): the caller's path when calls are further apart
/// than one instantiation, as a controller's are.
fn on_spares(plugin: &TaskPlugin, ctx: &TaskContext, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        while plugin.spares_ready() == 0 {
            std::thread::yield_now();
        }
        let start = Instant::now();
        black_box(plugin.build_resource(black_box(ctx)).expect("builds"));
        total += start.elapsed();
    }
    total
}

/// The first call into a fresh instance made just before on the same
/// thread (instantiating and dropping are not timed): what a call costs
/// beyond a warm one because its instance is new.
fn first_calls(plugin: &TaskPlugin, ctx: &TaskContext, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut fresh = plugin.warm_instance().expect("instance");
        let start = Instant::now();
        black_box(fresh.build_resource_raw(black_box(ctx)).expect("builds"));
        total += start.elapsed();
    }
    total
}

/// Calls into a warm instance (one call made before). The instance is
/// replaced, untimed, every [`WARM_CALLS`] calls: the pod plugin's
/// allocator never reuses memory (the host calls an instance once), so
/// one instance cannot take criterion's thousands of calls.
fn warm_calls(plugin: &TaskPlugin, ctx: &TaskContext, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut warm = plugin.warm_instance().expect("instance");
    for i in 0..iters {
        if i % WARM_CALLS == 0 {
            warm = plugin.warm_instance().expect("instance");
            warm.build_resource_raw(ctx).expect("builds");
        }
        let start = Instant::now();
        black_box(warm.build_resource_raw(black_box(ctx)).expect("builds"));
        total += start.elapsed();
    }
    total
}

/// Calls per warm instance in [`warm_calls`].
const WARM_CALLS: u64 = 64;

fn bench(c: &mut Criterion) {
    let ctx = task();
    let spare = engine(1);
    let inline = engine(0);
    let (pod, pod_inline) = (
        load(&spare, "plugins/pod.wasm"),
        load(&inline, "plugins/pod.wasm"),
    );
    let (empty, empty_inline) = (
        load(&spare, "test-guests/empty.wasm"),
        load(&inline, "test-guests/empty.wasm"),
    );

    for (name, plugin) in [("pod", &pod), ("empty", &empty)] {
        let (_, stats) = plugin.build_resource(&ctx).expect("builds");
        eprintln!("{name}: linear memory peak {} bytes", stats.memory_peak);
        c.bench_function(&format!("{name} build-resource: on a spare"), |b| {
            b.iter_custom(|iters| on_spares(plugin, &ctx, iters))
        });
        c.bench_function(
            &format!("{name} build-resource: back to back, spares refilled meanwhile"),
            |b| b.iter(|| plugin.build_resource(black_box(&ctx)).expect("builds")),
        );
    }
    for (name, plugin) in [("pod", &pod_inline), ("empty", &empty_inline)] {
        c.bench_function(
            &format!("{name} build-resource: instantiated inline"),
            |b| b.iter(|| plugin.build_resource(black_box(&ctx)).expect("builds")),
        );
        c.bench_function(&format!("{name}: instantiate only"), |b| {
            b.iter(|| plugin.warm_instance().map(drop).expect("instance"))
        });
        c.bench_function(
            &format!("{name} build-resource: first call, fresh instance"),
            |b| b.iter_custom(|iters| first_calls(plugin, &ctx, iters)),
        );
        c.bench_function(
            &format!("{name} build-resource: call only, warm instance"),
            |b| b.iter_custom(|iters| warm_calls(plugin, &ctx, iters)),
        );
    }

    // The same logic natively: the guest parses its context from JSON
    // strings and returns a JSON string, so the native side does too.
    let sdk_ctx = weft_plugin_sdk::TaskContext {
        workflow: ctx.workflow.clone(),
        namespace: ctx.namespace.clone(),
        node_id: ctx.node_id.clone(),
        attempt: ctx.attempt,
        task_type: ctx.task_type.clone(),
        config: ctx.config.clone(),
        inputs: ctx.inputs.clone(),
        resource_name: ctx.resource_name.clone(),
        labels: ctx.labels.clone(),
        plugin_config: serde_json::Value::Object(pod.manifest().config.clone()),
    };
    let config = ctx.config.to_string();
    let inputs = ctx.inputs.to_string();
    let plugin_config = sdk_ctx.plugin_config.to_string();
    c.bench_function("pod build-resource: native", |b| {
        b.iter(|| {
            let mut c = sdk_ctx.clone();
            c.config = serde_json::from_str(black_box(&config)).unwrap();
            c.inputs = serde_json::from_str(black_box(&inputs)).unwrap();
            c.plugin_config = serde_json::from_str(black_box(&plugin_config)).unwrap();
            weft_plugin_pod::build_pod(&c).unwrap().to_string()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
