//! The isolation guest (Rust): each call keeps its task's `config.secret`
//! in a global and reports what an earlier call left there, in
//! build-resource's ConfigMap (`data.seen`) and get-task-phase's outputs
//! (`seen`). A host that gives every call a fresh instance (or a reset
//! one) shows it nothing; one that reuses an instance leaks the secret.
//! With `config.fail: true` it stores the secret and then traps (a
//! panic), so a faulted instance is checked too. Its C, Python and
//! JavaScript twins live under sdk/*/tests/leak.

use std::sync::Mutex;

use weft_plugin_sdk::{json, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

/// What the last call in this instance stored.
static SEEN: Mutex<String> = Mutex::new(String::new());

/// Swaps the global for this task's secret; the earlier value.
fn swap(ctx: &TaskContext) -> String {
    let secret = ctx.config["secret"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    std::mem::replace(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()), secret)
}

struct Leak;

impl TaskPlugin for Leak {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let seen = swap(&ctx);
        if ctx.config["fail"] == json!(true) {
            panic!("failing on purpose, with the secret stored");
        }
        Ok(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ctx.resource_name},
            "data": {"seen": seen},
        }))
    }

    fn get_task_phase(ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        let seen = swap(&ctx);
        Ok(PhaseInfo::success(
            json!({"seen": seen}).as_object().cloned(),
        ))
    }
}

weft_plugin_sdk::export_task_plugin!(Leak);
