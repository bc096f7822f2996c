//! The plugin's logic natively: requests are answered by the SDK's native
//! responder, which records what the plugin sent.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Value};
use weft_plugin_sdk::http::{native, ErrorKind, HttpError, Request, Response};
use weft_plugin_sdk::{Phase, PhaseInfo, PluginError, TaskContext, WebApiPlugin};

use crate::config::{self, Body, DEFAULT_SUCCESS};
use crate::verdict::MAX_META;
use crate::Http;

const KEY: &str = "wf-a-0";

fn ctx(config: Value, inputs: Value) -> TaskContext {
    TaskContext {
        workflow: "wf".into(),
        namespace: "default".into(),
        node_id: "a".into(),
        task_type: "http".into(),
        resource_name: KEY.into(),
        config,
        inputs,
        ..TaskContext::default()
    }
}

/// Answers every request with `resp` and keeps the requests.
fn answer(resp: Response) -> Rc<RefCell<Vec<Request>>> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = seen.clone();
    native::set_responder(move |req| {
        log.borrow_mut().push(req.clone());
        Ok(resp.clone())
    });
    seen
}

fn json_response(status: u16, body: Value) -> Response {
    let mut resp = Response::new(status, body.to_string());
    resp.headers
        .push(("content-type".into(), "application/json".into()));
    resp
}

/// create, then get with its meta.
fn run(config: Value, inputs: Value) -> Result<PhaseInfo, PluginError> {
    let meta = Http::create(ctx(config.clone(), inputs.clone()), KEY)?;
    assert!(meta.len() <= MAX_META, "{} bytes", meta.len());
    Http::get(ctx(config, inputs), &meta)
}

fn permanent(r: Result<impl std::fmt::Debug, PluginError>) -> String {
    let e = r.unwrap_err();
    assert!(!e.retryable, "{e}");
    e.message
}

#[test]
fn a_config_has_defaults_and_only_known_fields() {
    let c = config::parse(&json!({"url": "http://svc/x"})).unwrap();
    assert_eq!(c.method, "GET");
    assert_eq!(c.success_condition, DEFAULT_SUCCESS);
    assert!(c.headers.is_empty() && c.outputs.is_empty() && c.body.is_none());

    let c = config::parse(&json!({"url": "u", "body": "raw"})).unwrap();
    assert_eq!(c.body, Some(Body::Text("raw".into())));
    let c = config::parse(&json!({"url": "u", "body": [1, {"a": null}]})).unwrap();
    assert_eq!(c.body, Some(Body::Json(json!([1, {"a": null}]))));

    for (config, want) in [
        (json!({}), "url is required"),
        (json!({"url": ""}), "url is required"),
        (json!("http://svc"), "must be a map"),
        (json!({"url": 1}), "url must be a string, found 1"),
        (
            json!({"url": "u", "method": ["GET"]}),
            "method must be a string",
        ),
        (
            json!({"url": "u", "headers": ["a"]}),
            "headers must be a map of strings",
        ),
        (
            json!({"url": "u", "headers": {"X-N": 1}}),
            "headers.X-N must be a string, found 1",
        ),
        (
            json!({"url": "u", "outputs": {"n": 1}}),
            "outputs.n must be a string",
        ),
        (
            json!({"url": "u", "successCondition": true}),
            "successCondition must be a string",
        ),
        (
            json!({"url": "u", "timeout": "1s"}),
            "unknown field \"timeout\"",
        ),
    ] {
        let e = permanent(config::parse(&config));
        assert!(e.contains(want), "{config}: {e}");
    }
}

#[test]
fn inputs_are_substituted_in_method_url_headers_and_body() {
    let c = config::parse(&json!({
        "method": "${inputs.verb}",
        "url": "http://svc/orders/${inputs.id}?total=${ inputs.total }&home=${HOME}",
        "headers": {"X-Order": "${inputs.id}", "X-Whole": "${inputs.total}"},
        "body": {"id": "${inputs.id}", "total": "${inputs.total}", "all": ["${inputs.tags}"], "note": "n=${inputs.total}"},
    }))
    .unwrap();
    let inputs = json!({"verb": "put", "id": "o-7", "total": 42.5, "tags": ["a", "b"]});
    let r = c.resolve(inputs.as_object().unwrap()).unwrap();
    assert_eq!(r.method, "PUT");
    assert_eq!(r.url, "http://svc/orders/o-7?total=42.5&home=${HOME}");
    assert_eq!(r.headers["X-Order"], "o-7");
    assert_eq!(r.headers["X-Whole"], "42.5");
    assert_eq!(
        r.body,
        Some(Body::Json(
            json!({"id": "o-7", "total": 42.5, "all": [["a", "b"]], "note": "n=42.5"})
        ))
    );
    // A text body stays text, whatever the input's type.
    let c = config::parse(&json!({"url": "u", "body": "${inputs.tags}"})).unwrap();
    let r = c.resolve(inputs.as_object().unwrap()).unwrap();
    assert_eq!(r.body, Some(Body::Text(r#"["a","b"]"#.into())));
}

#[test]
fn an_unknown_input_or_a_bad_method_is_permanent_and_named() {
    let inputs = json!({"id": 1});
    for (config, want) in [
        (
            json!({"url": "http://svc/${inputs.nope}"}),
            "url: unknown input \"nope\" in ${inputs.nope} (the node's inputs: [id])",
        ),
        (
            json!({"url": "u", "headers": {"X": "${inputs.x}"}}),
            "headers.X: unknown input \"x\"",
        ),
        (
            json!({"url": "u", "body": {"a": ["${inputs.y}"]}}),
            "body.a[0]: unknown input \"y\"",
        ),
        (
            json!({"url": "u", "method": "GE T"}),
            "method \"GE T\" is not an HTTP method",
        ),
    ] {
        let seen = answer(Response::new(200, ""));
        let e = permanent(Http::create(ctx(config.clone(), inputs.clone()), KEY));
        assert!(e.contains(want), "{config}: {e}");
        assert!(seen.borrow().is_empty(), "nothing is sent");
    }
    native::clear_responder();
}

#[test]
fn bad_cel_is_permanent_names_its_field_and_sends_nothing() {
    for (config, want) in [
        (
            json!({"url": "u", "outputs": {"total": "response.json.total +"}}),
            "outputs.total: \"response.json.total +\" is not valid CEL",
        ),
        (
            json!({"url": "u", "successCondition": "response.status =="}),
            "successCondition: ",
        ),
        (
            json!({"url": "u", "successCondition": " "}),
            "successCondition is empty",
        ),
        (
            json!({"url": "u", "outputs": {"m": "Foo{a: 1}"}}),
            "outputs.m: \"Foo{a: 1}\" is not valid CEL: message literals",
        ),
        (
            json!({"url": "u", "outputs": {"deep": format!("{}1{}", "(".repeat(40), ")".repeat(40))}}),
            "nested 40 deep",
        ),
    ] {
        let seen = answer(Response::new(200, ""));
        let e = permanent(Http::create(ctx(config.clone(), json!({})), KEY));
        assert!(e.contains(want), "{config}: {e}");
        assert!(seen.borrow().is_empty(), "nothing is sent for {config}");
    }
    native::clear_responder();
}

#[test]
fn a_post_sends_once_with_the_key_and_reads_outputs_with_cel() {
    let mut resp = json_response(
        201,
        json!({"id": 7, "total": 42.5, "items": [{"n": 1}, {"n": 2}]}),
    );
    resp.headers.push(("X-Trace".into(), "t-1".into()));
    resp.headers.push(("x-trace".into(), "t-2".into()));
    let seen = answer(resp);
    let info = run(
        json!({
            "method": "post",
            "url": "http://svc/orders",
            "headers": {"X-Team": "${inputs.team}"},
            "body": {"item": "widget", "qty": "${inputs.qty}"},
            "successCondition": "response.status == 201 && response.json.total > 40.0",
            "outputs": {
                "id": "response.json.id",
                "next": "response.json.id + 1",
                "total": "response.json.total",
                "count": "size(response.json.items)",
                "trace": "response.headers['x-trace']",
                "type": "response.headers['content-type']",
                "who": "inputs.team + '/' + string(inputs.qty)",
                "raw": "response.body.startsWith('{')",
            },
        }),
        json!({"team": "ml", "qty": 3}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::Success, "{info:?}");
    assert_eq!(
        Value::Object(info.outputs.unwrap()),
        json!({"id": 7, "next": 8, "total": 42.5, "count": 2, "trace": "t-1, t-2",
               "type": "application/json", "who": "ml/3", "raw": true})
    );
    assert_eq!(
        info.message.as_deref(),
        Some("POST http://svc/orders answered 201")
    );
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1, "one request");
    let req = &seen[0];
    assert_eq!((req.method(), req.url()), ("POST", "http://svc/orders"));
    assert_eq!(req.header("idempotency-key"), Some(KEY));
    assert_eq!(req.header("x-team"), Some("ml"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(req.body()).unwrap(),
        json!({"item": "widget", "qty": 3})
    );
    native::clear_responder();
}

#[test]
fn the_tasks_own_idempotency_key_and_content_type_win() {
    let seen = answer(Response::new(204, ""));
    let info = run(
        json!({"method": "PUT", "url": "http://svc/x", "body": {"a": 1},
               "headers": {"idempotency-key": "mine", "Content-Type": "application/merge-patch+json"}}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::Success);
    assert_eq!(info.outputs, Some(Default::default()));
    let req = &seen.borrow()[0];
    assert_eq!(req.headers().len(), 2, "{:?}", req.headers());
    assert_eq!(req.header("Idempotency-Key"), Some("mine"));
    assert_eq!(
        req.header("content-type"),
        Some("application/merge-patch+json")
    );
    native::clear_responder();
}

#[test]
fn a_text_body_is_sent_as_it_is() {
    let seen = answer(Response::new(200, "pong"));
    let info = run(
        json!({"method": "POST", "url": "http://svc/ping", "body": "ping ${inputs.n}",
               "outputs": {"said": "response.body", "json": "response.json"}}),
        json!({"n": 2}),
    )
    .unwrap();
    assert_eq!(
        Value::Object(info.outputs.unwrap()),
        json!({"said": "pong", "json": null})
    );
    let req = &seen.borrow()[0];
    assert_eq!(req.body(), b"ping 2");
    assert_eq!(req.header("content-type"), None);
    native::clear_responder();
}

#[test]
fn a_failed_condition_is_a_retryable_failure_naming_request_status_and_condition() {
    answer(json_response(503, json!({"error": "busy"})));
    let info = run(
        json!({"method": "POST", "url": "http://svc/busy"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::RetryableFailure);
    assert_eq!(info.reason.as_deref(), Some("SuccessConditionFailed"));
    assert_eq!(
        info.message.as_deref().unwrap(),
        format!(
            "POST http://svc/busy answered 503: successCondition {DEFAULT_SUCCESS:?} is false; the body: {{\"error\":\"busy\"}}"
        )
    );
    // A condition that cannot be evaluated on this answer is not a success.
    answer(Response::new(502, "<html>bad gateway</html>"));
    let info = run(
        json!({"url": "http://svc/x", "successCondition": "int(response.body) > 0"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::RetryableFailure);
    let msg = info.message.unwrap();
    assert!(
        msg.starts_with(
            "GET http://svc/x answered 502: successCondition \"int(response.body) > 0\" failed: "
        ) && msg.ends_with("the body: <html>bad gateway</html>"),
        "{msg}"
    );
    native::clear_responder();
}

#[test]
fn a_non_boolean_condition_or_a_failing_output_is_permanent() {
    answer(json_response(200, json!({"n": 1})));
    let info = run(
        json!({"url": "http://svc/x", "successCondition": "response.json.n"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::PermanentFailure);
    assert_eq!(info.reason.as_deref(), Some("InvalidCondition"));
    assert!(info
        .message
        .unwrap()
        .contains("successCondition \"response.json.n\" must give true or false, gave Int"),);

    let info = run(
        json!({"url": "http://svc/x", "outputs": {"ok": "response.json.n", "total": "response.json.total"}}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info.phase, Phase::PermanentFailure);
    assert_eq!(info.reason.as_deref(), Some("InvalidOutputs"));
    let msg = info.message.unwrap();
    assert!(
        msg.starts_with(
            "GET http://svc/x answered 200: outputs.total \"response.json.total\" failed: "
        ),
        "{msg}"
    );
    native::clear_responder();
}

#[test]
fn outputs_over_the_meta_limit_fail_for_good_saying_so() {
    let big = "x".repeat(5000);
    answer(json_response(200, json!({"blob": big})));
    let config = json!({"url": "http://svc/big", "outputs": {"blob": "response.json.blob"}});
    let meta = Http::create(ctx(config.clone(), json!({})), KEY).unwrap();
    assert!(meta.len() <= MAX_META, "{}", meta.len());
    let info = Http::get(ctx(config, json!({})), &meta).unwrap();
    assert_eq!(info.phase, Phase::PermanentFailure);
    assert_eq!(info.reason.as_deref(), Some("OutputsTooLarge"));
    let msg = info.message.unwrap();
    assert!(
        msg.starts_with("GET http://svc/big answered 200, but its outputs are 5011 bytes as JSON, over the 4096 bytes"),
        "{msg}"
    );

    // A long failure message (a long URL, a long body) is cut to fit.
    answer(Response::new(500, "e".repeat(10_000)));
    let url = format!("http://svc/{}", "p".repeat(5000));
    let meta = Http::create(ctx(json!({"url": url}), json!({})), KEY).unwrap();
    assert!(meta.len() <= MAX_META, "{}", meta.len());
    let info = Http::get(ctx(json!({}), json!({})), &meta).unwrap();
    assert_eq!(info.phase, Phase::RetryableFailure);
    assert!(info.message.unwrap().ends_with("..."));
    native::clear_responder();
}

#[test]
fn no_answer_is_the_clients_error() {
    native::set_responder(|_| Err(HttpError::new(ErrorKind::Transport, "connection refused")));
    let e = Http::create(ctx(json!({"url": "http://svc/x"}), json!({})), KEY).unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.message, "GET http://svc/x: connection refused");

    native::set_responder(|_| Err(HttpError::new(ErrorKind::Denied, "HTTP request denied")));
    let e = permanent(Http::create(
        ctx(
            json!({"method": "DELETE", "url": "http://other/x"}),
            json!({}),
        ),
        KEY,
    ));
    assert_eq!(e, "DELETE http://other/x: HTTP request denied");

    let e = permanent(Http::create(ctx(json!({"url": "svc/x"}), json!({})), KEY));
    assert!(e.contains("invalid URL \"svc/x\""), "{e}");
    native::clear_responder();
}

#[test]
fn get_reads_only_the_meta_and_delete_has_nothing_to_stop() {
    native::clear_responder(); // any request would fail
    let meta = r#"{"request":"GET http://svc/x","status":200,"verdict":{"phase":"success","outputs":{"n":1}}}"#;
    let info = Http::get(ctx(json!({}), json!({})), meta).unwrap();
    assert_eq!(info.phase, Phase::Success);
    assert_eq!(info.outputs.unwrap()["n"], 1);
    let e = permanent(Http::get(ctx(json!({}), json!({})), "not json"));
    assert!(e.contains("is not an http task's"), "{e}");
    Http::delete(ctx(json!({}), json!({})), meta).unwrap();
}
