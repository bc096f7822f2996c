//! The plugin against the exchanges recorded with a real Ray 2.60.0 head
//! (`tests/fixtures/ray`, replayed by the SDK's native `wasi:http`
//! stand-in), and its pure logic on its own.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use weft_plugin_sdk::http::{native, ErrorKind, HttpError, Response};
use weft_plugin_sdk::{json, Phase, PhaseInfo, TaskContext, Value, WebApiPlugin};

use crate::ray::{self, Meta};
use crate::RayJob;

/// The sanitised dashboard address of the recordings.
const ADDRESS: &str = "http://127.0.0.1:8265";

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/../../tests/fixtures/ray/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn exchanges(name: &str) -> Vec<Value> {
    fixture(name)["exchanges"].as_array().unwrap().clone()
}

/// An exchange the recordings do not have, in their format.
fn exchange(method: &str, path: &str, status: u16, body: Value) -> Value {
    let content_type = if body.is_string() {
        "text/plain; charset=utf-8"
    } else {
        "application/json; charset=utf-8"
    };
    json!({
        "request": {"method": method, "path": path},
        "response": {"status": status, "headers": {"content-type": content_type}, "body": body},
    })
}

/// A recorded response as the plugin would read it.
fn response(exchange: &Value) -> Response {
    let r = &exchange["response"];
    let content_type = r["headers"]["content-type"].as_str().unwrap_or_default();
    let body = match &r["body"] {
        Value::String(text) if !content_type.contains("json") => text.clone().into_bytes(),
        other => serde_json::to_vec(other).unwrap(),
    };
    let mut resp = Response::new(r["status"].as_u64().unwrap() as u16, body);
    resp.headers
        .push(("content-type".into(), content_type.to_string()));
    resp
}

/// A request the plugin sent: method, path below the address, JSON body.
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    method: String,
    path: String,
    body: Value,
}

/// Answers the plugin's requests from `exchanges`: each (method, path)
/// gets its recorded answers in order, then the last one again (the
/// recorder kept one answer per status of a poll). A request outside
/// them, or to another address, fails the test.
fn replay(exchanges: Vec<Value>) -> Rc<RefCell<Vec<Sent>>> {
    replay_at(ADDRESS, exchanges)
}

fn replay_at(address: &'static str, exchanges: Vec<Value>) -> Rc<RefCell<Vec<Sent>>> {
    let mut queues: BTreeMap<(String, String), VecDeque<Response>> = BTreeMap::new();
    for x in &exchanges {
        let key = (
            x["request"]["method"].as_str().unwrap().to_string(),
            x["request"]["path"].as_str().unwrap().to_string(),
        );
        queues.entry(key).or_default().push_back(response(x));
    }
    let sent = Rc::new(RefCell::new(Vec::new()));
    let log = sent.clone();
    native::set_responder(move |req| {
        let path = req
            .url()
            .strip_prefix(address)
            .unwrap_or_else(|| panic!("request to another address: {}", req.url()))
            .to_string();
        let body = if req.body().is_empty() {
            Value::Null
        } else {
            assert_eq!(req.header("content-type"), Some("application/json"));
            serde_json::from_slice(req.body()).unwrap()
        };
        log.borrow_mut().push(Sent {
            method: req.method().to_string(),
            path: path.clone(),
            body,
        });
        let key = (req.method().to_string(), path);
        let queue = queues
            .get_mut(&key)
            .unwrap_or_else(|| panic!("no recorded exchange for {key:?}"));
        Ok(if queue.len() > 1 {
            queue.pop_front().unwrap()
        } else {
            queue[0].clone()
        })
    });
    sent
}

/// Answers every request with `f` (no recording).
fn respond(
    f: impl FnMut(&str, &str) -> Result<Response, HttpError> + 'static,
) -> Rc<RefCell<Vec<String>>> {
    let sent = Rc::new(RefCell::new(Vec::new()));
    let log = sent.clone();
    let mut f = f;
    native::set_responder(move |req| {
        log.borrow_mut()
            .push(format!("{} {}", req.method(), req.url()));
        f(req.method(), req.url())
    });
    sent
}

fn ctx(config: Value) -> TaskContext {
    TaskContext {
        workflow: "wf-1".into(),
        namespace: "team-a".into(),
        node_id: "ray".into(),
        task_type: "ray-job".into(),
        config,
        inputs: json!({}),
        resource_name: "wf-1-ray-0".into(),
        plugin_config: json!({"address": ADDRESS}),
        ..TaskContext::default()
    }
}

fn meta(id: &str) -> String {
    Meta {
        address: ADDRESS.into(),
        submission_id: id.into(),
    }
    .to_json()
}

/// The recorded submit's body as a task config.
fn config_of(submit: &Value) -> Value {
    let body = &submit["request"]["body"];
    let mut config = json!({"entrypoint": body["entrypoint"]});
    for (ray, ours) in [
        ("runtime_env", "runtimeEnv"),
        ("metadata", "metadata"),
        ("entrypoint_num_cpus", "entrypointNumCpus"),
    ] {
        if !body[ray].is_null() {
            config[ours] = body[ray].clone();
        }
    }
    config
}

/// Creates the job of a recording's first exchange; checks the request
/// is the recorded one, byte for byte as JSON.
fn create_recorded(x: &[Value]) -> (String, String) {
    let id = x[0]["request"]["body"]["submission_id"]
        .as_str()
        .unwrap()
        .to_string();
    let sent = replay(x.to_vec());
    let m = RayJob::create(ctx(config_of(&x[0])), &id).unwrap();
    let first = sent.borrow()[0].clone();
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/api/jobs/");
    assert_eq!(first.body, x[0]["request"]["body"]);
    (m, id)
}

fn get(m: &str) -> PhaseInfo {
    RayJob::get(ctx(json!({})), m).unwrap()
}

#[test]
fn a_job_is_submitted_polled_and_its_outputs_read() {
    let x = exchanges("01-succeeded");
    let (m, id) = create_recorded(&x);
    assert_eq!(
        serde_json::from_str::<Value>(&m).unwrap(),
        json!({"address": ADDRESS, "submissionId": "weft-ok-000000"})
    );
    assert_eq!(id, "weft-ok-000000");

    let info = get(&m);
    assert_eq!(info.phase, Phase::Queued);
    assert_eq!(
        info.message.as_deref(),
        Some(
            "Job has not started yet. It may be waiting for the runtime environment to be set up."
        )
    );
    assert_eq!(info.log_links.len(), 1);
    assert_eq!(info.log_links[0].name, "Ray job");
    assert_eq!(
        info.log_links[0].uri,
        "http://127.0.0.1:8265/#/jobs/weft-ok-000000"
    );
    assert_eq!(get(&m).phase, Phase::Running);
    let done = get(&m);
    assert_eq!(done.phase, Phase::Success);
    assert_eq!(
        done.outputs,
        json!({"answer": 42, "greeting": "hi"}).as_object().cloned()
    );
    assert_eq!(done.log_links[0].name, "Ray job");
    // Polled again: the same answer.
    assert_eq!(get(&m), done);
}

#[test]
fn a_failed_job_is_a_permanent_failure_with_the_exception() {
    let x = exchanges("02-failed");
    let (m, _) = create_recorded(&x);
    assert_eq!(get(&m).phase, Phase::Queued);
    assert_eq!(get(&m).phase, Phase::Running);
    let failed = get(&m);
    assert_eq!(failed.phase, Phase::PermanentFailure);
    assert_eq!(
        failed.reason.as_deref(),
        Some("JOB_ENTRYPOINT_COMMAND_ERROR")
    );
    let message = failed.message.unwrap();
    assert!(message.ends_with("ValueError: boom 42"), "{message}");
    assert!(
        message.starts_with("Job entrypoint command failed with exit code 1"),
        "{message}"
    );
    assert!(
        message.len() <= ray::FAILURE_MESSAGE_MAX + 8,
        "{}",
        message.len()
    );
    assert_eq!(failed.log_links.len(), 1);

    let x = exchanges("06-command-not-found");
    let (m, _) = create_recorded(&x);
    let failed = [get(&m), get(&m)].into_iter().last().unwrap();
    assert_eq!(failed.phase, Phase::PermanentFailure);
    assert_eq!(
        failed.reason.as_deref(),
        Some("JOB_ENTRYPOINT_COMMAND_ERROR")
    );
    let message = failed.message.unwrap();
    assert!(message.contains("exit code 127"), "{message}");
    assert!(
        message.contains("weft-no-such-command: not found"),
        "{message}"
    );
}

#[test]
fn delete_stops_the_job_and_get_then_says_stopped() {
    let x = exchanges("03-stopped");
    let (m, _) = create_recorded(&x);
    assert_eq!(get(&m).phase, Phase::Queued);
    assert_eq!(get(&m).phase, Phase::Running);
    RayJob::delete(ctx(json!({})), &m).unwrap();
    // Ray stops it a moment later: until then it runs.
    assert_eq!(get(&m).phase, Phase::Running);
    let stopped = get(&m);
    assert_eq!(stopped.phase, Phase::PermanentFailure);
    assert_eq!(stopped.reason.as_deref(), Some("Stopped"));
    assert_eq!(
        stopped.message.as_deref(),
        Some("Job was intentionally stopped.")
    );
    // A second stop ({"stopped": false}) is fine too.
    RayJob::delete(ctx(json!({})), &m).unwrap();

    let x = exchanges("11-stop-while-pending");
    let (m, _) = create_recorded(&x);
    RayJob::delete(ctx(json!({})), &m).unwrap();
    let phases: Vec<Phase> = (0..3).map(|_| get(&m).phase).collect();
    assert_eq!(
        phases,
        [Phase::Queued, Phase::Running, Phase::PermanentFailure]
    );
}

#[test]
fn a_repeated_create_adopts_the_job_ray_has() {
    // Ray answers a duplicate submission_id with a 500 traceback; the
    // GET finds the first job.
    let x = exchanges("04-duplicate-submission");
    let sent = replay(x.clone());
    let m = RayJob::create(ctx(config_of(&x[0])), "weft-ok-000000").unwrap();
    assert_eq!(m, meta("weft-ok-000000"));
    let sent = sent.borrow();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body, x[0]["request"]["body"]);
    assert_eq!(
        (sent[1].method.as_str(), sent[1].path.as_str()),
        ("GET", "/api/jobs/weft-ok-000000")
    );
}

#[test]
fn a_job_the_head_forgot_fails_for_good_and_delete_is_fine() {
    replay(exchanges("05-not-found"));
    let info = get(&meta("weft-no-such-job"));
    assert_eq!(info.phase, Phase::PermanentFailure);
    assert_eq!(info.reason.as_deref(), Some("JobNotFound"));
    let message = info.message.unwrap();
    assert!(
        message.contains("no longer knows job weft-no-such-job") && message.contains(ADDRESS),
        "{message}"
    );
    assert_eq!(
        info.log_links[0].uri,
        "http://127.0.0.1:8265/#/jobs/weft-no-such-job"
    );
    RayJob::delete(ctx(json!({})), &meta("weft-no-such-job")).unwrap();

    // After Ray deleted a finished job, the same.
    let x = exchanges("10-delete");
    replay(vec![x.last().unwrap().clone()]);
    assert_eq!(
        get(&meta("weft-delete-000000")).reason.as_deref(),
        Some("JobNotFound")
    );
}

#[test]
fn a_job_that_prints_no_outputs_succeeds_with_none() {
    let x = exchanges("07-ray-driver");
    let (m, _) = create_recorded(&x);
    let done = [get(&m), get(&m), get(&m)].into_iter().last().unwrap();
    assert_eq!(done.phase, Phase::Success);
    assert_eq!(done.outputs, Some(Default::default()));
}

#[test]
fn a_job_ray_refuses_is_a_permanent_error_with_rays_reason() {
    let x = exchanges("08-bad-request");
    replay(vec![
        x[1].clone(),
        exchange(
            "GET",
            "/api/jobs/weft-extra-000000",
            404,
            json!("Job weft-extra-000000 does not exist"),
        ),
    ]);
    let e = RayJob::create(ctx(json!({"entrypoint": "true"})), "weft-extra-000000").unwrap_err();
    assert!(!e.retryable);
    assert_eq!(
        e.message,
        "Ray refused the job (HTTP 400): TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'weft'"
    );
}

#[test]
fn a_job_waiting_for_resources_is_queued_and_stop_does_not_end_it() {
    let x = exchanges("09-pending-unschedulable");
    let (m, _) = create_recorded(&x);
    let info = get(&m);
    assert_eq!(info.phase, Phase::Queued);
    assert!(info.message.unwrap().contains("waiting for resources"));
    RayJob::delete(ctx(json!({})), &m).unwrap();
    assert_eq!(get(&m).phase, Phase::Queued);
}

#[test]
fn create_decides_by_the_get_after_a_failed_submit() {
    let refused = || HttpError::new(ErrorKind::Transport, "connection refused");
    let missing = || Ok(Response::new(404, "Job k does not exist"));

    // The answer was lost, the job exists: adopted.
    respond(move |m, _| match m {
        "POST" => Err(HttpError::new(
            ErrorKind::Transport,
            "connection terminated",
        )),
        _ => Ok(Response::new(200, r#"{"status": "RUNNING"}"#)),
    });
    assert_eq!(
        RayJob::create(ctx(json!({"entrypoint": "true"})), "k").unwrap(),
        meta("k")
    );

    // Not sent, not there: retryable, with the transport's reason.
    respond(move |m, _| match m {
        "POST" => Err(refused()),
        _ => missing(),
    });
    let e = RayJob::create(ctx(json!({"entrypoint": "true"})), "k").unwrap_err();
    assert!(e.retryable);
    assert_eq!(
        e.message,
        "submitting the job failed: POST http://127.0.0.1:8265/api/jobs/: connection refused"
    );

    // Ray had no agent (a 500 of its own), the job is not there: retryable.
    respond(move |m, _| {
        match m {
        "POST" => Ok(Response::new(
            500,
            "Traceback...\nRuntimeError: No available agent to submit job, please try again later.\n",
        )),
        _ => missing(),
    }
    });
    let e = RayJob::create(ctx(json!({"entrypoint": "true"})), "k").unwrap_err();
    assert!(e.retryable);
    assert_eq!(
        e.message,
        "Ray did not create the job (HTTP 500): RuntimeError: No available agent to submit job, please try again later."
    );

    // Neither answered: retryable, naming both.
    respond(move |_, _| Err(refused()));
    let e = RayJob::create(ctx(json!({"entrypoint": "true"})), "k").unwrap_err();
    assert!(e.retryable);
    assert!(
        e.message
            .contains("POST http://127.0.0.1:8265/api/jobs/: connection refused")
            && e.message
                .contains("GET http://127.0.0.1:8265/api/jobs/k: connection refused"),
        "{}",
        e.message
    );

    // A 4xx but the GET failed: not sure, so retryable.
    respond(move |m, _| match m {
        "POST" => Ok(Response::new(400, "TypeError: x")),
        _ => Ok(Response::new(503, "busy")),
    });
    assert!(
        RayJob::create(ctx(json!({"entrypoint": "true"})), "k")
            .unwrap_err()
            .retryable
    );

    // Denied by the host: permanent, and no GET after it.
    let sent = respond(move |_, _| Err(HttpError::new(ErrorKind::Denied, "HTTP request denied")));
    let e = RayJob::create(ctx(json!({"entrypoint": "true"})), "k").unwrap_err();
    assert!(!e.retryable);
    assert_eq!(
        e.message,
        "POST http://127.0.0.1:8265/api/jobs/: HTTP request denied"
    );
    assert_eq!(sent.borrow().len(), 1);
}

#[test]
fn get_errors_are_retryable_unless_the_meta_is_broken() {
    respond(|_, _| Ok(Response::new(502, "<html>Bad Gateway</html>")));
    let e = RayJob::get(ctx(json!({})), &meta("k")).unwrap_err();
    assert!(e.retryable);
    assert_eq!(
        e.message,
        "GET http://127.0.0.1:8265/api/jobs/k: Ray answered HTTP 502: <html>Bad Gateway</html>"
    );

    respond(|_, _| Err(HttpError::new(ErrorKind::Transport, "connection timeout")));
    let e = RayJob::get(ctx(json!({})), &meta("k")).unwrap_err();
    assert!(e.retryable && e.message.ends_with("connection timeout"));

    respond(|_, _| Ok(Response::new(200, "not json")));
    assert!(
        RayJob::get(ctx(json!({})), &meta("k"))
            .unwrap_err()
            .retryable
    );

    respond(|_, _| Ok(Response::new(200, r#"{"status": "DRAINING"}"#)));
    let e = RayJob::get(ctx(json!({})), &meta("k")).unwrap_err();
    assert!(
        e.retryable && e.message.contains("\"DRAINING\""),
        "{}",
        e.message
    );

    for broken in [
        "",
        "k",
        r#"{"address": "x"}"#,
        r#"{"address": "x", "submissionId": "k", "more": 1}"#,
    ] {
        let e = RayJob::get(ctx(json!({})), broken).unwrap_err();
        assert!(
            !e.retryable && e.message.contains("meta"),
            "{broken}: {}",
            e.message
        );
    }
}

#[test]
fn a_succeeded_job_whose_log_cannot_be_read() {
    let job = r#"{"status": "SUCCEEDED", "message": "Job finished successfully."}"#;
    // Larger than the host reads: success, without outputs, saying why.
    respond(move |_, url| {
        if url.ends_with("/logs") {
            Err(HttpError::new(
                ErrorKind::TooLarge,
                "HTTP response body size exceeds limit: 4194305 bytes",
            ))
        } else {
            Ok(Response::new(200, job))
        }
    });
    let info = get(&meta("k"));
    assert_eq!(info.phase, Phase::Success);
    assert_eq!(info.outputs, Some(Default::default()));
    assert!(
        info.message.unwrap().contains("4194305 bytes"),
        "the message says why"
    );
    // The logs failed otherwise: ask again later.
    respond(move |_, url| {
        Ok(if url.ends_with("/logs") {
            Response::new(500, "oops")
        } else {
            Response::new(200, job)
        })
    });
    assert!(
        RayJob::get(ctx(json!({})), &meta("k"))
            .unwrap_err()
            .retryable
    );
}

#[test]
fn delete_errors() {
    respond(|_, _| {
        Ok(Response::new(
            500,
            "Traceback (most recent call last):\n  ...\nRuntimeError: the head is shutting down\n.\n",
        ))
    });
    let e = RayJob::delete(ctx(json!({})), &meta("k")).unwrap_err();
    assert!(e.retryable);
    assert_eq!(
        e.message,
        "stopping Ray job k: Ray answered HTTP 500: RuntimeError: the head is shutting down"
    );
    respond(|_, _| Err(HttpError::new(ErrorKind::Denied, "HTTP request denied")));
    assert!(
        !RayJob::delete(ctx(json!({})), &meta("k"))
            .unwrap_err()
            .retryable
    );
    let sent = respond(|_, _| Ok(Response::new(200, r#"{"stopped": true}"#)));
    RayJob::delete(ctx(json!({})), &meta("k")).unwrap();
    assert_eq!(
        *sent.borrow(),
        ["POST http://127.0.0.1:8265/api/jobs/k/stop"]
    );
}

#[test]
fn the_task_config_is_checked_field_by_field() {
    let err = |config: Value| {
        let e = ray::parse_config(&config).unwrap_err();
        assert!(!e.retryable);
        e.message
    };
    assert!(err(json!({})).contains("`entrypoint` is required"));
    assert!(err(json!("python x.py")).contains("must be an object"));
    assert!(err(json!({"entrypoint": 5})).contains("`entrypoint` must be a string"));
    assert!(err(json!({"entrypoint": "  "})).contains("`entrypoint` is empty"));
    let e = err(json!({"entrypoint": "x", "runtime_env": {}}));
    assert!(
        e.contains("`runtime_env` is not a field") && e.contains("runtimeEnv"),
        "{e}"
    );
    assert!(err(json!({"entrypoint": "x", "runtimeEnv": []}))
        .contains("`runtimeEnv` must be an object"));
    assert!(err(json!({"entrypoint": "x", "metadata": {"a": 1}}))
        .contains("`metadata.a` must be a string"));
    assert!(
        err(json!({"entrypoint": "x", "metadata": "a"})).contains("`metadata` must be an object")
    );
    assert!(
        err(json!({"entrypoint": "x", "entrypointNumCpus": -1})).contains("`entrypointNumCpus`")
    );
    assert!(
        err(json!({"entrypoint": "x", "entrypointNumCpus": "2"})).contains("`entrypointNumCpus`")
    );
    assert!(err(json!({"entrypoint": "x", "address": 8265})).contains("`address` must be a string"));

    let c = ray::parse_config(&json!({
        "entrypoint": "python train.py",
        "runtimeEnv": {"pip": ["torch"]},
        "metadata": {"team": "ml"},
        "entrypointNumCpus": 0.5,
        "address": null,
    }))
    .unwrap();
    assert_eq!(
        ray::submit_body(&c, "wf-1-ray-0"),
        json!({
            "entrypoint": "python train.py",
            "submission_id": "wf-1-ray-0",
            "runtime_env": {"pip": ["torch"]},
            "metadata": {"team": "ml"},
            "entrypoint_num_cpus": 0.5,
        })
    );
    // A config error fails create before any request.
    let sent = respond(|_, _| panic!("no request expected"));
    assert!(
        !RayJob::create(ctx(json!({"entrypoint": 1})), "k")
            .unwrap_err()
            .retryable
    );
    assert!(sent.borrow().is_empty());
}

#[test]
fn the_address_comes_from_the_task_or_the_plugin_config() {
    let plugin = json!({"address": "http://ray-head.ray.svc:8265/"});
    assert_eq!(
        ray::address(&plugin, None).unwrap(),
        "http://ray-head.ray.svc:8265"
    );
    assert_eq!(
        ray::address(&plugin, Some("https://proxy.example.com/ray/")).unwrap(),
        "https://proxy.example.com/ray"
    );
    let e = ray::address(&json!({}), None).unwrap_err();
    assert!(!e.retryable && e.message.contains("plugin config has no `address`"));
    for (bad, why) in [
        ("ray-head:8265", "is not a URL"),
        ("ftp://ray-head/", "http:// or https://"),
        ("http://ray-head:8265/?x=1", "query"),
    ] {
        let e = ray::address(&plugin, Some(bad)).unwrap_err();
        assert!(
            !e.retryable
                && e.message.contains("task config field `address`")
                && e.message.contains(why),
            "{bad}: {}",
            e.message
        );
    }

    // The task's address is where the job goes, and the meta keeps it.
    let sent = respond(|_, _| Ok(Response::new(200, "{}")));
    let m = RayJob::create(
        ctx(json!({"entrypoint": "true", "address": "https://other.example.com:443/"})),
        "k",
    )
    .unwrap();
    assert_eq!(
        *sent.borrow(),
        ["POST https://other.example.com:443/api/jobs/"]
    );
    assert_eq!(
        Meta::parse(&m).unwrap().address,
        "https://other.example.com:443"
    );
}

#[test]
fn ids_are_encoded_in_paths() {
    let m = Meta {
        address: ADDRESS.into(),
        submission_id: "a b/c".into(),
    };
    assert_eq!(m.job_url(), "http://127.0.0.1:8265/api/jobs/a%20b%2Fc");
    assert_eq!(
        m.logs_url(),
        "http://127.0.0.1:8265/api/jobs/a%20b%2Fc/logs"
    );
    assert_eq!(
        m.stop_url(),
        "http://127.0.0.1:8265/api/jobs/a%20b%2Fc/stop"
    );
    assert_eq!(m.ui_url(), "http://127.0.0.1:8265/#/jobs/a%20b%2Fc");
    assert_eq!(Meta::parse(&m.to_json()).unwrap(), m);
}

#[test]
fn rays_errors_come_down_to_their_last_line() {
    let duplicate = exchanges("04-duplicate-submission")[0]["response"]["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(duplicate.len() > 1000, "a whole traceback");
    assert_eq!(
        ray::error_line(&duplicate),
        "ValueError: Job with submission_id weft-ok-000000 already exists. Please use a different submission_id."
    );
    assert_eq!(
        ray::error_line("Job x does not exist"),
        "Job x does not exist"
    );
    assert_eq!(ray::error_line("\n.\n"), "(no message)");
    let long = format!("E: {}", "é".repeat(400));
    let line = ray::error_line(&long);
    assert!(line.ends_with('…') && line.len() <= ray::ERROR_LINE_MAX + '…'.len_utf8());
}

#[test]
fn failure_messages_keep_their_first_and_last_lines() {
    let failed = exchanges("02-failed");
    let recorded = failed[3]["response"]["body"]["message"].as_str().unwrap();
    assert!(recorded.len() < ray::FAILURE_MESSAGE_MAX);
    assert_eq!(
        ray::failure_message(recorded, ray::FAILURE_MESSAGE_MAX),
        recorded.trim_end()
    );

    // A chatty job: 20,000 chars of log before the traceback.
    let log: String = (0..400)
        .map(|i| format!("step {i:04} of the training loop\n"))
        .collect();
    let message = format!(
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n{log}Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nValueError: boom 42\n"
    );
    let cut = ray::failure_message(&message, ray::FAILURE_MESSAGE_MAX);
    assert!(cut.len() <= ray::FAILURE_MESSAGE_MAX, "{}", cut.len());
    assert!(cut.starts_with("Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n…\nstep "), "{cut}");
    assert!(cut.ends_with("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nValueError: boom 42"));
    // Without a short first line, only the tail.
    let one_line = "x".repeat(5000);
    let cut = ray::failure_message(&one_line, 100);
    assert!(cut.starts_with("…\n") && cut.len() <= 100 + 4, "{cut}");
}

#[test]
fn outputs_are_the_last_weft_outputs_line() {
    let logs = exchanges("01-succeeded")[4]["response"]["body"]["logs"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ray::outputs_from_logs(&logs),
        *json!({"answer": 42, "greeting": "hi"}).as_object().unwrap()
    );
    let logs = "{\"weft.outputs\": {\"n\": 1}}\n{\"weft.outputs\": {\"n\": 2}}\n{\"weft.outputs\": 3}\n{\"other\": 1}\n{broken\nbye\n";
    assert_eq!(
        ray::outputs_from_logs(logs),
        *json!({"n": 2}).as_object().unwrap()
    );
    assert!(ray::outputs_from_logs("hello\n").is_empty());
    assert!(ray::outputs_from_logs("").is_empty());
}

#[test]
fn every_status_maps_to_a_phase() {
    use ray::JobState;
    let state = |status: &str| ray::job_state(&json!({"status": status, "message": "m"})).unwrap();
    assert_eq!(state("PENDING"), JobState::Pending(Some("m".into())));
    assert_eq!(state("RUNNING"), JobState::Running(Some("m".into())));
    assert_eq!(state("SUCCEEDED"), JobState::Succeeded);
    assert_eq!(state("STOPPED"), JobState::Stopped(Some("m".into())));
    assert_eq!(
        state("FAILED"),
        JobState::Failed {
            error_type: None,
            message: Some("m".into())
        }
    );
    let failed = state("FAILED").phase_info(Default::default());
    assert_eq!(failed.phase, Phase::PermanentFailure);
    assert_eq!(failed.reason.as_deref(), Some("Failed"));
    assert!(ray::job_state(&json!({})).unwrap_err().retryable);

    // Every recorded answer of a job is one of Ray's five statuses.
    for name in [
        "01-succeeded",
        "02-failed",
        "03-stopped",
        "06-command-not-found",
        "07-ray-driver",
        "09-pending-unschedulable",
        "10-delete",
        "11-stop-while-pending",
    ] {
        for x in exchanges(name) {
            let body = &x["response"]["body"];
            if body.get("status").is_some() {
                ray::job_state(body).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}
