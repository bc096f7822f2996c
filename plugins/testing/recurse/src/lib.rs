//! Recurses without end: wasmtime's stack limit must stop it.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

/// Recursion on scalars only: every frame lives on wasmtime's native stack
/// (no locals spilled to the guest's linear-memory stack), so the host's
/// stack limit is what stops it. The condition can never hold, but the
/// optimiser cannot know that, so it stays a real call.
#[inline(never)]
fn deeper(n: u64, limit: u64) -> u64 {
    if n == limit {
        return n;
    }
    deeper(n + 1, limit).wrapping_mul(3).wrapping_add(n)
}

struct Recurse;

impl TaskPlugin for Recurse {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        Ok(Value::from(deeper(0, std::hint::black_box(u64::MAX))))
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(Recurse);
