//! Loops forever in build-resource: the host's epoch deadline must stop it.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct LoopForever;

impl TaskPlugin for LoopForever {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(LoopForever);
