//! my-task: a Weft web-API task plugin: runs a task as a job of a small
//! HTTP jobs API (the same API as the Python and JavaScript templates; try
//! it with `python3 sdk/python/examples/jobs_server.py`).
//!
//! ```text
//! POST   {url}/jobs       {"id", "command", "params", "inputs"} -> 201 (409: exists)
//! GET    {url}/jobs/{id}  -> {"state": PENDING|RUNNING|SUCCEEDED|FAILED|STOPPED, "message"?, "result"?}
//! DELETE {url}/jobs/{id}  -> 2xx (404: gone)
//! ```
//!
//! The job's id is the host's idempotency key (the attempt's resource
//! name), also sent as `Idempotency-Key`: a create repeated after a
//! controller crash finds its job (409) and adopts it. The meta the host
//! keeps is the job's URL; a successful job's outputs are its `result`.

use serde::Deserialize;
use weft_plugin_sdk::{http, json, log, PhaseInfo, PluginError, TaskContext, Value, WebApiPlugin};

/// The task's `config`, typed: a missing or mistyped field is a permanent
/// error that names it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    command: String,
    #[serde(default)]
    params: Value,
    /// The service; default: the plugin config's `url`.
    #[serde(default)]
    url: Option<String>,
}

/// The jobs API's base URL: the task's `url`, else the plugin config's.
fn service(ctx: &TaskContext, config: &Config) -> Result<String, PluginError> {
    let url = config
        .url
        .clone()
        .or_else(|| ctx.plugin_config["url"].as_str().map(str::to_string))
        .ok_or_else(|| PluginError::permanent("no service URL: set `url` in the task config or the plugin config"))?;
    Ok(url.trim_end_matches('/').to_string())
}

/// A 4xx is the task's fault for good; anything else may pass.
fn failed(what: &str, resp: &http::Response) -> PluginError {
    let msg = format!("{what}: HTTP {}: {}", resp.status, resp.text());
    if (400..500).contains(&resp.status) {
        PluginError::permanent(msg)
    } else {
        PluginError::retryable(msg)
    }
}

/// The plugin.
pub struct MyTask;

impl WebApiPlugin for MyTask {
    fn create(ctx: TaskContext, idempotency_key: &str) -> Result<String, PluginError> {
        let config: Config = ctx.config_as()?;
        let base = service(&ctx, &config)?;
        let job_url = format!("{base}/jobs/{}", http::encode_path_segment(idempotency_key));
        let resp = http::Request::post(format!("{base}/jobs"))
            .with_header("Idempotency-Key", idempotency_key)
            .with_json(&json!({"id": idempotency_key, "command": config.command, "params": config.params, "inputs": ctx.inputs}))
            .send()?;
        if resp.status == 409 {
            log::info(&format!("job {idempotency_key} exists already: adopting it"));
        } else if !resp.is_success() {
            return Err(failed("create", &resp));
        }
        Ok(job_url)
    }

    fn get(_ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
        let resp = http::Request::get(meta).send()?;
        if resp.status == 404 {
            return Ok(PhaseInfo::retryable("JobNotFound", format!("the service no longer knows {meta}")));
        }
        if !resp.is_success() {
            return Err(failed("get", &resp));
        }
        let job: Value = resp.json()?;
        let message = job["message"].as_str().map(str::to_string);
        let info = match job["state"].as_str() {
            Some("SUCCEEDED") => PhaseInfo::success(Some(job["result"].as_object().cloned().unwrap_or_default())),
            Some("FAILED") => PhaseInfo::retryable("JobFailed", message.unwrap_or_else(|| "the job failed".into())),
            Some("STOPPED") => PhaseInfo::permanent("JobStopped", message.unwrap_or_else(|| "the job was stopped".into())),
            Some("RUNNING") => PhaseInfo::running(),
            _ => PhaseInfo::queued(),
        };
        Ok(info.with_log_link("Job", meta))
    }

    fn delete(_ctx: TaskContext, meta: &str) -> Result<(), PluginError> {
        let resp = http::Request::delete(meta).send()?;
        // Gone already: nothing to stop.
        if resp.is_success() || resp.status == 404 {
            return Ok(());
        }
        Err(failed("delete", &resp))
    }
}

weft_plugin_sdk::export_webapi_plugin!(MyTask);

#[cfg(test)]
mod tests {
    use super::*;
    use weft_plugin_sdk::http::{native, Response};

    fn ctx() -> TaskContext {
        TaskContext {
            config: json!({"command": "train", "params": {"lr": 0.1}}),
            plugin_config: json!({"url": "http://jobs.test/"}),
            ..TaskContext::default()
        }
    }

    #[test]
    fn create_submits_under_the_hosts_key_and_adopts_an_existing_job() {
        native::set_responder(|req| {
            assert_eq!((req.method(), req.url()), ("POST", "http://jobs.test/jobs"));
            assert_eq!(req.header("idempotency-key"), Some("wf-train-0"));
            let body: Value = serde_json::from_slice(req.body()).unwrap();
            assert_eq!(body["id"], "wf-train-0");
            assert_eq!(body["params"]["lr"], 0.1);
            Ok(Response::new(201, "{}"))
        });
        assert_eq!(MyTask::create(ctx(), "wf-train-0").unwrap(), "http://jobs.test/jobs/wf-train-0");
        native::set_responder(|_| Ok(Response::new(409, "exists")));
        assert!(MyTask::create(ctx(), "wf-train-0").is_ok());
        native::set_responder(|_| Ok(Response::new(400, "bad command")));
        assert!(!MyTask::create(ctx(), "wf-train-0").unwrap_err().retryable);
    }

    #[test]
    fn get_maps_the_state_and_the_result() {
        native::set_responder(|req| {
            assert_eq!(req.url(), "http://jobs.test/jobs/j1");
            Ok(Response::new(200, r#"{"state": "SUCCEEDED", "result": {"accuracy": 0.93}}"#))
        });
        let info = MyTask::get(ctx(), "http://jobs.test/jobs/j1").unwrap();
        assert_eq!(info.outputs.unwrap()["accuracy"], 0.93);
        native::set_responder(|_| Ok(Response::new(200, r#"{"state": "STOPPED", "message": "cancelled"}"#)));
        assert_eq!(MyTask::get(ctx(), "http://jobs.test/jobs/j1").unwrap().message.as_deref(), Some("cancelled"));
    }

    #[test]
    fn a_missing_command_is_a_permanent_error() {
        let ctx = TaskContext { config: json!({}), ..ctx() };
        assert!(!MyTask::create(ctx, "k").unwrap_err().retryable);
    }
}
