use super::*;
use serde_json::json;
use weft_dag::artifacts::ArtifactRef;

fn io(dir: &std::path::Path) -> PodIo {
    let repo = crate::store::ArtifactRepository {
        local: Some(crate::store::LocalRepository {
            path: dir.to_path_buf(),
            prefix: String::new(),
        }),
        s3: None,
    };
    PodIo::new(Store::open(&repo, None).unwrap(), "/bin/weft", "weft:test")
}

fn task() -> TaskSpec {
    serde_json::from_value(json!({"type": "pod",
        "inputs": {"artifacts": [{"name": "data", "path": "/work/in", "from": "${nodes.a.outputs.artifacts.out}"}]},
        "outputs": {"artifacts": [{"name": "model", "path": "/work/model"}],
                    "parameters": [{"name": "score", "path": "/work/score"}]}}))
    .unwrap()
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [
            {"name": "side", "image": "x", "command": ["sleep", "9"]},
            {"name": "main", "image": "busybox", "command": ["sh", "-c"], "args": ["cat /work/in > /work/model"]}]}})
}

const AT: Attempt<'static> = Attempt {
    namespace: "team",
    workflow: "wf",
    uid: "u1",
    node: "train",
    attempt: 2,
};

fn input(key: &str) -> ResolvedInput {
    ResolvedInput {
        name: "data".into(),
        path: "/work/in".into(),
        source: ArtifactSource::Stored(ArtifactRef {
            key: key.into(),
            digest: "sha256:00".into(),
            size: 1,
            kind: "directory".into(),
        }),
    }
}

#[test]
fn the_pod_runs_its_command_under_weft_io_with_the_attempts_urls() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let mut p = pod();
    io.prepare(&mut p, &AT, &task(), &[input("team/up/u0/a/0/out")], false)
        .unwrap();
    let init = &p["spec"]["initContainers"][0];
    assert_eq!(init["name"], CONTAINER);
    assert_eq!(init["image"], "weft:test");
    assert_eq!(init["command"][0], "/bin/weft");
    let main = &p["spec"]["containers"][1];
    let cmd: Vec<&str> = main["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(&cmd[..4], &["/weft/io/bin/weft", "io", "exec", "--plan"]);
    assert_eq!(&cmd[5..], &["--", "sh", "-c", "cat /work/in > /work/model"]);
    assert!(main.get("args").is_none());
    assert_eq!(main["volumeMounts"][0]["mountPath"], "/weft/io");
    assert_eq!(p["spec"]["volumes"][0]["emptyDir"], json!({}));
    // The sidecar is left alone.
    assert_eq!(p["spec"]["containers"][0]["command"][0], "sleep");

    // Each URL is in the pod once, in the container that uses it.
    let (fetch, plan) = (init_plan(&p["spec"]), exec_plan(&p["spec"]));
    assert_eq!(fetch.inputs[0].digest.as_deref(), Some("sha256:00"));
    assert!(
        fetch.inputs[0].url.ends_with("team/up/u0/a/0/out"),
        "{}",
        fetch.inputs[0].url
    );
    assert!(fetch.outputs.is_empty() && fetch.parameters.is_empty());
    assert!(fetch.offload.is_none() && fetch.log.is_none());
    assert_eq!(plan.inputs[0].name, fetch.inputs[0].name);
    assert_eq!(
        (
            plan.inputs[0].url.as_str(),
            plan.inputs[0].digest.as_deref()
        ),
        ("", None)
    );
    assert!(!cmd[4].contains("\"url\":\"\""), "{}", cmd[4]);
    assert_eq!(plan.termination_log, "/dev/termination-log");
    assert_eq!(plan.inputs[0].kind, crate::store::transfer::Kind::Directory);
    assert_eq!(plan.outputs[0].key, "team/wf/u1/train/2/model");
    assert!(plan.outputs[0].url.ends_with("team/wf/u1/train/2/model"));
    assert_eq!(plan.parameters[0].name, "score");

    // The same attempt built again gets the same plan (a Pod cannot change).
    let mut again = pod();
    io.prepare(
        &mut again,
        &AT,
        &task(),
        &[input("team/up/u0/a/0/out")],
        false,
    )
    .unwrap();
    assert_eq!(again, p);
}

#[test]
fn what_cannot_be_wrapped_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let mut p = pod();
    let err = io
        .prepare(&mut p, &AT, &task(), &[input("other/wf/u/a/0/out")], false)
        .unwrap_err();
    assert_eq!(err.reason, "ArtifactNotPermitted");
    assert!(
        err.message.contains("outside namespace team"),
        "{}",
        err.message
    );

    let mut p = pod();
    p["spec"]["containers"][1]["command"] = json!([]);
    let err = io.prepare(&mut p, &AT, &task(), &[], false).unwrap_err();
    assert!(
        err.message.starts_with("container main needs a command"),
        "{}",
        err.message
    );

    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job"});
    let err = io.prepare(&mut job, &AT, &task(), &[], false).unwrap_err();
    assert_eq!(err.reason, "ArtifactsNeedAPod");
}

#[test]
fn outputs_must_come_back_under_the_attempts_keys() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let good = json!({"artifacts": {"model": {"key": "team/wf/u1/train/2/model",
        "digest": "sha256:ab", "size": 2, "kind": "file"}}});
    let good = good.as_object().unwrap();
    let (kept, reference) = io
        .settle_outputs(&AT, &task(), Some(good.clone()), false)
        .unwrap();
    assert_eq!((kept.as_ref(), reference), (Some(good), None));
    let err = io.settle_outputs(&AT, &task(), None, false).unwrap_err();
    assert!(
        err.message
            .contains("output artifact model: the pod did not report it"),
        "{}",
        err.message
    );
    let forged = json!({"artifacts": {"model": {"key": "other/x/u/n/0/model",
        "digest": "sha256:ab", "size": 2, "kind": "file"}}});
    let err = io
        .settle_outputs(&AT, &task(), forged.as_object().cloned(), false)
        .unwrap_err();
    assert!(err.message.contains("not the attempt's"), "{}", err.message);
}

#[test]
fn a_store_fault_exit_is_the_platforms() {
    let mut p = pod();
    p["status"] = json!({"containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": 75}}}]});
    assert!(store_fault(&p));
    p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = 1.into();
    assert!(!store_fault(&p));
    p["status"]["initContainerStatuses"] =
        json!([{"name": CONTAINER, "state": {"terminated": {"exitCode": 75}}}]);
    assert!(store_fault(&p));
}

#[test]
fn outputs_the_pod_uploaded_are_read_back_and_kept_in_the_store_when_large() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path()).with_inline_limit(1000);
    let mut p = pod();
    io.prepare(&mut p, &AT, &task(), &[input("team/up/u0/a/0/out")], false)
        .unwrap();
    let plan = exec_plan(&p["spec"]);
    let offload = plan.offload.clone().unwrap();
    assert_eq!(offload.key, "team/wf/u1/train/2/outputs.json");
    assert_eq!(offload.above, plan::MESSAGE_LIMIT);
    let upload = |outputs: &Value| {
        let bytes = outputs.to_string().into_bytes();
        let digest = crate::store::Digest::of(&bytes);
        std::fs::create_dir_all(dir.path().join("team/wf/u1/train/2")).unwrap();
        std::fs::write(dir.path().join(&offload.key), &bytes).unwrap();
        let r = json!({"key": offload.key, "digest": digest, "size": bytes.len(), "kind": "file"});
        json!({ plan::OFFLOADED_KEY: r }).as_object().cloned()
    };
    let model = json!({"key": "team/wf/u1/train/2/model", "digest": "sha256:ab", "size": 2, "kind": "file"});
    // Small enough for the status: read back and kept inline.
    let small = json!({"n": 1, "artifacts": {"model": model}});
    let (kept, reference) = io
        .settle_outputs(&AT, &task(), upload(&small), false)
        .unwrap();
    assert_eq!((kept, reference), (small.as_object().cloned(), None));
    // Too large: referenced, and the round can read it back.
    let large = json!({"blob": "x".repeat(5000), "artifacts": {"model": model}});
    let (kept, reference) = io
        .settle_outputs(&AT, &task(), upload(&large), false)
        .unwrap();
    assert!(kept.is_none());
    let r = reference.unwrap();
    assert_eq!(
        *io.load_outputs(&r).unwrap(),
        large.as_object().cloned().unwrap()
    );
    // A reference to another key, or bytes that changed, are refused.
    let mut forged = upload(&large).unwrap();
    forged[plan::OFFLOADED_KEY]["key"] = "team/other/u/n/0/outputs.json".into();
    let err = io
        .settle_outputs(&AT, &task(), Some(forged), false)
        .unwrap_err();
    assert_eq!(err.reason, "ArtifactNotReported");
    let mut changed = r.clone();
    changed.digest = "sha256:00".into();
    let err = io.load_outputs(&changed).unwrap_err();
    assert!(err.contains("not sha256:00"), "{err}");
}

#[test]
fn a_pod_that_only_archives_its_log_is_wrapped_when_it_can_be() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let plain: TaskSpec = serde_json::from_value(json!({"type": "pod"})).unwrap();
    let mut p = pod();
    io.prepare(&mut p, &AT, &plain, &[], true).unwrap();
    let plan = exec_plan(&p["spec"]);
    let log = plan.log.unwrap();
    assert_eq!(log.key, "team/wf/u1/train/2/main.log");
    assert!(log.url.ends_with(&log.key), "{}", log.url);
    // No command to wrap (an image's entrypoint): left as built, its log
    // not archived, the task not failed.
    let mut p = pod();
    p["spec"]["containers"][1]["command"] = json!([]);
    let before = p.clone();
    io.prepare(&mut p, &AT, &plain, &[], true).unwrap();
    assert_eq!(p, before);
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job"});
    io.prepare(&mut job, &AT, &plain, &[], true).unwrap();
}

/// A PyTorchJob-like object whose plugin marked its two pod specs.
fn marked_job() -> Value {
    let spec = |cmd: &str| json!({"containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", cmd]}]});
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "j", "annotations": {POD_SPECS_ANNOTATION:
            r#"["/spec/replicas/Master/template/spec","/spec/replicas/Worker/template/spec"]"#}},
        "spec": {"replicas": {"Master": {"template": {"spec": spec("train > /work/model")}},
                              "Worker": {"template": {"spec": spec("work")}}}}})
}

/// The plan `weft io init` gets in the pod spec.
fn init_plan(spec: &Value) -> IoPlan {
    IoPlan::from_arg(spec["initContainers"][0]["command"][4].as_str().unwrap()).unwrap()
}

/// The plan `weft io exec` gets in the pod spec's main container.
fn exec_plan(spec: &Value) -> IoPlan {
    let main = main_container(spec).unwrap();
    IoPlan::from_arg(spec["containers"][main]["command"][4].as_str().unwrap()).unwrap()
}

#[test]
fn a_resources_marked_pod_specs_are_wrapped_the_first_reporting() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let mut job = marked_job();
    io.prepare(&mut job, &AT, &task(), &[input("team/up/u0/a/0/out")], true)
        .unwrap();
    let master = &job["spec"]["replicas"]["Master"]["template"]["spec"];
    let worker = &job["spec"]["replicas"]["Worker"]["template"]["spec"];
    for spec in [master, worker] {
        assert_eq!(spec["initContainers"][0]["name"], CONTAINER);
        assert_eq!(spec["volumes"][0]["name"], CONTAINER);
        let command = &spec["containers"][0]["command"];
        assert_eq!(
            (&command[1], &command[2]),
            (&json!("io"), &json!("exec")),
            "{command}"
        );
    }
    let (first, other) = (exec_plan(master), exec_plan(worker));
    assert_eq!(init_plan(worker).inputs, init_plan(master).inputs);
    assert!(
        init_plan(worker).inputs[0]
            .url
            .contains("team/up/u0/a/0/out")
    );
    assert_eq!(first.inputs.len(), 1);
    assert_eq!(first.outputs[0].key, "team/wf/u1/train/2/model");
    assert_eq!(first.parameters[0].name, "score");
    // Everything reported lands in the store: the controller reads it
    // there (it sees the Job, not its pods' termination messages).
    assert_eq!(first.offload.as_ref().unwrap().above, 0);
    assert!(first.log.is_some());
    assert_eq!(other.inputs, first.inputs);
    assert!(other.outputs.is_empty() && other.parameters.is_empty());
    assert!(other.offload.is_none() && other.log.is_none());
    // The same attempt prepared again (a re-create) gets the same plan.
    let mut again = marked_job();
    io.prepare(
        &mut again,
        &AT,
        &task(),
        &[input("team/up/u0/a/0/out")],
        true,
    )
    .unwrap();
    assert_eq!(again, job);
}

#[test]
fn a_bad_mark_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path());
    let cases = [
        (json!("/spec"), "is not a JSON list of JSON Pointers"),
        (json!("[]"), "lists no pod spec"),
        (
            json!(r#"["/spec/replicas/Master"]"#),
            "names \"/spec/replicas/Master\", which is not a pod spec",
        ),
        (
            json!(r#"["spec"]"#),
            "names \"spec\", which is not a pod spec",
        ),
    ];
    for (mark, says) in cases {
        let mut job = marked_job();
        job["metadata"]["annotations"][POD_SPECS_ANNOTATION] = mark;
        let err = io.prepare(&mut job, &AT, &task(), &[], false).unwrap_err();
        assert_eq!(err.reason, "PodSpecsInvalid");
        assert!(err.message.contains(says), "{}", err.message);
        assert!(
            err.message
                .starts_with("the PyTorchJob's annotation weft.dev/pod-specs"),
            "{}",
            err.message
        );
    }
    // Marked, but the reporting container has no command.
    let mut job = marked_job();
    job["spec"]["replicas"]["Master"]["template"]["spec"]["containers"][0]["command"] = json!([]);
    let err = io.prepare(&mut job, &AT, &task(), &[], false).unwrap_err();
    assert_eq!(err.reason, "ArtifactsNeedACommand");
    assert!(
        err.message
            .starts_with("/spec/replicas/Master/template/spec: container main needs a command"),
        "{}",
        err.message
    );
}

#[test]
fn a_resources_outputs_come_from_the_store_with_its_plugins_own() {
    let dir = tempfile::tempdir().unwrap();
    let io = io(dir.path()).with_inline_limit(1000);
    let err = io.settle_outputs(&AT, &task(), None, true).unwrap_err();
    assert_eq!(err.reason, "ArtifactNotReported");
    assert!(
        err.message
            .contains("no pod of the task's resource reported them"),
        "{}",
        err.message
    );
    let model = json!({"key": "team/wf/u1/train/2/model", "digest": "sha256:ab", "size": 2, "kind": "file"});
    let put = |outputs: &Value| {
        std::fs::create_dir_all(dir.path().join("team/wf/u1/train/2")).unwrap();
        let bytes = outputs.to_string().into_bytes();
        std::fs::write(dir.path().join("team/wf/u1/train/2/outputs.json"), &bytes).unwrap();
        bytes
    };
    put(&json!({"score": 0.9, "artifacts": {"model": model}}));
    // The plugin's own outputs (read from the Job's status) join the pod's.
    let own = json!({"succeeded": 1}).as_object().cloned();
    let (kept, reference) = io.settle_outputs(&AT, &task(), own.clone(), true).unwrap();
    let want = json!({"succeeded": 1, "score": 0.9, "artifacts": {"model": model}});
    assert_eq!((kept, reference), (want.as_object().cloned(), None));
    // Large: referenced when all of it is in the store, inline otherwise.
    let large = json!({"blob": "x".repeat(5000), "artifacts": {"model": model}});
    let bytes = put(&large);
    let (kept, reference) = io.settle_outputs(&AT, &task(), None, true).unwrap();
    assert!(kept.is_none());
    let r = reference.unwrap();
    assert_eq!(
        (r.key.as_str(), r.size),
        ("team/wf/u1/train/2/outputs.json", bytes.len() as u64)
    );
    assert_eq!(
        *io.load_outputs(&r).unwrap(),
        large.as_object().cloned().unwrap()
    );
    let (kept, reference) = io.settle_outputs(&AT, &task(), own, true).unwrap();
    assert!(reference.is_none());
    assert_eq!(kept.unwrap()["succeeded"], 1);
    // Reported without the declared artifact: refused as for a Pod.
    put(&json!({"score": 1}));
    let err = io.settle_outputs(&AT, &task(), None, true).unwrap_err();
    assert!(
        err.message
            .contains("output artifact model: the pod did not report it"),
        "{}",
        err.message
    );
}
