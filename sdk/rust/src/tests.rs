//! The glue between the generated bindings and the typed API, natively:
//! what a component's exports do with the host's strings.

use crate::wit::host::types as wit;
use crate::*;

struct Demo;

impl TaskPlugin for Demo {
    fn properties() -> TaskProperties {
        TaskProperties {
            abort: AbortBehaviour::Leave,
            delete_on_finish: true,
        }
    }

    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        let image = ctx.config["image"]
            .as_str()
            .ok_or_else(|| PluginError::permanent("config.image is required"))?;
        Ok(json!({"kind": "Pod", "image": image, "labels": ctx.labels, "n": ctx.inputs["n"]}))
    }

    fn get_task_phase(_ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(match observed["status"].as_str() {
            Some("done") => PhaseInfo::success(observed["out"].as_object().cloned())
                .with_log_link("logs", "https://logs/x"),
            Some("evicted") => PhaseInfo::system("Evicted", "node pressure"),
            Some("flaky") => return Err(PluginError::retryable("try later")),
            _ => PhaseInfo::queued(),
        })
    }
}

fn wit_ctx(config: &str) -> wit::TaskContext {
    wit::TaskContext {
        workflow: "wf".into(),
        namespace: "team-a".into(),
        node_id: "n".into(),
        attempt: 1,
        task_type: "demo".into(),
        config: config.into(),
        inputs: r#"{"n": 3}"#.into(),
        resource_name: "wf-n-1".into(),
        labels: vec![("a".into(), "b".into())],
        plugin_config: "{}".into(),
    }
}

#[test]
fn build_resource_parses_the_context_and_returns_json_text() {
    let out = crate::wit::glue::build_resource::<Demo>(wit_ctx(r#"{"image": "alpine"}"#)).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        json!({"kind": "Pod", "image": "alpine", "labels": {"a": "b"}, "n": 3})
    );
}

#[test]
fn plugin_errors_and_bad_host_json_become_wit_errors() {
    let e = crate::wit::glue::build_resource::<Demo>(wit_ctx("{}")).unwrap_err();
    assert_eq!(e.message, "config.image is required");
    assert!(!e.retryable);
    let e = crate::wit::glue::build_resource::<Demo>(wit_ctx("{not json")).unwrap_err();
    assert!(e.message.contains("not JSON"), "{}", e.message);
}

#[test]
fn get_task_phase_carries_outputs_links_and_system_reasons() {
    let info = crate::wit::glue::get_task_phase::<Demo>(
        wit_ctx("{}"),
        r#"{"status": "done", "out": {"rows": 1}}"#.into(),
    )
    .unwrap();
    assert!(matches!(info.phase, wit::Phase::Success));
    assert_eq!(info.outputs.as_deref(), Some(r#"{"rows":1}"#));
    assert_eq!(info.log_links[0].uri, "https://logs/x");

    let info =
        crate::wit::glue::get_task_phase::<Demo>(wit_ctx("{}"), r#"{"status": "evicted"}"#.into())
            .unwrap();
    assert!(matches!(info.phase, wit::Phase::RetryableFailure));
    assert_eq!(info.reason.as_deref(), Some("System:Evicted"));

    let e =
        crate::wit::glue::get_task_phase::<Demo>(wit_ctx("{}"), r#"{"status": "flaky"}"#.into())
            .unwrap_err();
    assert!(e.retryable);
    let e = crate::wit::glue::get_task_phase::<Demo>(wit_ctx("{}"), "<pod/>".into()).unwrap_err();
    assert!(e.message.contains("observed resource is not JSON"));
}

#[test]
fn properties_are_translated() {
    use crate::wit::task::exports::weft::plugin::k8s_task as k;
    let p = crate::wit::glue::properties::<Demo>();
    assert!(matches!(p.abort, k::AbortBehaviour::Leave));
    assert!(p.delete_on_finish);
}

struct Gate;

impl MiddlewarePlugin for Gate {
    fn on_request(call: Call) -> Verdict {
        match call.metadata.get("authorization") {
            None => Verdict::reject(
                Code::Unauthenticated,
                format!("{} needs a token", call.method),
            ),
            Some(_) => Verdict::proceed_setting("x-user", "alice").and_remove("authorization"),
        }
    }
}

#[test]
fn middleware_verdicts_are_translated() {
    use crate::wit::middleware::exports::weft::plugin::middleware as m;
    let call = |metadata: Vec<(String, String)>| m::Call {
        method: "/weft.admin.v1.AdminService/GetExecution".into(),
        metadata,
        peer: Some("10.0.0.1:5000".into()),
        request: None,
        plugin_config: "{}".into(),
    };
    match crate::wit::mw_glue::on_request::<Gate>(call(vec![])) {
        m::Verdict::Reject(r) => {
            assert!(matches!(r.code, m::Code::Unauthenticated));
            assert!(r.message.contains("GetExecution"));
        }
        other => panic!("{other:?}"),
    }
    match crate::wit::mw_glue::on_request::<Gate>(call(vec![("authorization".into(), "t".into())]))
    {
        m::Verdict::Proceed(edits) => {
            assert_eq!(edits.set, vec![("x-user".to_string(), "alice".to_string())]);
            assert_eq!(edits.remove, vec!["authorization".to_string()]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn native_state_expires() {
    state::set("tests/ttl", b"v", Some(0)).unwrap();
    assert_eq!(state::get("tests/ttl"), None);
    state::set("tests/keep", b"v", Some(60_000)).unwrap();
    assert_eq!(state::get("tests/keep").as_deref(), Some(&b"v"[..]));
}

#[test]
fn phases_and_errors() {
    assert!(PhaseInfo::system("NodeLost", "").is_system_failure());
    assert!(!PhaseInfo::retryable("Error", "").is_system_failure());
    assert!(Phase::PermanentFailure.is_terminal() && !Phase::Running.is_terminal());
    let e: PluginError = serde_json::from_str::<Value>("{").unwrap_err().into();
    assert!(!e.retryable);
    assert_eq!(
        serde_json::to_value(PhaseInfo::queued()).unwrap(),
        json!({"phase": "queued"})
    );
}

#[cfg(feature = "webapi")]
mod webapi {
    use crate::wit::webapi::weft::plugin::types as wit;
    use crate::*;

    struct Agent;

    impl WebApiPlugin for Agent {
        fn create(ctx: TaskContext, key: &str) -> Result<String, PluginError> {
            match ctx.config["mode"].as_str() {
                Some("bad") => Err(PluginError::permanent("config.mode is bad")),
                _ => Ok(format!("{}/{key}/{}", ctx.namespace, ctx.inputs["n"])),
            }
        }

        fn get(_ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
            Ok(match meta {
                "done" => PhaseInfo::success(json!({"rows": 1}).as_object().cloned())
                    .with_log_link("Job", "http://svc/#/jobs/done"),
                "failed" => PhaseInfo::permanent("Failed", "boom"),
                _ => return Err(PluginError::retryable("the service did not answer")),
            })
        }

        fn delete(_ctx: TaskContext, meta: &str) -> Result<(), PluginError> {
            (meta == "gone")
                .then_some(())
                .ok_or_else(|| PluginError::retryable("still running"))
        }
    }

    fn ctx(config: &str) -> wit::TaskContext {
        wit::TaskContext {
            workflow: "wf".into(),
            namespace: "team-a".into(),
            node_id: "n".into(),
            attempt: 0,
            task_type: "agent".into(),
            config: config.into(),
            inputs: r#"{"n": 3}"#.into(),
            resource_name: "wf-n-0".into(),
            labels: vec![],
            plugin_config: "{}".into(),
        }
    }

    #[test]
    fn create_gets_the_typed_context_and_the_key() {
        let meta = crate::wit::webapi_glue::create::<Agent>(ctx("{}"), "wf-n-0".into()).unwrap();
        assert_eq!(meta, "team-a/wf-n-0/3");
        let e = crate::wit::webapi_glue::create::<Agent>(ctx(r#"{"mode": "bad"}"#), "k".into())
            .unwrap_err();
        assert_eq!(e.message, "config.mode is bad");
        assert!(!e.retryable);
        let e = crate::wit::webapi_glue::create::<Agent>(ctx("{oops"), "k".into()).unwrap_err();
        assert!(
            e.message.contains("not JSON") && !e.retryable,
            "{}",
            e.message
        );
    }

    #[test]
    fn get_translates_phases_outputs_and_links() {
        let info = crate::wit::webapi_glue::get::<Agent>(ctx("{}"), "done".into()).unwrap();
        assert!(matches!(info.phase, wit::Phase::Success));
        assert_eq!(info.outputs.as_deref(), Some(r#"{"rows":1}"#));
        assert_eq!(info.log_links[0].name, "Job");
        assert_eq!(info.log_links[0].uri, "http://svc/#/jobs/done");
        let info = crate::wit::webapi_glue::get::<Agent>(ctx("{}"), "failed".into()).unwrap();
        assert!(matches!(info.phase, wit::Phase::PermanentFailure));
        assert_eq!(info.reason.as_deref(), Some("Failed"));
        assert_eq!(info.message.as_deref(), Some("boom"));
        let e = crate::wit::webapi_glue::get::<Agent>(ctx("{}"), "?".into()).unwrap_err();
        assert!(e.retryable);
    }

    #[test]
    fn delete_passes_the_meta_and_errors() {
        assert!(crate::wit::webapi_glue::delete::<Agent>(ctx("{}"), "gone".into()).is_ok());
        let e = crate::wit::webapi_glue::delete::<Agent>(ctx("{}"), "x".into()).unwrap_err();
        assert!(e.retryable && e.message == "still running");
    }
}
