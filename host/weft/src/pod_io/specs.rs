//! Where a task's pods are in the object its plugin built: a Pod is its
//! own; any other object names its pod specs in an annotation the plugin
//! SDK writes (`weft_plugin_sdk::pods::mark_pod_specs`), so a Job's, a
//! PyTorchJob's or an operator's pods move artifacts as a Pod does.

use serde_json::Value;
use weft_dag::TaskSpec;

/// The annotation listing an object's pod specs: a JSON array of JSON
/// Pointers (RFC 6901). The plugin SDKs write it under this name.
pub const POD_SPECS_ANNOTATION: &str = "weft.dev/pod-specs";

/// Whether `object` is a Pod.
pub fn is_pod(object: &Value) -> bool {
    object["kind"] == "Pod" && object["apiVersion"] == "v1"
}

/// The JSON Pointers of `object`'s pod specs, the reporting one first:
/// a Pod's `/spec`; the marked ones of any other object (none when it is
/// not marked). A mark that is not a list of pointers at pod specs is the
/// plugin's mistake, named.
pub fn pod_specs(object: &Value) -> Result<Vec<String>, String> {
    if is_pod(object) {
        return Ok(vec!["/spec".into()]);
    }
    let Some(mark) = object["metadata"]["annotations"][POD_SPECS_ANNOTATION].as_str() else {
        return Ok(Vec::new());
    };
    let kind = object["kind"].as_str().unwrap_or("resource");
    let pointers: Vec<String> = serde_json::from_str(mark).map_err(|e| {
        format!("the {kind}'s annotation {POD_SPECS_ANNOTATION} is not a JSON list of JSON Pointers ({e}): {mark:?}")
    })?;
    if pointers.is_empty() {
        return Err(format!(
            "the {kind}'s annotation {POD_SPECS_ANNOTATION} lists no pod spec"
        ));
    }
    for p in &pointers {
        let containers = object.pointer(p).and_then(|s| s["containers"].as_array());
        if containers.is_none_or(|c| c.is_empty()) {
            return Err(format!(
                "the {kind}'s annotation {POD_SPECS_ANNOTATION} names {p:?}, which is not a pod spec with containers"
            ));
        }
    }
    Ok(pointers)
}

/// Why a task's artifacts cannot move in `object`: it has no pod spec.
pub fn no_pod(object: &Value, task: &TaskSpec) -> String {
    let kind = object["kind"].as_str().unwrap_or("resource");
    format!(
        "the task declares artifacts, which move in pods, and task type {:?} built a {kind} with no pod spec marked (its plugin marks them with the SDK's mark_pod_specs: annotation {POD_SPECS_ANNOTATION})",
        task.task_type
    )
}
