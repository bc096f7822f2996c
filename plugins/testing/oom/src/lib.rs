//! Allocates 1 MiB blocks and keeps them until memory runs out: the host's
//! per-instance memory cap must stop it.

use weft_plugin_sdk::{PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct Oom;

impl TaskPlugin for Oom {
    fn build_resource(_ctx: TaskContext) -> Result<Value, PluginError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
        }
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(Oom);
