//! my-task: a Weft task plugin. Rename it in `weft-plugin.yaml` and
//! `Cargo.toml`, then make `build_resource` and `get_task_phase` your own.

use serde::Deserialize;
use weft_plugin_sdk::{json, log, PhaseInfo, PluginError, TaskContext, TaskPlugin, Value};

/// The task's `config`, typed: a missing or mistyped field is a permanent
/// error that names it.
#[derive(Deserialize)]
struct Config {
    image: String,
    #[serde(default)]
    command: Vec<String>,
}

/// The plugin.
pub struct MyTask;

impl TaskPlugin for MyTask {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let config: Config = ctx.config_as()?;
        log::info(&format!("building {}", ctx.resource_name));
        Ok(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            // The host's name: a re-run after a crash finds the same Pod.
            "metadata": {"name": ctx.resource_name, "namespace": ctx.namespace, "labels": ctx.labels},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": config.image, "command": config.command}],
            },
        }))
    }

    fn get_task_phase(_ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        // Must answer for ANY object, even one without a status yet.
        Ok(match observed["status"]["phase"].as_str() {
            Some("Succeeded") => PhaseInfo::success(None),
            Some("Failed") => PhaseInfo::retryable("Failed", "the pod failed"),
            Some("Running") => PhaseInfo::running(),
            _ => PhaseInfo::queued(),
        })
    }
}

weft_plugin_sdk::export_task_plugin!(MyTask);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_pod_with_the_hosts_name() {
        let ctx = TaskContext {
            resource_name: "wf-hello-0".into(),
            config: json!({"image": "busybox:1.36", "command": ["echo", "hi"]}),
            ..TaskContext::default()
        };
        let pod = MyTask::build_resource(ctx).unwrap();
        assert_eq!(pod["metadata"]["name"], "wf-hello-0");
        assert_eq!(pod["spec"]["containers"][0]["image"], "busybox:1.36");
    }

    #[test]
    fn a_missing_image_is_a_permanent_error() {
        let ctx = TaskContext {
            config: json!({}),
            ..TaskContext::default()
        };
        assert!(!MyTask::build_resource(ctx).unwrap_err().retryable);
    }

    #[test]
    fn any_object_gets_a_phase() {
        let ctx = TaskContext::default();
        assert!(MyTask::get_task_phase(ctx, json!({})).is_ok());
    }
}
