//! The pod plugin's logic, natively: building Pods, and the fixture table
//! of observed Pods shared with the host's test through the component.

use super::*;
use serde_json::json;

fn ctx(config: Value, inputs: Value) -> TaskContext {
    TaskContext {
        workflow: "wf".into(),
        namespace: "team-a".into(),
        node_id: "train".into(),
        attempt: 0,
        task_type: "pod".into(),
        config,
        inputs,
        resource_name: "wf-train-0".into(),
        labels: [("weft.dev/workflow".to_string(), "wf".to_string())].into(),
        plugin_config: json!({"imagePullGracePeriod": "3m", "logLinkTemplate": "kubectl logs -n {namespace} {name} -c {container}"}),
    }
}

#[test]
fn a_container_becomes_a_pod_with_inputs_as_env_and_args() {
    let pod = build_pod(&ctx(
        json!({"container": {"image": "alpine:3", "command": ["sh", "-c"], "args": ["echo {{inputs.who}}"], "env": {"MODE": "fast"}}}),
        json!({"who": "world", "n": 3}),
    ))
    .unwrap();
    assert_eq!(pod["metadata"]["name"], "wf-train-0");
    assert_eq!(pod["metadata"]["namespace"], "team-a");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["name"], "main");
    assert_eq!(c["args"][0], "echo world");
    let env = c["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "MODE", "value": "fast"})));
    assert!(env.contains(&json!({"name": "WEFT_INPUT_WHO", "value": "world"})));
    assert!(env.contains(&json!({"name": "WEFT_INPUT_N", "value": "3"})));
}

#[test]
fn shorthand_and_pod_spec_are_accepted() {
    let pod = build_pod(&ctx(
        json!({"image": "alpine:3", "command": ["true"]}),
        json!({}),
    ))
    .unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "alpine:3");
    let pod = build_pod(&ctx(
        json!({"podSpec": {"containers": [{"name": "app", "image": "a"}, {"name": "side", "image": "b"}], "restartPolicy": "Always"}}),
        json!({}),
    ))
    .unwrap();
    assert_eq!(
        pod["spec"]["restartPolicy"], "Never",
        "tasks never restart in place"
    );
    assert_eq!(pod["spec"]["containers"][1]["name"], "side");
}

#[test]
fn bad_configs_are_permanent_errors_that_say_why() {
    for (config, needle) in [
        (json!({"container": {"command": ["x"]}}), "needs an image"),
        (
            json!({"podSpec": {"containers": []}}),
            "at least one container",
        ),
        (json!({"container": 3}), "container must be an object"),
        (
            json!({"image": "a", "env": 3}),
            "env must be a list or a map",
        ),
    ] {
        let e = build_pod(&ctx(config, json!({}))).unwrap_err();
        assert!(!e.retryable);
        assert!(e.message.contains(needle), "{e}");
    }
}

#[test]
fn timestamps_parse() {
    assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:01Z"), Some(1000));
    assert_eq!(
        parse_rfc3339_millis("2024-02-29T12:00:00Z"),
        Some(1_709_208_000_000)
    );
    assert_eq!(parse_duration_millis("3m"), Some(180_000));
}

#[test]
fn the_fixture_table() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/pods");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let info = pod_phase(&ctx(json!({}), json!({})), &case["observed"]);
        let got = serde_json::to_value(&info).unwrap();
        let expect = &case["expect"];
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(got["phase"], expect["phase"], "{name}: {got}");
        assert_eq!(got["reason"], expect["reason"], "{name}: {got}");
        assert_eq!(got["outputs"], expect["outputs"], "{name}: {got}");
        if let Some(s) = expect["messageContains"].as_str() {
            assert!(
                got["message"].as_str().unwrap_or_default().contains(s),
                "{name}: {got}"
            );
        }
        n += 1;
    }
    assert!(n >= 12, "only {n} fixtures");
}
