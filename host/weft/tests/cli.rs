//! `weft plugin` as a plugin author uses it: the real binary on the real
//! components built from the repo's sources (`make guests`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pod() -> PathBuf {
    let p = root().join("target/plugins/pod.wasm");
    assert!(p.is_file(), "{} missing: run `make guests`", p.display());
    p
}

fn weft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run weft")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn inspect_shows_world_exports_digest_and_manifest() {
    let out = weft(&["plugin", "inspect", pod().to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["world"], "k8s-task-plugin");
    assert_eq!(v["name"], "pod");
    assert!(
        v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "weft:plugin/k8s-task@0.1.0")
    );
    assert!(
        v["imports"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i.as_str().unwrap().starts_with("weft:plugin/")),
        "the pod plugin needs nothing but the host's own imports: {}",
        v["imports"]
    );
    let digest = v["digest"].as_str().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 7 + 64,
        "{digest}"
    );
    assert_eq!(
        v["size"].as_u64().unwrap(),
        std::fs::metadata(pod()).unwrap().len()
    );
    assert!(
        v["taskTypes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "pod")
    );
}

#[test]
fn test_builds_the_pod_of_the_example_task() {
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        "examples/tasks/hello-pod.json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pod: serde_json::Value = serde_yaml::from_str(&stdout(&out)).expect("YAML");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], "hello-greet-0");
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["metadata"]["labels"]["weft.dev/workflow"], "hello");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Workflow");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let env = pod["spec"]["containers"][0]["env"].as_array().expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "WEFT_INPUT_WHO" && e["value"] == "world"),
        "{env:?}"
    );
}

#[test]
fn test_with_observed_prints_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let observed = dir.path().join("pod.json");
    std::fs::write(
        &observed,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hello-greet-0","namespace":"default"},
            "status":{"phase":"Succeeded","containerStatuses":[{"name":"main","ready":false,"restartCount":0,
            "image":"busybox:1.36","imageID":"","state":{"terminated":{"exitCode":0,"reason":"Completed",
            "message":"{\"greeted\": \"world\"}"}}}]}}"#,
    )
    .unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        "examples/tasks/hello-pod.json",
        "--observed",
        observed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_yaml::from_str(&stdout(&out)).expect("YAML");
    assert_eq!(info["phase"], "success");
    assert_eq!(info["outputs"]["greeted"], "world");
}

#[test]
fn bad_input_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.json");
    std::fs::write(&task, r#"{"workflow": "w", "colour": "blue"}"#).unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&task.display().to_string()) && err.contains("colour"),
        "{err}"
    );

    let missing = dir.path().join("nothing.wasm");
    std::fs::write(&missing, b"x").unwrap();
    let out = weft(&["plugin", "inspect", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no manifest"), "{}", stderr(&out));
}

#[test]
fn conformance_passes_the_pod_plugin_and_names_what_others_break() {
    let task = root().join("examples/tasks/hello-pod.json");
    let task = task.to_str().unwrap();
    let out = weft(&[
        "plugin",
        "test",
        pod().to_str().unwrap(),
        "--task",
        task,
        "--conformance",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out).matches("PASS").count(), 6, "{}", stdout(&out));

    let guest = |name: &str| root().join(format!("target/test-guests/{name}.wasm"));
    let out = weft(&[
        "plugin",
        "test",
        guest("undeclared-kind").to_str().unwrap(),
        "--task",
        task,
        "--conformance",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["declared kinds cover what it builds"], "{report}");

    let out = weft(&[
        "plugin",
        "test",
        guest("loop-forever").to_str().unwrap(),
        "--task",
        task,
        "--conformance",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("FAIL  calls stay within the deadline and memory"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn push_dry_run_prints_the_configmaps_the_loader_reads() {
    let out = weft(&[
        "plugin",
        "push",
        pod().to_str().unwrap(),
        "--dry-run",
        "-n",
        "weft-system",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let docs: Vec<k8s_openapi::api::core::v1::ConfigMap> = text
        .split("\n---\n")
        .map(|d| serde_yaml::from_str(d).expect("a ConfigMap"))
        .collect();
    let head = docs.last().unwrap();
    assert_eq!(head.metadata.name.as_deref(), Some("pod"));
    assert_eq!(head.metadata.namespace.as_deref(), Some("weft-system"));
    assert_eq!(
        head.metadata.labels.as_ref().unwrap()["weft.dev/plugin"],
        "pod"
    );
    let data = head.data.as_ref().unwrap();
    assert!(data["manifest.yaml"].contains("name: pod"), "{data:?}");
    assert!(data["digest"].starts_with("sha256:"), "{data:?}");
    assert!(
        head.binary_data
            .as_ref()
            .unwrap()
            .contains_key("component.wasm")
    );
}
