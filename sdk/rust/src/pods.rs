//! Artifacts in the pods of a task's own resource.
//!
//! The host moves a task's artifacts in the pods that run it, with no
//! credentials in them: an init container fetches the inputs through
//! presigned URLs, and the main container's command runs under
//! `weft io exec`, which uploads the outputs after it exits 0. It finds a
//! Pod's spec itself. For any other object (a Job, a PyTorchJob, an
//! operator's custom resource that embeds pod templates) the plugin says
//! where the pod specs are with [`mark_pod_specs`], and the host wraps each
//! one, so a plugin author never reimplements the data plane.

use serde_json::Value;

use crate::PluginError;

/// The annotation that lists the pod specs the host wraps: a JSON array of
/// JSON Pointers (RFC 6901) into the object, e.g.
/// `["/spec/template/spec"]` for a Job.
pub const POD_SPECS_ANNOTATION: &str = "weft.dev/pod-specs";

/// Marks the pod specs of `object` (JSON Pointers, RFC 6901) for the host
/// to wrap with the task's artifacts. The first is the pod spec whose main
/// container (`main`, else the first) reports the task's outputs (output
/// artifacts, output parameters, an archived log); the others receive the
/// inputs only. Each must point at an object with a non-empty `containers`
/// list. A task with artifacts then needs a `command` on each main
/// container (the host runs it under `weft io exec`; an image's entrypoint
/// is not known to it): the host fails such a task with a message naming
/// the container. Marking is harmless for a task without artifacts.
///
/// ```
/// use weft_plugin_sdk::{json, pods};
///
/// let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
///     "spec": {"template": {"spec": {"restartPolicy": "Never",
///         "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "wc -c /in"]}]}}}});
/// pods::mark_pod_specs(&mut job, &["/spec/template/spec"]).unwrap();
/// assert_eq!(job["metadata"]["annotations"][pods::POD_SPECS_ANNOTATION], r#"["/spec/template/spec"]"#);
///
/// let err = pods::mark_pod_specs(&mut job, &["/spec/template"]).unwrap_err();
/// assert!(err.message.contains("/spec/template: not a pod spec"), "{}", err.message);
/// ```
pub fn mark_pod_specs(object: &mut Value, pointers: &[&str]) -> Result<(), PluginError> {
    if pointers.is_empty() {
        return Err(PluginError::permanent(
            "mark_pod_specs: no pod spec given (pass at least one JSON Pointer)",
        ));
    }
    for p in pointers {
        check_pod_spec(object, p).map_err(|why| PluginError::permanent(format!("{p}: {why}")))?;
    }
    let list = serde_json::to_string(pointers).expect("strings serialise");
    let metadata = object
        .as_object_mut()
        .ok_or_else(|| PluginError::permanent("mark_pod_specs: the resource is not an object"))?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = Value::Object(Default::default());
    }
    metadata["annotations"][POD_SPECS_ANNOTATION] = Value::String(list);
    Ok(())
}

/// Why `pointer` in `object` is not a pod spec.
fn check_pod_spec(object: &Value, pointer: &str) -> Result<(), String> {
    let spec = object
        .pointer(pointer)
        .ok_or("nothing there (a JSON Pointer starts with /)")?;
    match spec["containers"].as_array().is_some_and(|c| !c.is_empty()) {
        true => Ok(()),
        false => Err("not a pod spec (no containers)".into()),
    }
}
