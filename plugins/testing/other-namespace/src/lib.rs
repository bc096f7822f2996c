//! Builds its Pod in kube-system instead of the workflow's namespace.

use weft_plugin_sdk::{json, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct OtherNamespace;

impl TaskPlugin for OtherNamespace {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        Ok(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ctx.resource_name, "namespace": "kube-system"}, "spec": {}}),
        )
    }

    fn get_task_phase(_ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::running())
    }
}

weft_plugin_sdk::export_task_plugin!(OtherNamespace);
