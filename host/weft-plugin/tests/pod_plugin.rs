//! The pod plugin through the real component in the host: the fixture
//! table of observed Pods (tests/fixtures/pods, shared with the plugin's
//! native unit tests) and what build-resource makes of a task.

mod common;

use common::{ctx, engine, task_plugin};
use serde_json::{Value, json};
use weft_plugin::FailureKind;

#[test]
fn every_observed_pod_fixture_maps_to_its_phase() {
    let engine = engine();
    let pod = task_plugin(&engine, "plugins", "pod");
    let dir = common::repo_root().join("tests/fixtures/pods");
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let name = path.file_name().unwrap().to_string_lossy();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (info, _) = pod
            .get_task_phase(&ctx("pod", json!({}), json!({})), &case["observed"])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = serde_json::to_value(&info).unwrap();
        let expect = &case["expect"];
        assert_eq!(got["phase"], expect["phase"], "{name}: {got}");
        assert_eq!(got["reason"], expect["reason"], "{name}: {got}");
        assert_eq!(got["outputs"], expect["outputs"], "{name}: {got}");
        if let Some(s) = expect["messageContains"].as_str() {
            let msg = got["message"].as_str().unwrap_or_default();
            assert!(msg.contains(s), "{name}: message {msg:?} lacks {s:?}");
        }
        let system = expect["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("System:"));
        assert_eq!(info.failure_kind() == FailureKind::System, system, "{name}");
        if expect["phase"] != "queued" && expect["phase"] != "waiting-for-resources" {
            assert!(!info.log_links.is_empty(), "{name}: no log link");
        }
        cases += 1;
    }
    assert!(cases >= 12, "only {cases} fixtures in {}", dir.display());
}

#[test]
fn build_resource_makes_an_owned_labelled_pod() {
    let engine = engine();
    let pod = task_plugin(&engine, "plugins", "pod");
    let task = ctx(
        "pod",
        json!({"container": {"image": "python:3.12", "command": ["python", "-c"], "args": ["print({{inputs.n}})"]}}),
        json!({"n": 7, "label": "x"}),
    );
    let (obj, stats) = pod.build_resource(&task).expect("builds");
    assert!(stats.memory_peak > 0);
    assert_eq!(obj["metadata"]["name"], "wf-train-0");
    assert_eq!(obj["metadata"]["namespace"], "team-a");
    assert_eq!(
        obj["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "weft"
    );
    assert_eq!(obj["metadata"]["labels"]["weft.dev/node"], "train");
    let owner = &obj["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Workflow");
    assert_eq!(owner["uid"], "3f1c9a4e-1111-2222-3333-444455556666");
    assert_eq!(owner["controller"], true);
    assert_eq!(obj["spec"]["restartPolicy"], "Never");
    let c = &obj["spec"]["containers"][0];
    assert_eq!(c["args"][0], "print(7)");
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "WEFT_INPUT_N", "value": "7"}))
    );
}

#[test]
fn a_long_workflow_name_still_gives_a_valid_deterministic_name() {
    let engine = engine();
    let pod = task_plugin(&engine, "plugins", "pod");
    let long = "a".repeat(80);
    let task = weft_plugin::TaskContext::for_attempt(
        &long,
        "uid",
        "ns",
        "step",
        2,
        "pod",
        json!({"image": "x"}),
        json!({}),
    );
    let (a, _) = pod.build_resource(&task).unwrap();
    let (b, _) = pod.build_resource(&task).unwrap();
    let name = a["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        name,
        b["metadata"]["name"].as_str().unwrap(),
        "deterministic"
    );
    assert!(name.len() <= 63, "{name}");
    let other = weft_plugin::TaskContext::for_attempt(
        &long,
        "uid",
        "ns",
        "step",
        3,
        "pod",
        json!({"image": "x"}),
        json!({}),
    );
    let (c, _) = pod.build_resource(&other).unwrap();
    assert_ne!(
        c["metadata"]["name"], a["metadata"]["name"],
        "another attempt, another name"
    );
}

#[test]
fn a_bad_config_is_a_permanent_plugin_error() {
    let engine = engine();
    let pod = task_plugin(&engine, "plugins", "pod");
    let err = pod
        .build_resource(&ctx("pod", json!({"container": {}}), json!({})))
        .unwrap_err();
    assert_eq!(err.kind(), FailureKind::User);
    assert!(!err.retryable());
    assert!(err.to_string().contains("needs an image"), "{err}");
}
