//! Answers build-resource with 100 MB of JSON: the host's output limit
//! (4 MiB by default) must refuse it as a typed error, not crash or hang.
//!
//! The text is written at its final size, so the guest needs 100 MB, well
//! inside its 256Mi memory cap: it is the output limit, not the memory
//! cap, that stops it.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

/// Characters in the answer's JSON string.
const SIZE: usize = 100_000_000;

struct BigOutput;

impl TaskPlugin for BigOutput {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        Ok(Value::String("x".repeat(SIZE)))
    }

    fn build_resource_json(_ctx: TaskContext) -> Result<String, PluginError> {
        let mut json = String::with_capacity(SIZE + 2);
        json.push('"');
        json.extend(std::iter::repeat_n('x', SIZE));
        json.push('"');
        Ok(json)
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(BigOutput);
