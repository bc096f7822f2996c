//! Task secrets, as Flyte's propeller injects them: the controller marks
//! the pods of a task that declares `secrets` (a label the webhook
//! configuration selects on, and the references as an annotation), and the
//! mutating webhook turns each reference into an environment variable with
//! `valueFrom.secretKeyRef` or a read-only `secret` volume mounted at
//! `/etc/weft/secrets/NAME`. Only names and keys pass through Weft: the
//! kubelet reads the values, so they never reach a plugin, the Workflow's
//! status or a log line.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::{Value, json};
use weft_dag::spec::{MountAs, SECRETS_DIR, SecretRef};

/// The label the MutatingWebhookConfiguration's objectSelector matches.
pub const LABEL: &str = "weft.dev/inject-secrets";
/// The references, as a JSON list.
pub const ANNOTATION: &str = "weft.dev/secrets";
/// Set by the webhook once it mounted them.
pub const INJECTED: &str = "weft.dev/secrets-injected";
/// The webhook configuration a cluster install registers.
pub const CONFIGURATION: &str = "weft-pod-secrets";

/// Marks a task's child for injection: a Pod, or the pod template of a
/// Job-like object. Anything else cannot carry secrets and is refused.
pub fn mark(obj: &mut Value, secrets: &[SecretRef]) -> Result<(), String> {
    if secrets.is_empty() {
        return Ok(());
    }
    let mut all = secrets.iter().enumerate();
    if let Some((i, s)) = all.find(|(_, s)| s.mount_as == MountAs::Header) {
        return Err(format!(
            "task.secrets[{i}] ({}/{}): mountAs: header is a request header of a web-API task; a pod takes mountAs: env or file",
            s.name, s.key
        ));
    }
    let refs = serde_json::to_string(secrets).map_err(|e| e.to_string())?;
    let is_pod = obj["kind"] == "Pod" && obj["apiVersion"] == "v1";
    let meta = if is_pod {
        &mut obj["metadata"]
    } else if obj["spec"]["template"]["spec"]["containers"].is_array() {
        &mut obj["spec"]["template"]["metadata"]
    } else {
        return Err(format!(
            "task secrets are mounted into pods, and the plugin built a {} with no pod template",
            obj["kind"].as_str().unwrap_or("resource")
        ));
    };
    meta["labels"][LABEL] = "true".into();
    meta["annotations"][ANNOTATION] = refs.into();
    Ok(())
}

/// Whether `obj` is a Pod marked for injection.
pub fn marked(obj: &Value) -> bool {
    obj["kind"] == "Pod" && obj["metadata"]["labels"][LABEL] == "true"
}

/// Why a marked Pod has no secrets: the webhook did not see it.
pub fn missing(pod: &Value) -> Option<String> {
    let injected = pod["metadata"]["annotations"][INJECTED] == "true";
    (marked(pod) && !injected).then(|| {
        format!(
            "the task's secrets were not mounted into Pod {}: Weft's admission webhook did not mutate it (is the MutatingWebhookConfiguration {CONFIGURATION} installed and its webhook up?)",
            pod["metadata"]["name"].as_str().unwrap_or("")
        )
    })
}

/// The answer to one AdmissionReview of a Pod.
pub fn review(review: AdmissionReview<DynamicObject>) -> AdmissionReview<DynamicObject> {
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(e.to_string()).into_review(),
    };
    let resp = AdmissionResponse::from(&req);
    let pod = match (&req.operation, &req.object) {
        (Operation::Create, Some(obj)) => serde_json::to_value(obj).unwrap_or(Value::Null),
        _ => return resp.into_review(),
    };
    match patch(&pod) {
        Ok(None) => resp,
        Ok(Some(ops)) => match serde_json::from_value::<json_patch::Patch>(ops) {
            Ok(p) => resp
                .with_patch(p)
                .unwrap_or_else(|e| AdmissionResponse::invalid(e.to_string())),
            Err(e) => AdmissionResponse::invalid(e.to_string()),
        },
        Err(why) => resp.deny(why),
    }
    .into_review()
}

/// The JSON patch that mounts a marked Pod's secrets; none when it is not
/// marked or already done.
fn patch(pod: &Value) -> Result<Option<Value>, String> {
    let annotations = &pod["metadata"]["annotations"];
    let Some(refs) = annotations[ANNOTATION].as_str() else {
        return Ok(None);
    };
    if annotations[INJECTED] == "true" {
        return Ok(None);
    }
    let secrets: Vec<SecretRef> = serde_json::from_str(refs)
        .map_err(|e| format!("annotation {ANNOTATION} is not a list of secret references: {e}"))?;
    let env: Vec<Value> = secrets
        .iter()
        .filter(|s| s.mount_as == MountAs::Env)
        .map(|s| json!({"name": s.env_var(), "valueFrom": {"secretKeyRef": {"name": s.name, "key": s.key}}}))
        .collect();
    // One volume per Secret, projecting only the keys asked for.
    let mut files: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for s in secrets.iter().filter(|s| s.mount_as == MountAs::File) {
        files
            .entry(&s.name)
            .or_default()
            .push(json!({"key": s.key, "path": s.key}));
    }
    let volumes: Vec<(String, &str, Vec<Value>)> = files
        .into_iter()
        .enumerate()
        .map(|(i, (name, items))| (format!("weft-secret-{i}"), name, items))
        .collect();
    let mounts: Vec<Value> = volumes
        .iter()
        .map(|(v, name, _)| json!({"name": v, "mountPath": format!("{SECRETS_DIR}/{name}"), "readOnly": true}))
        .collect();
    let mut ops = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod["spec"][list].as_array() else {
            continue;
        };
        let mut containers = containers.clone();
        for c in &mut containers {
            append(c, "env", &env);
            append(c, "volumeMounts", &mounts);
        }
        ops.push(json!({"op": "add", "path": format!("/spec/{list}"), "value": containers}));
    }
    let mut spec_volumes = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    spec_volumes.extend(volumes.iter().map(|(v, name, items)| {
        json!({"name": v, "secret": {"secretName": name, "items": items, "defaultMode": 0o400}})
    }));
    ops.push(json!({"op": "add", "path": "/spec/volumes", "value": spec_volumes}));
    let mut annotations = annotations.clone();
    annotations[INJECTED] = "true".into();
    ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": annotations}));
    Ok(Some(Value::Array(ops)))
}

fn append(container: &mut Value, field: &str, items: &[Value]) {
    if items.is_empty() {
        return;
    }
    let mut list = container[field].as_array().cloned().unwrap_or_default();
    list.extend(items.iter().cloned());
    container[field] = Value::Array(list);
}

#[cfg(test)]
mod tests;
