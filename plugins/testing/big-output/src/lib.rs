//! Returns a 100 MB answer: the host's output limit must refuse it.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct BigOutput;

impl TaskPlugin for BigOutput {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        Ok(Value::String("x".repeat(100_000_000)))
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(BigOutput);
