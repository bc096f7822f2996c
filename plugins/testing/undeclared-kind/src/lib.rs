//! Builds an apps/v1 Deployment although its manifest only allows v1 Pods.

use weft_plugin_sdk::{json, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct UndeclaredKind;

impl TaskPlugin for UndeclaredKind {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        Ok(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": ctx.resource_name}, "spec": {}}),
        )
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(UndeclaredKind);
