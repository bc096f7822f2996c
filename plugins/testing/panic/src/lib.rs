//! Panics: the host must report a trap with the panic message.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct Panic;

impl TaskPlugin for Panic {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        panic!("guest panicked on purpose");
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(Panic);
