//! Flyte's pod plugin as a Weft component: a task runs as one Kubernetes
//! Pod, and the Pod's status says where the task stands.
//!
//! # Task config
//!
//! Either a `container` (`image`, `command`, `args`, `env` as a list of
//! `{name, value}` or a `{NAME: value}` map, `resources`, `workingDir`; the
//! same fields at the top level of the config are a shorthand for it) or a
//! full `podSpec`. `annotations` are copied onto the Pod.
//!
//! Inputs become environment variables `WEFT_INPUT_<NAME>` (upper-cased,
//! other characters as `_`; strings as they are, anything else as JSON) in
//! every container, and `{{inputs.<name>}}` in `command` and `args` is
//! replaced by the same text.
//!
//! # The Pod
//!
//! Named `ctx.resource_name` (deterministic per attempt, so a re-run finds
//! the same Pod), in the workflow's namespace, with the host's labels,
//! `restartPolicy: Never`, and `terminationMessagePolicy:
//! FallbackToLogsOnError` on every container. The *main* container is the
//! one named `main` (the plugin names the config's container so), else the
//! first one: its exit decides the task, even while sidecars still run.
//!
//! # Outputs
//!
//! A successful main container's termination message
//! (`/dev/termination-log`) is the task's outputs when it is a JSON object.
//! A message that starts with `{` but is not a JSON object fails the task
//! for good (`InvalidOutputs`: the container meant to return outputs and a
//! retry would write the same thing); any other text is only the phase's
//! message, and the task succeeds without outputs.
//!
//! # Phases
//!
//! | the Pod                                                       | phase                  | reason                      |
//! |---------------------------------------------------------------|------------------------|-----------------------------|
//! | no status, not scheduled yet                                  | queued                 |                             |
//! | `PodScheduled=False`, `Unschedulable`                          | waiting-for-resources  | `Unschedulable`             |
//! | scheduled, containers being created, init containers running  | initializing           |                             |
//! | `ErrImagePull` / `ImagePullBackOff` within the grace period   | initializing           | the waiting reason          |
//! | the same past `imagePullGracePeriod`                          | permanent-failure      | the waiting reason          |
//! | `CreateContainerConfigError`, `InvalidImageName`, ...         | permanent-failure      | the waiting reason          |
//! | `Running`                                                     | running                |                             |
//! | `Succeeded` (or main container exited 0 beside sidecars)      | success                |                             |
//! | main container exited non-zero                                | retryable-failure      | `Error` or `OOMKilled`, ... |
//! | an init container exited non-zero                             | retryable-failure      | `InitContainerFailed`       |
//! | `activeDeadlineSeconds` passed                                | permanent-failure      | `DeadlineExceeded`          |
//! | evicted, preempted, node lost or shut down, disrupted         | retryable-failure      | `System:<why>`              |
//! | deleted before it finished                                    | retryable-failure      | `System:PodDeleted`         |
//!
//! `System:` reasons are the platform's failures: the host counts them on
//! the system retry budget, not the task's.

use serde_json::{json, Map, Value};
use weft_plugin_sdk::{
    clock, AbortBehaviour, PhaseInfo, PluginError, TaskContext, TaskPlugin, TaskProperties,
};

/// Each instance builds one Pod and is dropped: a bump allocator is all
/// it needs (docs/benchmarks.md: what it bought).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The name the plugin gives the container it builds from `container`.
pub const MAIN: &str = "main";

/// The plugin.
pub struct Pod;

impl TaskPlugin for Pod {
    fn properties() -> TaskProperties {
        TaskProperties {
            // An aborted workflow's Pod must stop.
            abort: AbortBehaviour::Delete,
            // A finished Pod keeps its logs and termination message for the user.
            delete_on_finish: false,
        }
    }

    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        build_pod(&ctx)
    }

    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(pod_phase(&ctx, &observed))
    }
}

weft_plugin_sdk::export_task_plugin!(Pod);

// ---------------------------------------------------------------------------
// build-resource

/// Builds the Pod of a task. A config that cannot make a Pod is a permanent
/// error that names the field.
pub fn build_pod(ctx: &TaskContext) -> Result<Value, PluginError> {
    let config = ctx
        .config
        .as_object()
        .ok_or_else(|| PluginError::permanent("the task config must be an object"))?;
    let mut spec = match config.get("podSpec") {
        Some(Value::Object(spec)) => spec.clone(),
        Some(_) => return Err(PluginError::permanent("podSpec must be an object")),
        None => {
            let mut container = match config.get("container") {
                Some(Value::Object(c)) => c.clone(),
                Some(_) => return Err(PluginError::permanent("container must be an object")),
                None => shorthand(config),
            };
            container.insert("name".into(), MAIN.into());
            let mut spec = Map::new();
            spec.insert("containers".into(), json!([container]));
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
            let name = if i == 0 { MAIN.into() } else { format!("c{i}") };
            c.insert("name".into(), name.into());
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

/// Strings as they are, anything else as JSON.
fn env_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replaces `{{inputs.<name>}}` (spaces inside the braces allowed).
fn substitute(s: &str, inputs: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let key = rest[start + 2..start + len].trim();
        match key.strip_prefix("inputs.").and_then(|k| inputs.get(k)) {
            Some(v) => {
                out.push_str(&rest[..start]);
                out.push_str(&env_value(v));
            }
            None => out.push_str(&rest[..start + len + 2]),
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------
// get-task-phase

/// Waiting reasons no retry fixes: the Pod's spec is wrong.
const PERMANENT_WAITING: [&str; 5] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RunContainerError",
];

/// Waiting reasons that may clear up by themselves: the image pull.
const IMAGE_PULL: [&str; 2] = ["ErrImagePull", "ImagePullBackOff"];

/// Pod-level reasons that are the platform's fault (Flyte's system failures).
const SYSTEM_REASONS: [&str; 7] = [
    "Evicted",
    "Preempting",
    "NodeLost",
    "NodeAffinity",
    "OutOfcpu",
    "OutOfmemory",
    "UnexpectedAdmissionError",
];

/// Pod-level reasons of a graceful node shutdown (`Shutdown` before
/// Kubernetes 1.22, `Terminated` since).
const NODE_SHUTDOWN: [&str; 3] = ["Shutdown", "Terminated", "NodeShutdown"];

/// Maps an observed Pod to a phase, as Flyte's pod plugin does. Answers for
/// any value, however partial: an object without a status is queued.
pub fn pod_phase(ctx: &TaskContext, pod: &Value) -> PhaseInfo {
    let status = &pod["status"];
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or(&ctx.resource_name);
    let main = main_container(pod);
    let link = log_link(ctx, name, &main);
    let linked = |p: PhaseInfo| match &link {
        Some(uri) => p.with_log_link("Pod logs", uri.clone()),
        None => p,
    };
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = status["message"].as_str().unwrap_or_default();
    let phase = status["phase"].as_str().unwrap_or("Pending");
    let terminal = matches!(phase, "Succeeded" | "Failed");

    if SYSTEM_REASONS.contains(&reason) {
        let msg = non_empty(message, &format!("the pod failed: {reason}"));
        return linked(PhaseInfo::system(reason, msg));
    }
    if NODE_SHUTDOWN.contains(&reason) {
        let msg = non_empty(message, "the pod's node shut down");
        return linked(PhaseInfo::system("NodeShutdown", msg));
    }
    if reason == "DeadlineExceeded" {
        let msg = non_empty(message, "the pod ran past its activeDeadlineSeconds");
        return linked(PhaseInfo::permanent("DeadlineExceeded", msg));
    }
    if phase == "Failed" {
        if let Some(p) = disruption(status) {
            return linked(p);
        }
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() && !terminal {
        return linked(PhaseInfo::system(
            "PodDeleted",
            "the pod was deleted before it finished",
        ));
    }

    match phase {
        "Succeeded" => linked(succeeded(status, &main)),
        "Failed" => linked(failed(status, &main)),
        "Running" => {
            if let Some(p) = waiting_problem(ctx, pod) {
                return linked(p);
            }
            // Sidecars may outlive the main container: its exit decides.
            match terminated(status, &main) {
                Some(t) if t["exitCode"].as_i64() == Some(0) => linked(succeeded(status, &main)),
                Some(_) => linked(failed(status, &main)),
                None => linked(PhaseInfo::running()),
            }
        }
        "Unknown" => linked(PhaseInfo::system(
            "NodeLost",
            non_empty(message, "the pod's node stopped reporting"),
        )),
        // Pending, or no status yet.
        _ => {
            if let Some(p) = init_failure(status) {
                return linked(p);
            }
            if let Some(p) = waiting_problem(ctx, pod) {
                return linked(p);
            }
            match condition(status, "PodScheduled") {
                Some(c) if c["status"] == "False" && c["reason"] == "Unschedulable" => {
                    let msg = c["message"]
                        .as_str()
                        .unwrap_or("no node can run the pod yet");
                    PhaseInfo::waiting_for_resources(msg).with_reason("Unschedulable")
                }
                Some(c) if c["status"] == "True" => linked(PhaseInfo::initializing()),
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

/// The container whose exit decides the task: `main`, or the first.
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

/// The `state.terminated` of a container, when it has ended.
fn terminated<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    container_status(status, name)
        .map(|c| &c["state"]["terminated"])
        .filter(|t| t.is_object())
}

/// The plugin config's `logLinkTemplate` with `{namespace}`, `{name}` and
/// `{container}` filled in.
fn log_link(ctx: &TaskContext, name: &str, container: &str) -> Option<String> {
    let template = ctx.plugin_config["logLinkTemplate"].as_str()?;
    Some(
        template
            .replace("{namespace}", &ctx.namespace)
            .replace("{name}", name)
            .replace("{container}", container),
    )
}

fn succeeded(status: &Value, main: &str) -> PhaseInfo {
    let message = terminated(status, main)
        .and_then(|t| t["message"].as_str())
        .unwrap_or_default()
        .trim();
    if message.is_empty() {
        return PhaseInfo::success(None);
    }
    if !message.starts_with('{') {
        // The container's own words, not outputs.
        return PhaseInfo::success(None).with_message(truncate(message, 1024));
    }
    match serde_json::from_str::<Value>(message) {
        Ok(Value::Object(outputs)) => PhaseInfo::success(Some(outputs)),
        Ok(_) | Err(_) => PhaseInfo::permanent(
            "InvalidOutputs",
            format!(
                "container {main} succeeded, but its termination message is not a JSON object of outputs: {}",
                truncate(message, 256)
            ),
        ),
    }
}

fn failed(status: &Value, main: &str) -> PhaseInfo {
    if let Some(p) = init_failure(status) {
        return p;
    }
    let statuses = status["containerStatuses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // The main container first: its exit is the task's.
    let ended = statuses
        .iter()
        .filter(|c| c["name"] == main)
        .chain(statuses.iter().filter(|c| c["name"] != main))
        .filter(|c| c["state"]["terminated"].is_object());
    for c in ended {
        let t = &c["state"]["terminated"];
        let code = t["exitCode"].as_i64().unwrap_or(0);
        if code == 0 {
            continue;
        }
        let name = c["name"].as_str().unwrap_or("?");
        // OOMKilled, Error, ContainerCannotRun, StartError, ...
        let reason = t["reason"].as_str().unwrap_or("Error");
        let said = t["message"].as_str().unwrap_or_default().trim();
        let mut text = format!("container {name} exited with code {code} ({reason})");
        if !said.is_empty() {
            text.push_str(": ");
            text.push_str(&truncate(said, 1024));
        }
        return PhaseInfo::retryable(reason, text);
    }
    PhaseInfo::retryable(
        non_empty(status["reason"].as_str().unwrap_or_default(), "PodFailed"),
        non_empty(
            status["message"].as_str().unwrap_or_default(),
            "the pod failed",
        ),
    )
}

/// A Failed Pod with a `DisruptionTarget` condition (Kubernetes 1.26+):
/// the platform ended it (preemption, taint eviction, pod GC, kubelet).
fn disruption(status: &Value) -> Option<PhaseInfo> {
    let c = condition(status, "DisruptionTarget").filter(|c| c["status"] == "True")?;
    let why = c["reason"].as_str().unwrap_or("Disrupted");
    let msg = c["message"]
        .as_str()
        .unwrap_or("the platform ended the pod");
    Some(PhaseInfo::system(why, msg))
}

/// An init container that exited non-zero, or cannot start for good.
fn init_failure(status: &Value) -> Option<PhaseInfo> {
    for c in status["initContainerStatuses"].as_array()? {
        let name = c["name"].as_str().unwrap_or("?");
        let t = &c["state"]["terminated"];
        let code = t["exitCode"].as_i64().unwrap_or(0);
        if t.is_object() && code != 0 {
            let reason = t["reason"].as_str().unwrap_or("Error");
            let said = t["message"].as_str().unwrap_or_default().trim();
            let mut text = format!("init container {name} exited with code {code} ({reason})");
            if !said.is_empty() {
                // Its own words: Weft's weft-io step names the artifact.
                text.push_str(": ");
                text.push_str(&truncate(said, 1024));
            }
            return Some(PhaseInfo::retryable("InitContainerFailed", text));
        }
    }
    None
}

/// A container stuck waiting: for good (a bad spec), or on the image pull,
/// which becomes permanent once the grace period has passed.
fn waiting_problem(ctx: &TaskContext, pod: &Value) -> Option<PhaseInfo> {
    let status = &pod["status"];
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
            let waited = pull_started_millis(pod).map(|t| clock::now_millis().saturating_sub(t));
            return Some(match waited {
                Some(w) if w > grace => PhaseInfo::permanent(
                    reason,
                    format!(
                        "container {name}: {msg} (still failing after the {}s image pull grace period)",
                        grace / 1000
                    ),
                ),
                _ => PhaseInfo::initializing()
                    .with_reason(reason)
                    .with_message(format!("container {name}: {msg}")),
            });
        }
    }
    None
}

/// The earliest moment the image pull can have started: the later of the
/// Pod's creation and its scheduling (a Pod that queued for an hour has
/// not been pulling for an hour). A container's waiting state carries no
/// time of its own.
fn pull_started_millis(pod: &Value) -> Option<u64> {
    let created = pod["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(parse_rfc3339_millis);
    let scheduled = condition(&pod["status"], "PodScheduled")
        .filter(|c| c["status"] == "True")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(parse_rfc3339_millis);
    created.max(scheduled)
}

/// The plugin config's `imagePullGracePeriod` (default 3m).
fn grace_period_millis(ctx: &TaskContext) -> u64 {
    ctx.plugin_config["imagePullGracePeriod"]
        .as_str()
        .and_then(parse_duration_millis)
        .unwrap_or(180_000)
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// `500ms`, `90s`, `3m`, `1h`, or a combination such as `1m30s`.
fn parse_duration_millis(s: &str) -> Option<u64> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// Milliseconds since the epoch of a Kubernetes timestamp
/// (`2024-01-02T03:04:05Z`, fractions of a second ignored).
fn parse_rfc3339_millis(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    u64::try_from(secs).ok().map(|s| s * 1000)
}

#[cfg(test)]
mod tests;
