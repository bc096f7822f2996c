//! get-task-phase: what a SparkApplication's state means for the task,
//! with its outputs and the log links of its driver.

use serde_json::{Map, Value};
use weft_plugin_sdk::{PhaseInfo, TaskContext};

/// Maps an observed SparkApplication to a phase. Answers for any value,
/// however partial: an object without a status is queued.
pub fn application_phase(ctx: &TaskContext, app: &Value) -> PhaseInfo {
    let status = &app["status"];
    let state = status["applicationState"]["state"]
        .as_str()
        .unwrap_or_default();
    let error = truncate(
        status["applicationState"]["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .trim(),
        1024,
    );
    let said = |default: &str| non_empty(&error, default);
    let deleted = !app["metadata"]["deletionTimestamp"].is_null();

    let info = match state {
        "COMPLETED" => PhaseInfo::success(outputs(status)),
        "FAILED" => PhaseInfo::retryable("SparkFailed", said("the Spark application failed")),
        "SUBMISSION_FAILED" => PhaseInfo::retryable(
            "SparkSubmissionFailed",
            said("the Spark operator could not submit the application"),
        ),
        _ if deleted => PhaseInfo::system(
            "ApplicationDeleted",
            "the SparkApplication was deleted before it finished",
        ),
        "" | "NEW" => PhaseInfo::queued(),
        "SUBMITTED" => PhaseInfo::initializing()
            .with_message(said("submitted; waiting for the driver to start")),
        "RUNNING" => PhaseInfo::running().with_message(running_message(status)),
        "SUCCEEDING" => PhaseInfo::running()
            .with_reason("SparkSucceeding")
            .with_message(said(
                "the driver succeeded; the operator is completing the application",
            )),
        "FAILING" => PhaseInfo::running()
            .with_reason("SparkFailing")
            .with_message(said(
                "the driver failed; the operator is failing the application",
            )),
        "PENDING_RERUN" => PhaseInfo::queued()
            .with_reason("PendingRerun")
            .with_message(said("the operator will submit the application again")),
        "INVALIDATING" => PhaseInfo::queued()
            .with_reason("Invalidating")
            .with_message(said(
                "the spec changed; the operator is restarting the application",
            )),
        "RESUMING" => PhaseInfo::queued()
            .with_reason("Resuming")
            .with_message(said("the operator is resuming the application")),
        "SUSPENDING" | "SUSPENDED" => {
            PhaseInfo::waiting_for_resources(said("the application is suspended"))
                .with_reason("SparkSuspended")
        }
        "UNKNOWN" => PhaseInfo::running()
            .with_reason("DriverStateUnknown")
            .with_message(said(
                "the driver pod's state is unknown for now; the Spark operator is finding out",
            )),
        other => PhaseInfo::running()
            .with_reason("UnrecognisedState")
            .with_message(format!(
                "the Spark operator reports state {:?}, which this plugin does not know{}",
                truncate(other, 64),
                if error.is_empty() {
                    String::new()
                } else {
                    format!(": {error}")
                }
            )),
    };
    with_links(ctx, app, info)
}

pub(super) fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_string()
    } else {
        s.to_string()
    }
}

pub(super) fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// "the driver is running; executors: 2 RUNNING, 1 PENDING".
pub(super) fn running_message(status: &Value) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for state in status["executorState"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(Value::as_str)
    {
        match counts.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => counts.push((state, 1)),
        }
    }
    if counts.is_empty() {
        return "the driver is running".into();
    }
    counts.sort_unstable();
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("the driver is running; executors: {}", parts.join(", "))
}

/// What a completed application reported about itself.
pub(super) fn outputs(status: &Value) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    if let Some(id) = status["sparkApplicationId"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        out.insert("applicationId".into(), id.into());
    }
    for key in ["executionAttempts", "submissionAttempts"] {
        if let Some(n) = status[key].as_u64() {
            out.insert(key.into(), n.into());
        }
    }
    if let Some(pod) = status["driverInfo"]["podName"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        out.insert("driverPod".into(), pod.into());
    }
    (!out.is_empty()).then_some(out)
}

/// The driver's log link and the Spark UI link, those the status allows.
pub(super) fn with_links(ctx: &TaskContext, app: &Value, mut info: PhaseInfo) -> PhaseInfo {
    let driver = &app["status"]["driverInfo"];
    let name = app["metadata"]["name"]
        .as_str()
        .unwrap_or(&ctx.resource_name);
    let namespace = app["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(&ctx.namespace);
    let ui = driver["webUIIngressAddress"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| driver["webUIAddress"].as_str().filter(|s| !s.is_empty()))
        .map(|a| {
            if a.contains("://") {
                a.to_string()
            } else {
                format!("http://{a}")
            }
        })
        .unwrap_or_default();
    let port = driver["webUIPort"]
        .as_u64()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let vars: [(&str, &str); 6] = [
        ("namespace", namespace),
        ("name", name),
        ("driverPod", driver["podName"].as_str().unwrap_or_default()),
        ("webUIAddress", &ui),
        (
            "webUIServiceName",
            driver["webUIServiceName"].as_str().unwrap_or_default(),
        ),
        ("webUIPort", &port),
    ];
    for (link, key) in [
        ("Driver logs", "driverLogLinkTemplate"),
        ("Spark UI", "uiLinkTemplate"),
    ] {
        if let Some(uri) = ctx.plugin_config[key].as_str().and_then(|t| fill(t, &vars)) {
            info = info.with_log_link(link, uri);
        }
    }
    info
}

/// The template with its placeholders filled in; none when a placeholder it
/// uses has no value (yet), or when the template is empty.
pub(super) fn fill(template: &str, vars: &[(&str, &str)]) -> Option<String> {
    if template.trim().is_empty() {
        return None;
    }
    let mut out = template.to_string();
    for (key, value) in vars {
        let placeholder = format!("{{{key}}}");
        if out.contains(&placeholder) {
            if value.is_empty() {
                return None;
            }
            out = out.replace(&placeholder, value);
        }
    }
    Some(out)
}
