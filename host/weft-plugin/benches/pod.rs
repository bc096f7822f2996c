//! The pod plugin's build-resource: instantiate+call (what the host does
//! per call), call-only on a warm instance, and the same logic compiled
//! natively, as a ratio. `cargo bench -p weft-plugin` (after `make guests`);
//! figures go to docs/benchmarks.md.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use weft_plugin::{EngineConfig, Plugin, PluginEngine, TaskContext, registry::load_file};

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

fn bench(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/plugins/pod.wasm");
    assert!(
        path.is_file(),
        "{} missing: run `make guests`",
        path.display()
    );
    let engine = PluginEngine::new(EngineConfig::default()).expect("engine");
    let Ok((Plugin::Task(pod), _)) = load_file(&engine, &path) else {
        panic!("pod plugin")
    };
    let ctx = task();

    c.bench_function(
        "pod build-resource: instantiate+call (host checks included)",
        |b| b.iter(|| pod.build_resource(black_box(&ctx)).expect("builds")),
    );

    c.bench_function("pod: instantiate only", |b| {
        b.iter(|| pod.warm_instance().map(drop).expect("instance"))
    });

    let mut warm = pod.warm_instance().expect("instance");
    c.bench_function("pod build-resource: call only (warm instance)", |b| {
        b.iter(|| warm.build_resource_raw(black_box(&ctx)).expect("builds"))
    });

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
