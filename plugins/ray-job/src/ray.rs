//! The plugin's logic without I/O: the task config, the requests' URLs
//! and bodies, what Ray's answers mean. `lib.rs` only sends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Number;
use weft_plugin_sdk::http::{encode_path_segment, HttpError, Response, Scheme, Url};
use weft_plugin_sdk::{json, Map, PhaseInfo, PluginError, Value};

/// How much of a failed job's message the phase keeps: the end, where
/// Python puts the exception line.
pub const FAILURE_MESSAGE_MAX: usize = 2048;

/// How much of one of Ray's error answers (a traceback) an error keeps.
pub const ERROR_LINE_MAX: usize = 300;

/// The fields of the task config.
const FIELDS: &str = "entrypoint, runtimeEnv, metadata, entrypointNumCpus, address";

/// The task's `config`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobConfig {
    /// The shell command Ray runs (`entrypoint`).
    pub entrypoint: String,
    /// Ray's `runtime_env` (`env_vars`, `pip`, `working_dir`, ...), as given.
    pub runtime_env: Option<Map<String, Value>>,
    /// Ray's job `metadata`: strings only.
    pub metadata: Option<BTreeMap<String, String>>,
    /// CPUs reserved for the entrypoint (`entrypoint_num_cpus`).
    pub entrypoint_num_cpus: Option<Number>,
    /// A Ray dashboard URL overriding the plugin's.
    pub address: Option<String>,
}

fn field_error(field: &str, problem: &str) -> PluginError {
    PluginError::permanent(format!("task config field `{field}` {problem}"))
}

/// Reads the task config. Every problem is permanent and names the field.
pub fn parse_config(config: &Value) -> Result<JobConfig, PluginError> {
    let Some(fields) = config.as_object() else {
        return Err(PluginError::permanent(format!(
            "the task config must be an object with an `entrypoint` (fields: {FIELDS})"
        )));
    };
    let mut out = JobConfig::default();
    let mut entrypoint = None;
    for (name, value) in fields {
        match name.as_str() {
            "entrypoint" => match value.as_str() {
                Some(s) if !s.trim().is_empty() => entrypoint = Some(s.to_string()),
                Some(_) => return Err(field_error(name, "is empty")),
                None => return Err(field_error(name, "must be a string (the command Ray runs)")),
            },
            "runtimeEnv" => match value {
                Value::Object(m) => out.runtime_env = Some(m.clone()),
                Value::Null => {}
                _ => return Err(field_error(name, "must be an object (Ray's runtime_env)")),
            },
            "metadata" => match value {
                Value::Object(m) => {
                    let mut metadata = BTreeMap::new();
                    for (k, v) in m {
                        let v = v.as_str().ok_or_else(|| {
                            field_error(&format!("metadata.{k}"), "must be a string")
                        })?;
                        metadata.insert(k.clone(), v.to_string());
                    }
                    out.metadata = Some(metadata);
                }
                Value::Null => {}
                _ => return Err(field_error(name, "must be an object of strings")),
            },
            "entrypointNumCpus" => match value {
                Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0) => {
                    out.entrypoint_num_cpus = Some(n.clone())
                }
                Value::Null => {}
                _ => return Err(field_error(name, "must be a number of at least 0")),
            },
            "address" => match value {
                Value::String(s) => out.address = Some(s.clone()),
                Value::Null => {}
                _ => return Err(field_error(name, "must be a string (a Ray dashboard URL)")),
            },
            other => {
                return Err(field_error(
                    other,
                    &format!("is not a field of a ray-job task (fields: {FIELDS})"),
                ))
            }
        }
    }
    out.entrypoint = entrypoint
        .ok_or_else(|| field_error("entrypoint", "is required (the shell command Ray runs)"))?;
    Ok(out)
}

/// The Ray dashboard to talk to: the task's `address`, else the plugin
/// config's, checked (http or https, a host, no query) and without a
/// trailing `/`.
pub fn address(plugin_config: &Value, task: Option<&str>) -> Result<String, PluginError> {
    let (address, from) = match task {
        Some(a) => (a, "task config field `address`"),
        None => (
            plugin_config["address"].as_str().ok_or_else(|| {
                PluginError::permanent(
                    "the plugin config has no `address` (the Ray dashboard's URL)",
                )
            })?,
            "the plugin config's `address`",
        ),
    };
    let bad = |why: String| PluginError::permanent(format!("{from} {address:?} {why}"));
    let url = Url::parse(address).map_err(|e| bad(format!("is not a URL: {}", e.detail())))?;
    if !matches!(url.scheme, Scheme::Http | Scheme::Https) {
        return Err(bad("must be an http:// or https:// URL".into()));
    }
    if url.path_with_query.contains('?') {
        return Err(bad("must not have a query".into()));
    }
    Ok(address
        .split('#')
        .next()
        .unwrap_or_default()
        .trim_end_matches('/')
        .to_string())
}

/// The body of `POST /api/jobs/`.
pub fn submit_body(config: &JobConfig, submission_id: &str) -> Value {
    let mut body = json!({"entrypoint": config.entrypoint, "submission_id": submission_id});
    if let Some(env) = &config.runtime_env {
        body["runtime_env"] = Value::Object(env.clone());
    }
    if let Some(metadata) = &config.metadata {
        body["metadata"] = json!(metadata);
    }
    if let Some(cpus) = &config.entrypoint_num_cpus {
        body["entrypoint_num_cpus"] = Value::Number(cpus.clone());
    }
    body
}

/// What the host keeps for a job: where it runs and its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Meta {
    /// The Ray dashboard's URL, without a trailing `/`.
    pub address: String,
    /// Ray's `submission_id`: the host's idempotency key.
    pub submission_id: String,
}

impl Meta {
    /// The meta as the host keeps it (`{"address": ..., "submissionId": ...}`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The meta back from the host.
    pub fn parse(meta: &str) -> Result<Meta, PluginError> {
        serde_json::from_str(meta).map_err(|e| {
            PluginError::permanent(format!(
                "the job's meta is not what ray-job create returns ({e}): {meta:?}"
            ))
        })
    }

    /// `POST` here to submit.
    pub fn submit_url(address: &str) -> String {
        format!("{address}/api/jobs/")
    }

    /// The job's JSON.
    pub fn job_url(&self) -> String {
        format!(
            "{}/api/jobs/{}",
            self.address,
            encode_path_segment(&self.submission_id)
        )
    }

    /// The job's whole driver log, as `{"logs": "..."}`.
    pub fn logs_url(&self) -> String {
        format!("{}/logs", self.job_url())
    }

    /// `POST` here to stop the job.
    pub fn stop_url(&self) -> String {
        format!("{}/stop", self.job_url())
    }

    /// The job in Ray's dashboard.
    pub fn ui_url(&self) -> String {
        format!(
            "{}/#/jobs/{}",
            self.address,
            encode_path_segment(&self.submission_id)
        )
    }
}

/// Ray's error answer (text/plain, usually a whole Python traceback) as
/// one line: the last that says something (Ray ends some with a lone
/// `.`), at most [`ERROR_LINE_MAX`] bytes.
pub fn error_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.chars().any(char::is_alphanumeric))
        .unwrap_or("(no message)");
    if line.len() <= ERROR_LINE_MAX {
        return line.to_string();
    }
    let mut end = ERROR_LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// A failed job's message, at most about `max` bytes: Ray's first line
/// ("Job entrypoint command failed with exit code 1, last available
/// logs ...:") and as many whole last lines of the log as fit, so the
/// exception (`ValueError: boom 42`) is kept.
pub fn failure_message(message: &str, max: usize) -> String {
    let message = message.trim_end();
    if message.len() <= max {
        return message.to_string();
    }
    const GAP: &str = "\n…\n";
    let head = message
        .split_once('\n')
        .map(|(first, _)| first)
        .filter(|first| first.len() <= max / 4)
        .unwrap_or("");
    let budget = max.saturating_sub(head.len() + GAP.len());
    let mut start = message.len() - budget;
    while !message.is_char_boundary(start) {
        start += 1;
    }
    let mut tail = &message[start..];
    // From a line's start when the tail holds more than one line.
    if let Some((_, rest)) = tail.split_once('\n') {
        if !rest.is_empty() {
            tail = rest;
        }
    }
    if head.is_empty() {
        format!("…\n{tail}")
    } else {
        format!("{head}{GAP}{tail}")
    }
}

/// The outputs a job printed: the last log line that is a JSON object
/// with a `weft.outputs` object, that object. None printed: empty.
pub fn outputs_from_logs(logs: &str) -> Map<String, Value> {
    logs.lines()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .find_map(|l| match serde_json::from_str::<Value>(l.trim()) {
            Ok(Value::Object(mut o)) => match o.remove("weft.outputs") {
                Some(Value::Object(outputs)) => Some(outputs),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_default()
}

/// Where a Ray job stands, from `GET /api/jobs/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// PENDING, with Ray's message (waiting for the runtime env or resources).
    Pending(Option<String>),
    /// RUNNING.
    Running(Option<String>),
    /// SUCCEEDED: the outputs are in the logs.
    Succeeded,
    /// FAILED: Ray's `error_type` and message.
    Failed {
        /// `error_type`, e.g. `JOB_ENTRYPOINT_COMMAND_ERROR`.
        error_type: Option<String>,
        /// Ray's message, with the log's last lines.
        message: Option<String>,
    },
    /// STOPPED (by `delete`, or by someone else).
    Stopped(Option<String>),
}

/// Reads a job's status. A status Ray does not document is an error the
/// host retries (a newer Ray, a proxy's page).
pub fn job_state(job: &Value) -> Result<JobState, PluginError> {
    let message = job["message"].as_str().map(str::to_string);
    Ok(match job["status"].as_str() {
        Some("PENDING") => JobState::Pending(message),
        Some("RUNNING") => JobState::Running(message),
        Some("SUCCEEDED") => JobState::Succeeded,
        Some("FAILED") => JobState::Failed {
            error_type: job["error_type"].as_str().map(str::to_string),
            message,
        },
        Some("STOPPED") => JobState::Stopped(message),
        other => {
            return Err(PluginError::retryable(format!(
                "Ray answered an unknown job status {}",
                other.map_or_else(|| job["status"].to_string(), |s| format!("{s:?}"))
            )))
        }
    })
}

impl JobState {
    /// The phase; `outputs` only matter for `Succeeded`.
    pub fn phase_info(self, outputs: Map<String, Value>) -> PhaseInfo {
        let with = |info: PhaseInfo, message: Option<String>| match message {
            Some(m) => info.with_message(m),
            None => info,
        };
        match self {
            JobState::Pending(m) => with(PhaseInfo::queued(), m),
            JobState::Running(m) => with(PhaseInfo::running(), m),
            JobState::Succeeded => PhaseInfo::success(Some(outputs)),
            JobState::Failed {
                error_type,
                message,
            } => PhaseInfo::permanent(
                error_type.unwrap_or_else(|| "Failed".into()),
                failure_message(
                    message.as_deref().unwrap_or("the job failed"),
                    FAILURE_MESSAGE_MAX,
                ),
            ),
            JobState::Stopped(m) => PhaseInfo::permanent(
                "Stopped",
                m.unwrap_or_else(|| "Job was intentionally stopped.".into()),
            ),
        }
    }
}

/// A request's outcome, for messages: `HTTP 500: <Ray's last line>` or
/// the transport error.
fn outcome(r: &Result<Response, HttpError>) -> String {
    match r {
        Ok(resp) => format!(
            "Ray answered HTTP {}: {}",
            resp.status,
            error_line(&resp.text())
        ),
        Err(e) => e.to_string(),
    }
}

/// After a submit that did not answer 2xx (or no answer at all), the
/// `GET` of the job says whether it exists: Ray answers a duplicate
/// `submission_id` with a 500, and a lost answer may hide a created job.
///
/// - the job exists (200): adopt it (`Ok`);
/// - it does not (404): a 4xx to the submit is Ray refusing the job, for
///   good; anything else may pass (retryable, unless the submit's error
///   is not, e.g. a denied URL);
/// - unknown: retryable.
pub fn after_failed_submit(
    submit: &Result<Response, HttpError>,
    probe: &Result<Response, HttpError>,
) -> Result<(), PluginError> {
    match probe {
        Ok(p) if p.status == 200 => Ok(()),
        Ok(p) if p.status == 404 => Err(match submit {
            Ok(resp) if (400..500).contains(&resp.status) => PluginError::permanent(format!(
                "Ray refused the job (HTTP {}): {}",
                resp.status,
                error_line(&resp.text())
            )),
            Ok(resp) => PluginError::retryable(format!(
                "Ray did not create the job (HTTP {}): {}",
                resp.status,
                error_line(&resp.text())
            )),
            Err(e) => PluginError {
                message: format!("submitting the job failed: {e}"),
                retryable: e.is_retryable(),
            },
        }),
        _ => Err(PluginError::retryable(format!(
            "submitting the job failed ({}), and whether it exists is unknown ({})",
            outcome(submit),
            outcome(probe)
        ))),
    }
}

/// Ray's answer to a request about a job that is not 2xx, as an error
/// (retryable: Ray's 5xx and the like pass).
pub fn unexpected(what: &str, resp: &Response) -> PluginError {
    PluginError::retryable(format!(
        "{what}: Ray answered HTTP {}: {}",
        resp.status,
        error_line(&resp.text())
    ))
}
