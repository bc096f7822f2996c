//! No state of one task may be visible to the next, whatever reuse the
//! host does. The isolation guest, in Rust (plugins/testing/leak), C,
//! Python and JavaScript (sdk/*/tests/leak; JavaScript built with each
//! engine), keeps each task's secret in a global and reports what an
//! earlier call left there. Each is shown to
//! leak through an instance that is kept across calls (so this test can
//! fail), then driven through the host's own call path: build-resource,
//! a call that stores its secret and then faults, and get-task-phase, none
//! of which may see another call's secret; once with instances made on
//! the caller's path, then with one and with two spares prepared ahead of
//! time (every call waiting until one is ready, so each is served from a
//! spare; with a cheap guest's extra spare, used instances wait for the
//! preparer between calls).
//! Built by `make guests`.

mod common;

use common::root;
use serde_json::{Value, json};
use weft_plugin::{
    EngineConfig, Plugin, PluginEngine, TaskContext, TaskPlugin, manifest::Manifest,
};

/// Each isolation guest: its name and the folder `make guests` builds it to.
const GUESTS: [(&str, &str); 5] = [
    ("leak", "target/test-guests"),
    ("c-leak", "target/sdk-examples"),
    ("py-leak", "target/sdk-examples"),
    ("js-leak", "target/sdk-examples"),
    // The JavaScript guest with the other engine (SpiderMonkey).
    ("js-leak", "target/sdk-examples/starlingmonkey"),
];

fn load(engine: &PluginEngine, name: &str, dir: &str) -> std::sync::Arc<TaskPlugin> {
    let dir = root().join(dir);
    let wasm = std::fs::read(dir.join(format!("{name}.wasm")))
        .unwrap_or_else(|e| panic!("{name}.wasm: {e}: build the guests (make guests)"));
    let yaml = std::fs::read_to_string(dir.join(format!("{name}.yaml"))).unwrap();
    let manifest = Manifest::parse(&yaml, name).unwrap();
    match Plugin::load(engine, &wasm, manifest, name) {
        Ok((Plugin::Task(p), _)) => p,
        Ok(_) => panic!("{name} is not a task plugin"),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// A task whose config carries `secret` (and `fail`: store it, then fault).
fn task(secret: &str, fail: bool) -> TaskContext {
    TaskContext::for_attempt(
        "isolation",
        "00000000-0000-0000-0000-000000000000",
        "default",
        "task",
        0,
        "leak",
        json!({"secret": secret, "fail": fail}),
        json!({}),
    )
}

/// With spares on, waits until one is ready so the next call uses it.
fn ready(plugin: &TaskPlugin, spares: usize) {
    let start = std::time::Instant::now();
    while spares > 0 && plugin.spares_ready() == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{}: no spare within 30 s",
            plugin.name()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// What build-resource saw left by an earlier call.
fn seen_by_build(plugin: &TaskPlugin, spares: usize, secret: &str) -> Value {
    ready(plugin, spares);
    let (obj, _) = plugin
        .build_resource(&task(secret, false))
        .unwrap_or_else(|e| panic!("build-resource: {e}"));
    obj["data"]["seen"].clone()
}

#[test]
fn no_call_sees_what_an_earlier_call_left_in_guest_memory() {
    for spares in [0, 1, 2] {
        let engine = PluginEngine::new(EngineConfig {
            cache_dir: Some(root().join("target/weft-test-cache")),
            spares,
            ..EngineConfig::default()
        })
        .unwrap();
        for (name, dir) in GUESTS {
            let plugin = load(&engine, name, dir);
            isolated(&plugin, &format!("{dir}/{name}"), spares);
        }
    }
}

/// One guest's run (see the module's doc).
fn isolated(plugin: &TaskPlugin, name: &str, spares: usize) {
    // The guest does leak when one instance serves two calls.
    let mut warm = plugin.warm_instance().unwrap();
    warm.build_resource_raw(&task("kept-secret", false))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let second = warm
        .build_resource_raw(&task("next", false))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        second.contains("kept-secret"),
        "{name}: a reused instance should show the earlier secret: {second}"
    );
    drop(warm);

    // The host's calls never do.
    for i in 0..3 {
        let seen = seen_by_build(plugin, spares, &format!("secret-{i}"));
        assert_eq!(seen, json!(""), "{name}: call {i} saw {seen}");
    }
    // A call that stored its secret and then failed (a trap in Rust
    // and C, an error in Python and JavaScript) leaves nothing either.
    ready(plugin, spares);
    assert!(
        plugin.build_resource(&task("faulted", true)).is_err(),
        "{name}: the failing call succeeded"
    );
    let seen = seen_by_build(plugin, spares, "after-fault");
    assert_eq!(seen, json!(""), "{name}: after a fault it saw {seen}");
    // Nor does another export of the same plugin.
    ready(plugin, spares);
    let (phase, _) = plugin
        .get_task_phase(&task("phase", false), &json!({}))
        .unwrap_or_else(|e| panic!("{name}: get-task-phase: {e}"));
    let outputs = phase.outputs.unwrap_or_default();
    assert_eq!(outputs.get("seen"), Some(&json!("")), "{name}: {outputs:?}");
}
