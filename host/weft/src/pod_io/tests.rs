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

    let plan = IoPlan::from_arg(cmd[4]).unwrap();
    assert_eq!(
        plan,
        IoPlan::from_arg(init["command"][4].as_str().unwrap()).unwrap()
    );
    assert_eq!(plan.termination_log, "/dev/termination-log");
    assert_eq!(plan.inputs[0].kind, crate::store::transfer::Kind::Directory);
    assert_eq!(plan.inputs[0].digest.as_deref(), Some("sha256:00"));
    assert!(
        plan.inputs[0].url.ends_with("team/up/u0/a/0/out"),
        "{}",
        plan.inputs[0].url
    );
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
    let (kept, reference) = io.settle_outputs(&AT, &task(), Some(good.clone())).unwrap();
    assert_eq!((kept.as_ref(), reference), (Some(good), None));
    let err = io.settle_outputs(&AT, &task(), None).unwrap_err();
    assert!(
        err.message
            .contains("output artifact model: the pod did not report it"),
        "{}",
        err.message
    );
    let forged = json!({"artifacts": {"model": {"key": "other/x/u/n/0/model",
        "digest": "sha256:ab", "size": 2, "kind": "file"}}});
    let err = io
        .settle_outputs(&AT, &task(), forged.as_object().cloned())
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
    let plan = IoPlan::from_arg(
        p["spec"]["initContainers"][0]["command"][4]
            .as_str()
            .unwrap(),
    )
    .unwrap();
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
    let (kept, reference) = io.settle_outputs(&AT, &task(), upload(&small)).unwrap();
    assert_eq!((kept, reference), (small.as_object().cloned(), None));
    // Too large: referenced, and the round can read it back.
    let large = json!({"blob": "x".repeat(5000), "artifacts": {"model": model}});
    let (kept, reference) = io.settle_outputs(&AT, &task(), upload(&large)).unwrap();
    assert!(kept.is_none());
    let r = reference.unwrap();
    assert_eq!(
        *io.load_outputs(&r).unwrap(),
        large.as_object().cloned().unwrap()
    );
    // A reference to another key, or bytes that changed, are refused.
    let mut forged = upload(&large).unwrap();
    forged[plan::OFFLOADED_KEY]["key"] = "team/other/u/n/0/outputs.json".into();
    let err = io.settle_outputs(&AT, &task(), Some(forged)).unwrap_err();
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
    let plan = IoPlan::from_arg(
        p["spec"]["initContainers"][0]["command"][4]
            .as_str()
            .unwrap(),
    )
    .unwrap();
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
