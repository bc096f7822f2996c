//! Flyte's pod plugin as a Weft component.
//!
//! Task config: a `container` (image, command, args, env, resources,
//! workingDir; the same fields at the top level are a shorthand) or a full
//! `podSpec`. Inputs become environment variables `WEFT_INPUT_<NAME>` (JSON
//! for non-strings) and may be substituted into command and args as
//! `{{inputs.name}}`. Outputs come back through the main container's
//! termination message, a JSON object.

use serde_json::{json, Map, Value};
use weft_plugin_sdk::{clock, PhaseInfo, PluginError, TaskContext, TaskPlugin};

/// The name of the main container when the plugin builds it.
pub const MAIN: &str = "main";

/// Builds the Pod of a task.
pub fn build_pod(ctx: &TaskContext) -> Result<Value, PluginError> {
    let config = ctx
        .config
        .as_object()
        .ok_or_else(|| PluginError::permanent("the task config must be an object"))?;
    let mut spec = match config.get("podSpec") {
        Some(Value::Object(spec)) => spec.clone(),
        Some(_) => return Err(PluginError::permanent("podSpec must be an object")),
        None => {
            let container = match config.get("container") {
                Some(Value::Object(c)) => c.clone(),
                Some(_) => return Err(PluginError::permanent("container must be an object")),
                None => shorthand(config),
            };
            let mut spec = Map::new();
            spec.insert(
                "containers".into(),
                Value::Array(vec![Value::Object(container)]),
            );
            spec
        }
    };
    let containers = spec
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| PluginError::permanent("the pod needs at least one container"))?;
    let inputs = ctx.inputs.as_object().cloned().unwrap_or_default();
    for (i, c) in containers.iter_mut().enumerate() {
        let c = c
            .as_object_mut()
            .ok_or_else(|| PluginError::permanent(format!("container {i} must be an object")))?;
        if c.get("image")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            return Err(PluginError::permanent(format!(
                "container {i} needs an image"
            )));
        }
        if !c.contains_key("name") {
            c.insert(
                "name".into(),
                if i == 0 {
                    MAIN.into()
                } else {
                    format!("c{i}").into()
                },
            );
        }
        c.entry("terminationMessagePolicy")
            .or_insert("FallbackToLogsOnError".into());
        for field in ["command", "args"] {
            if let Some(Value::Array(items)) = c.get_mut(field) {
                for item in items.iter_mut() {
                    if let Value::String(s) = item {
                        *s = substitute(s, &inputs);
                    }
                }
            }
        }
        let mut env = normalise_env(c.get("env"))?;
        for (k, v) in &inputs {
            env.push(json!({"name": env_name(k), "value": env_value(v)}));
        }
        if !env.is_empty() {
            c.insert("env".into(), Value::Array(env));
        }
    }
    spec.insert("restartPolicy".into(), "Never".into());
    let mut metadata = json!({
        "name": ctx.resource_name,
        "namespace": ctx.namespace,
        "labels": ctx.labels,
    });
    if let Some(Value::Object(a)) = config.get("annotations") {
        metadata["annotations"] = Value::Object(a.clone());
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
    }))
}

/// The container fields given at the top level of the config.
fn shorthand(config: &Map<String, Value>) -> Map<String, Value> {
    const FIELDS: [&str; 6] = ["image", "command", "args", "env", "resources", "workingDir"];
    config
        .iter()
        .filter(|(k, _)| FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Accepts env as a Kubernetes list or as a `{NAME: value}` map.
fn normalise_env(env: Option<&Value>) -> Result<Vec<Value>, PluginError> {
    match env {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => Ok(list.clone()),
        Some(Value::Object(map)) => Ok(map
            .iter()
            .map(|(k, v)| json!({"name": k, "value": env_value(v)}))
            .collect()),
        Some(_) => Err(PluginError::permanent("env must be a list or a map")),
    }
}

/// `WEFT_INPUT_` and the input's name upper-cased, other characters as `_`.
pub fn env_name(input: &str) -> String {
    let body: String = input
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("WEFT_INPUT_{body}")
}

fn env_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn substitute(s: &str, inputs: &Map<String, Value>) -> String {
    if !s.contains("{{") {
        return s.to_string();
    }
    let mut out = s.to_string();
    for (k, v) in inputs {
        out = out.replace(&format!("{{{{inputs.{k}}}}}", k = k), &env_value(v));
    }
    out
}

/// Reasons of a waiting container that no retry fixes.
const PERMANENT_WAITING: [&str; 4] = [
    "CreateContainerConfigError",
    "InvalidImageName",
    "CreateContainerError",
    "ErrImageNeverPull",
];

/// Reasons of a waiting container that may clear up: the image pull.
const IMAGE_PULL: [&str; 2] = ["ErrImagePull", "ImagePullBackOff"];

/// Pod-level reasons that are the platform's fault (Flyte's system failures).
const SYSTEM_REASONS: [&str; 5] = [
    "Evicted",
    "Preempting",
    "NodeLost",
    "Shutdown",
    "UnexpectedAdmissionError",
];

/// Maps an observed Pod to a phase, as Flyte's pod plugin does.
pub fn pod_phase(ctx: &TaskContext, pod: &Value) -> PhaseInfo {
    let status = &pod["status"];
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or(&ctx.resource_name);
    let main = main_container(pod);
    let link = log_link(ctx, name, &main);
    let with_link = |p: PhaseInfo| match &link {
        Some(uri) => p.with_log_link("Pod logs", uri.clone()),
        None => p,
    };
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = status["message"].as_str().unwrap_or_default();
    let phase = status["phase"].as_str().unwrap_or("Pending");

    if SYSTEM_REASONS.contains(&reason) {
        let msg = if message.is_empty() {
            format!("the pod was {reason}")
        } else {
            message.to_string()
        };
        return with_link(PhaseInfo::system(reason, msg));
    }
    if reason == "DeadlineExceeded" {
        return with_link(PhaseInfo::permanent(
            "DeadlineExceeded",
            non_empty(message, "the pod ran past its activeDeadlineSeconds"),
        ));
    }
    if pod["metadata"]["deletionTimestamp"].is_string() && !matches!(phase, "Succeeded" | "Failed")
    {
        return with_link(PhaseInfo::system(
            "PodDeleted",
            "the pod was deleted before it finished",
        ));
    }

    match phase {
        "Succeeded" => with_link(succeeded(&main, status)),
        "Failed" => with_link(failed(status, &main)),
        "Running" => {
            if let Some(p) = waiting_problem(ctx, pod, status) {
                return with_link(p);
            }
            with_link(PhaseInfo::running())
        }
        "Unknown" => with_link(PhaseInfo::system(
            "NodeLost",
            non_empty(message, "the pod's node stopped reporting"),
        )),
        _ => {
            // Pending.
            if let Some(p) = init_failure(status) {
                return with_link(p);
            }
            if let Some(p) = waiting_problem(ctx, pod, status) {
                return with_link(p);
            }
            let scheduled = condition(status, "PodScheduled");
            match scheduled {
                Some(c) if c["status"] == "False" && c["reason"] == "Unschedulable" => {
                    PhaseInfo::waiting_for_resources(
                        c["message"]
                            .as_str()
                            .unwrap_or("the pod cannot be scheduled yet"),
                    )
                    .with_reason("Unschedulable")
                }
                Some(c) if c["status"] == "True" => with_link(PhaseInfo::initializing()),
                _ => PhaseInfo::queued(),
            }
        }
    }
}

fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_string()
    } else {
        s.to_string()
    }
}

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The name of the container whose exit decides the task: `main`, or the first.
fn main_container(pod: &Value) -> String {
    let names: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    if names.contains(&MAIN) {
        return MAIN.into();
    }
    if let Some(first) = names.first() {
        return (*first).into();
    }
    pod["status"]["containerStatuses"][0]["name"]
        .as_str()
        .unwrap_or(MAIN)
        .into()
}

fn container_status<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["containerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

fn log_link(ctx: &TaskContext, name: &str, container: &str) -> Option<String> {
    let template = ctx.plugin_config["logLinkTemplate"].as_str()?;
    Some(
        template
            .replace("{namespace}", &ctx.namespace)
            .replace("{name}", name)
            .replace("{container}", container),
    )
}

fn succeeded(main: &str, status: &Value) -> PhaseInfo {
    let terminated = container_status(status, main).map(|c| &c["state"]["terminated"]);
    let message = terminated
        .and_then(|t| t["message"].as_str())
        .unwrap_or_default()
        .trim();
    if message.is_empty() {
        return PhaseInfo::success(None);
    }
    match serde_json::from_str::<Value>(message) {
        Ok(Value::Object(outputs)) => PhaseInfo::success(Some(outputs)),
        // A message that is not a JSON object is the container's own text
        // (FallbackToLogsOnError only applies on failure): no outputs.
        _ => PhaseInfo::success(None).with_message(message.chars().take(512).collect::<String>()),
    }
}

fn failed(status: &Value, main: &str) -> PhaseInfo {
    if let Some(p) = init_failure(status) {
        return p;
    }
    let statuses = status["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut terminated: Vec<&Value> = statuses
        .iter()
        .filter(|c| c["state"]["terminated"].is_object())
        .collect();
    terminated.sort_by_key(|c| c["name"] != main);
    for c in terminated {
        let t = &c["state"]["terminated"];
        let code = t["exitCode"].as_i64().unwrap_or(0);
        if code == 0 {
            continue;
        }
        let name = c["name"].as_str().unwrap_or("?");
        let reason = t["reason"].as_str().unwrap_or("Error");
        let msg = t["message"].as_str().unwrap_or_default().trim();
        let text = if msg.is_empty() {
            format!("container {name} exited with code {code} ({reason})")
        } else {
            format!("container {name} exited with code {code} ({reason}): {msg}")
        };
        if reason == "OOMKilled" {
            return PhaseInfo::retryable("OOMKilled", text);
        }
        return PhaseInfo::retryable(reason, text);
    }
    let message = status["message"].as_str().unwrap_or("the pod failed");
    PhaseInfo::retryable(status["reason"].as_str().unwrap_or("PodFailed"), message)
}

/// An init container that failed (terminated with a non-zero code).
fn init_failure(status: &Value) -> Option<PhaseInfo> {
    for c in status["initContainerStatuses"].as_array()? {
        let t = &c["state"]["terminated"];
        let code = t["exitCode"].as_i64().unwrap_or(0);
        if t.is_object() && code != 0 {
            let name = c["name"].as_str().unwrap_or("?");
            let reason = t["reason"].as_str().unwrap_or("Error");
            return Some(PhaseInfo::retryable(
                "InitContainerFailed",
                format!("init container {name} exited with code {code} ({reason})"),
            ));
        }
        let w = &c["state"]["waiting"];
        if let Some(r) = w["reason"].as_str() {
            if PERMANENT_WAITING.contains(&r) {
                return Some(PhaseInfo::permanent(
                    r,
                    format!(
                        "init container {}: {}",
                        c["name"].as_str().unwrap_or("?"),
                        w["message"].as_str().unwrap_or(r)
                    ),
                ));
            }
        }
    }
    None
}

/// A container stuck waiting for a reason that will not pass by itself.
fn waiting_problem(ctx: &TaskContext, pod: &Value, status: &Value) -> Option<PhaseInfo> {
    let statuses = status["initContainerStatuses"]
        .as_array()
        .into_iter()
        .chain(status["containerStatuses"].as_array())
        .flatten();
    for c in statuses {
        let w = &c["state"]["waiting"];
        let Some(reason) = w["reason"].as_str() else {
            continue;
        };
        let name = c["name"].as_str().unwrap_or("?");
        let msg = w["message"].as_str().unwrap_or(reason);
        if PERMANENT_WAITING.contains(&reason) {
            return Some(PhaseInfo::permanent(
                reason,
                format!("container {name}: {msg}"),
            ));
        }
        if IMAGE_PULL.contains(&reason) {
            let grace = grace_period_millis(ctx);
            let since = parse_rfc3339_millis(
                pod["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default(),
            );
            let now = clock::now_millis();
            return Some(match since {
                Some(t) if now.saturating_sub(t) > grace => PhaseInfo::permanent(
                    reason,
                    format!("container {name}: {msg} (still failing after the {}s image pull grace period)", grace / 1000),
                ),
                _ => PhaseInfo::initializing().with_reason(reason).with_message(format!("container {name}: {msg}")),
            });
        }
    }
    None
}

fn grace_period_millis(ctx: &TaskContext) -> u64 {
    let s = ctx.plugin_config["imagePullGracePeriod"]
        .as_str()
        .unwrap_or("3m");
    parse_duration_millis(s).unwrap_or(180_000)
}

/// `90s`, `3m`, `1h`, `500ms`.
fn parse_duration_millis(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return None,
    })
}

/// Milliseconds since the epoch of a Kubernetes timestamp (`2024-01-02T03:04:05Z`).
fn parse_rfc3339_millis(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    u64::try_from(secs).ok().map(|s| s * 1000)
}

/// The plugin.
pub struct Pod;

impl TaskPlugin for Pod {
    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        build_pod(&ctx)
    }

    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(pod_phase(&ctx, &observed))
    }
}

weft_plugin_sdk::export_task_plugin!(Pod);

#[cfg(test)]
mod tests;
