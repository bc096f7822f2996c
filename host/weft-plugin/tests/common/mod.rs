//! Shared by the integration tests: where the components built from the
//! repo's sources are, and a host engine to run them in.
//!
//! The components come from `make guests` (which `make test` runs first);
//! a missing one fails the test with the command to run, never skips it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use weft_plugin::{
    EngineConfig, Plugin, PluginEngine, TaskContext, TaskPlugin, registry::load_file,
};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A built component: `target/plugins/<name>.wasm` for first-party plugins,
/// `target/test-guests/<name>.wasm` for the sandbox's test guests.
pub fn component(dir: &str, name: &str) -> PathBuf {
    let path = repo_root()
        .join("target")
        .join(dir)
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build the guests first with `make guests`",
        path.display()
    );
    path
}

/// One engine per test binary would share the instance pool across tests;
/// each test gets its own so a test that exhausts something cannot leak
/// into another. The on-disk cache is shared: compiling once per run.
pub fn engine() -> PluginEngine {
    let cache = repo_root().join("target/weft-test-cache");
    std::fs::create_dir_all(&cache).expect("create cache dir");
    PluginEngine::new(EngineConfig {
        cache_dir: Some(cache),
        ..EngineConfig::default()
    })
    .expect("engine")
}

/// Load a task plugin from one of the build directories.
pub fn task_plugin(engine: &PluginEngine, dir: &str, name: &str) -> std::sync::Arc<TaskPlugin> {
    match load_file(engine, &component(dir, name)) {
        Ok((Plugin::Task(p), _)) => p,
        Ok((other, _)) => panic!("{name} is not a task plugin: {other:?}"),
        Err(e) => panic!("{name} failed to load: {e}"),
    }
}

/// A task context as the controller makes it for node `node` of workflow `wf`.
pub fn ctx(task_type: &str, config: Value, inputs: Value) -> TaskContext {
    TaskContext::for_attempt(
        "wf",
        "3f1c9a4e-1111-2222-3333-444455556666",
        "team-a",
        "train",
        0,
        task_type,
        config,
        inputs,
    )
}

/// A context for the sandbox's test guests, which ignore their config.
pub fn guest_ctx() -> TaskContext {
    ctx("test", json!({}), json!({}))
}

/// Waits until the plugin has a spare instance ready, so its next call is
/// served from one (instances are prepared on the engine's own thread).
pub fn wait_for_spare(plugin: &TaskPlugin) {
    let start = std::time::Instant::now();
    while plugin.spares_ready() == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{}: no spare instance was prepared within 30 s",
            plugin.name()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
