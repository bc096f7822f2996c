//! A well-behaved task plugin: what the sandbox suite calls after every
//! fault to prove the host still serves. It echoes its task into a Pod and
//! counts its calls in host state (instances are fresh per call, so the
//! count proves state outlives them), and shows the plugin config it got.

use weft_plugin_sdk::{json, log, state, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

struct Echo;

impl TaskPlugin for Echo {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let calls = state::get("calls")
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        state::set("calls", calls.to_string().as_bytes(), None).map_err(PluginError::retryable)?;
        log::info(&format!("echo call {calls} for {}", ctx.node_id));
        Ok(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": ctx.resource_name,
                "annotations": {
                    "echo.weft.dev/calls": calls.to_string(),
                    "echo.weft.dev/config": ctx.config.to_string(),
                    "echo.weft.dev/inputs": ctx.inputs.to_string(),
                    // What the operator configured (Secret values
                    // included): tests check the guest got them.
                    "echo.weft.dev/plugin-config": ctx.plugin_config.to_string(),
                },
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]},
        }))
    }

    fn get_task_phase(ctx: TaskContext, _observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(PhaseInfo::success(ctx.inputs.as_object().cloned()))
    }
}

weft_plugin_sdk::export_task_plugin!(Echo);
