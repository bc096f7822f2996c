//! Runs a task as a Ray job, through the Ray dashboard's Job Submission
//! REST API: a web-API task plugin (`weft:plugin@0.2.0`,
//! `webapi-task-plugin`), like Flyte's agents, with no Kubernetes
//! resource of its own. The Ray cluster is the operator's (KubeRay or
//! not); the plugin only needs its dashboard's URL.
//!
//! # Task config
//!
//! | field               | type             | Ray's field           |                                   |
//! |---------------------|------------------|-----------------------|-----------------------------------|
//! | `entrypoint`        | string, required | `entrypoint`          | the shell command the job runs    |
//! | `runtimeEnv`        | object           | `runtime_env`         | as given (`env_vars`, `pip`, ...) |
//! | `metadata`          | object of strings| `metadata`            |                                   |
//! | `entrypointNumCpus` | number ≥ 0       | `entrypoint_num_cpus` | CPUs reserved for the entrypoint  |
//! | `address`           | string           |                       | overrides the plugin's `address`  |
//!
//! Any other field, or one of the wrong type, fails the task for good with
//! an error naming it. The plugin config has `address`, the dashboard's
//! URL (default `http://127.0.0.1:8265`).
//!
//! # create
//!
//! `POST {address}/api/jobs/` with `{entrypoint, submission_id, runtime_env?,
//! metadata?, entrypoint_num_cpus?}`; the `submission_id` is the host's
//! idempotency key of the attempt. When Ray does not answer 2xx (or does
//! not answer), `GET {address}/api/jobs/{id}` decides: 200 means the job
//! exists (a repeated create after a crash, which Ray answers with a 500
//! "already exists") and is adopted; 404 means it was not created, a
//! permanent error for a 4xx to the submit (Ray's last traceback line,
//! e.g. `TypeError: ...`), else a retryable one. The meta the host keeps is
//! `{"address": "<the dashboard URL used>", "submissionId": "<id>"}`, so
//! `get` and `delete` go to the head that has the job even if the plugin's
//! config changes meanwhile.
//!
//! # get
//!
//! `GET {address}/api/jobs/{id}`:
//!
//! | Ray's `status` | phase             | reason / message                                     |
//! |----------------|-------------------|------------------------------------------------------|
//! | `PENDING`      | queued            | Ray's message (waiting for the runtime env, for resources) |
//! | `RUNNING`      | running           | Ray's message                                        |
//! | `SUCCEEDED`    | success           | outputs from the logs (below)                        |
//! | `FAILED`       | permanent-failure | `error_type` (e.g. `JOB_ENTRYPOINT_COMMAND_ERROR`); Ray's message cut to its last 2 KiB, which hold the exception |
//! | `STOPPED`      | permanent-failure | `Stopped`                                            |
//! | 404            | permanent-failure | `JobNotFound`: the head no longer knows the job (a head forgets its jobs when it restarts) |
//!
//! Every phase links to the job in Ray's dashboard
//! (`{address}/#/jobs/{id}`, "Ray job"). Other answers are retryable
//! errors: the host polls again.
//!
//! # Outputs
//!
//! Ray jobs have none; the plugin reads them from the job's log
//! (`GET {address}/api/jobs/{id}/logs`) once it succeeded: the last line
//! that is a JSON object `{"weft.outputs": {...}}` is the task's outputs,
//! e.g. `print(json.dumps({"weft.outputs": {"answer": 42}}))`. No such
//! line: empty outputs. Ray serves the whole driver log at once, so a log
//! larger than the manifest's `egress.maxResponse` (4 MiB) cannot be read:
//! the plugin then answers success without outputs, saying why, but a
//! host that fails every call with an oversized response (Weft's does, as
//! `response_too_large`) fails the task instead; chatty jobs need a larger
//! `maxResponse`.
//!
//! # delete
//!
//! `POST {address}/api/jobs/{id}/stop`. A 404 (the job is gone) is fine;
//! other non-2xx answers are retryable. Ray stops the job a second or two
//! later (`get` then says `STOPPED`); a job pending on resources the
//! cluster lacks stays `PENDING` despite the stop (Ray's limitation).

pub mod ray;

use ray::{JobConfig, JobState, Meta};
use weft_plugin_sdk::http::{ErrorKind, Request};
use weft_plugin_sdk::{log, PhaseInfo, PluginError, TaskContext, Value, WebApiPlugin};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The plugin.
pub struct RayJob;

impl WebApiPlugin for RayJob {
    fn create(ctx: TaskContext, idempotency_key: &str) -> Result<String, PluginError> {
        let config: JobConfig = ray::parse_config(&ctx.config)?;
        let meta = Meta {
            address: ray::address(&ctx.plugin_config, config.address.as_deref())?,
            submission_id: idempotency_key.to_string(),
        };
        let submit = Request::post(Meta::submit_url(&meta.address))
            .with_json(&ray::submit_body(&config, idempotency_key))
            .send();
        match &submit {
            Ok(resp) if resp.is_success() => {
                log::info(&format!("submitted Ray job {}", meta.job_url()));
                return Ok(meta.to_json());
            }
            // Refused before it left: there is no job to look for.
            Err(e) if matches!(e.kind(), ErrorKind::Denied | ErrorKind::Invalid) => {
                return Err(e.clone().into());
            }
            _ => {}
        }
        let probe = Request::get(meta.job_url()).send();
        ray::after_failed_submit(&submit, &probe)?;
        log::info(&format!(
            "Ray job {} exists already: adopted",
            meta.job_url()
        ));
        Ok(meta.to_json())
    }

    fn get(_ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
        let meta = Meta::parse(meta)?;
        let resp = Request::get(meta.job_url()).send()?;
        let info = match resp.status {
            200 => {
                let job: Value = resp.json().map_err(|e| {
                    PluginError::retryable(format!(
                        "Ray's answer for {} is not JSON: {e}",
                        meta.job_url()
                    ))
                })?;
                match ray::job_state(&job)? {
                    JobState::Succeeded => succeeded(&meta)?,
                    other => other.phase_info(Default::default()),
                }
            }
            404 => PhaseInfo::permanent(
                "JobNotFound",
                format!(
                    "the Ray head at {} no longer knows job {} (a head forgets its jobs when it restarts)",
                    meta.address, meta.submission_id
                ),
            ),
            _ => return Err(ray::unexpected(&format!("GET {}", meta.job_url()), &resp)),
        };
        Ok(info.with_log_link("Ray job", meta.ui_url()))
    }

    fn delete(_ctx: TaskContext, meta: &str) -> Result<(), PluginError> {
        let meta = Meta::parse(meta)?;
        let resp = Request::post(meta.stop_url()).send()?;
        match resp.status {
            200..=299 => {
                log::info(&format!("asked Ray to stop job {}", meta.job_url()));
                Ok(())
            }
            404 => Ok(()),
            _ => Err(ray::unexpected(
                &format!("stopping Ray job {}", meta.submission_id),
                &resp,
            )),
        }
    }
}

/// A succeeded job's phase, with the outputs from its log.
fn succeeded(meta: &Meta) -> Result<PhaseInfo, PluginError> {
    let logs = match Request::get(meta.logs_url()).send() {
        Ok(resp) if resp.status == 200 => resp,
        Ok(resp) => return Err(ray::unexpected(&format!("GET {}", meta.logs_url()), &resp)),
        Err(e) if e.kind() == ErrorKind::TooLarge => {
            return Ok(JobState::Succeeded
                .phase_info(Default::default())
                .with_message(format!(
                    "the job succeeded, but its log is larger than the plugin may read ({}), so its outputs were not read",
                    e.detail()
                )));
        }
        Err(e) => return Err(e.into()),
    };
    let logs: Value = logs.json().map_err(|e| {
        PluginError::retryable(format!(
            "Ray's answer for {} is not JSON: {e}",
            meta.logs_url()
        ))
    })?;
    let outputs = ray::outputs_from_logs(logs["logs"].as_str().unwrap_or_default());
    Ok(JobState::Succeeded.phase_info(outputs))
}

weft_plugin_sdk::export_webapi_plugin!(RayJob);

#[cfg(test)]
mod tests;
