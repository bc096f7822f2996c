use std::path::{Path, PathBuf};
use std::time::Duration;

use object_store::signer::Method;

use super::*;
use crate::store::plan::PlannedOutput;
use crate::store::{ArtifactRepository, LocalRepository, Store, archive, attempt_key};

/// A local repository, an io directory and the task's filesystem, all
/// under one temporary directory.
struct Bed {
    tmp: tempfile::TempDir,
    store: Store,
}

impl Bed {
    fn new() -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        let repo = ArtifactRepository {
            local: Some(LocalRepository {
                path: tmp.path().join("repo"),
                prefix: "weft".into(),
            }),
            ..Default::default()
        };
        let store = Store::open(&repo, None).unwrap();
        Bed { tmp, store }
    }

    /// A path under the temporary directory, as a string (plans hold
    /// strings).
    fn at(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    async fn url(&self, method: Method, key: &str) -> String {
        let url = self.store.presign(method, key, Duration::from_secs(60));
        url.await.unwrap().to_string()
    }

    /// A plan with no artifacts yet.
    fn plan(&self) -> IoPlan {
        IoPlan {
            dir: self.at("io"),
            termination_log: self.at("dev/termination-log"),
            ..Default::default()
        }
    }

    /// Stores `bytes` under `key` and plans it as input `name` at `path`.
    async fn input(&self, plan: &mut IoPlan, name: &str, kind: Kind, bytes: Vec<u8>) -> Digest {
        let key = format!("in/{name}");
        let stored = self.store.put_bytes(&key, bytes).await.unwrap();
        plan.inputs.push(PlannedInput {
            name: name.into(),
            path: self.at(&format!("task/in/{name}")),
            kind,
            url: self.url(Method::GET, &key).await,
            digest: Some(stored.digest.to_string()),
        });
        stored.digest
    }

    /// Plans output `name`, left by the task at `task/out/<name>`.
    async fn output(&self, plan: &mut IoPlan, name: &str) -> String {
        let key = attempt_key("ns", "wf", "uid", "train", 1, name);
        plan.outputs.push(PlannedOutput {
            name: name.into(),
            path: self.at(&format!("task/out/{name}")),
            url: self.url(Method::PUT, &key).await,
            key: key.clone(),
        });
        key
    }

    fn termination_message(&self) -> String {
        std::fs::read_to_string(self.path("dev/termination-log")).unwrap_or_default()
    }

    /// `weft io init` with a small stand-in for the weft binary.
    async fn init(&self, plan: &IoPlan) -> Result<(), Fault> {
        let binary = self.path("weft-binary");
        std::fs::write(&binary, b"#!/bin/sh\n").unwrap();
        init(plan, &binary).await
    }
}

#[tokio::test]
async fn init_links_an_executable_binary_on_the_same_disk_and_copies_otherwise() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let bed = Bed::new();
    let plan = bed.plan();
    let installed = bed.path("io/bin/weft");
    let binary = bed.path("weft-binary");
    std::fs::write(&binary, b"#!/bin/sh\n").unwrap();
    init(&plan, &binary).await.unwrap();
    let (src, dst) = (binary.metadata().unwrap(), installed.metadata().unwrap());
    assert_ne!(src.ino(), dst.ino(), "a binary without x bits is copied");
    assert_eq!(dst.permissions().mode() & 0o777, 0o755);

    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    init(&plan, &binary).await.unwrap();
    let (src, dst) = (binary.metadata().unwrap(), installed.metadata().unwrap());
    assert_eq!(
        src.ino(),
        dst.ino(),
        "an executable on the same disk is linked"
    );
    assert!(!bed.path("io/bin/weft.installing").exists());
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// `exec` without taking over the test process's signals.
async fn exec(plan: &IoPlan, command: &[String]) -> i32 {
    exec_with(plan, command, false).await
}

use crate::store::tests::tree;

fn packed(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    archive::pack_dir(dir, &mut bytes).unwrap();
    bytes
}

#[tokio::test]
async fn init_and_exec_move_inputs_in_and_outputs_out_and_report_them() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let data_digest = bed.input(&mut plan, "data", Kind::File, data.clone()).await;
    let config = bed.path("config-src");
    std::fs::create_dir_all(config.join("sub")).unwrap();
    std::fs::write(config.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(config.join("sub/b.txt"), "beta\n").unwrap();
    let config_digest = bed
        .input(&mut plan, "config", Kind::Directory, packed(&config))
        .await;
    let model_key = bed.output(&mut plan, "model").await;
    let shards_key = bed.output(&mut plan, "shards").await;
    for (name, file) in [("accuracy", "acc"), ("label", "label")] {
        plan.parameters.push(PlannedParameter {
            name: name.into(),
            path: bed.at(&format!("task/out/{file}")),
        });
    }
    // The plan goes through its command-line forms, as in a pod: init's
    // without the outputs, exec's without the inputs' URLs.
    let arg = |p: IoPlan| IoPlan::from_arg(&p.to_arg()).unwrap();
    let (fetch, plan) = (arg(plan.inputs_only()), arg(plan.for_exec()));

    bed.init(&fetch).await.unwrap();
    let installed = bed.path("io/bin/weft");
    assert_eq!(std::fs::read(&installed).unwrap(), b"#!/bin/sh\n");
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);

    let (input, output, log) = (bed.at("task/in"), bed.at("task/out"), bed.at("dev"));
    let script = format!(
        "set -e; mkdir -p '{output}'; cd '{output}'
         cat '{input}/data' '{input}/config/a.txt' '{input}/config/sub/b.txt' > model
         mkdir shards; i=0
         while [ $i -lt 20 ]; do echo \"shard $i\" > shards/part-$i; i=$((i+1)); done
         printf '0.93\\n' > acc; printf '  best run \\n' > label
         mkdir -p '{log}'
         printf '{{\"rows\": 42, \"note\": \"from the command\"}}' > '{log}/termination-log'"
    );
    assert_eq!(exec(&plan, &sh(&script)).await, 0);

    // The inputs arrived whole, at their declared paths, as links.
    for name in ["data", "config"] {
        let link = bed.path(&format!("task/in/{name}"));
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            bed.path("io/inputs").join(name)
        );
    }
    let linked = std::fs::read(bed.path("task/in/data")).unwrap();
    assert_eq!(Digest::of(&linked), data_digest);
    assert_eq!(tree(&bed.path("task/in/config")), tree(&config));
    assert_eq!(
        Digest::of(&packed(&bed.path("task/in/config"))),
        config_digest
    );

    // The termination message: the command's outputs, the parameters, and
    // the artifacts as the store holds them.
    let message: Value = serde_json::from_str(&bed.termination_message()).unwrap();
    assert_eq!(message["rows"], 42);
    assert_eq!(message["note"], "from the command");
    assert_eq!(message["accuracy"], 0.93);
    assert_eq!(message["label"], "best run");
    let artifacts = &message["artifacts"];
    let model = bed.store.get_bytes(&model_key).await.unwrap();
    let mut expected_model = data.clone();
    expected_model.extend_from_slice(b"alpha\nbeta\n");
    assert_eq!(model, expected_model);
    let shards = bed.store.get_bytes(&shards_key).await.unwrap();
    for (name, key, bytes, kind) in [
        ("model", &model_key, &model, "file"),
        ("shards", &shards_key, &shards, "directory"),
    ] {
        let reference: ArtifactRef = serde_json::from_value(artifacts[name].clone()).unwrap();
        let expected = ArtifactRef {
            key: key.clone(),
            digest: Digest::of(bytes).to_string(),
            size: bytes.len() as u64,
            kind: kind.into(),
        };
        assert_eq!(reference, expected, "{name}");
    }
    let unpacked = bed.path("shards-back");
    archive::unpack_dir(&shards[..], &unpacked).unwrap();
    let files = tree(&unpacked);
    assert_eq!(files.len(), 20);
    assert!(files.contains(&("part-7".into(), b"shard 7\n".to_vec())));
}

#[tokio::test]
async fn a_missing_output_fails_the_task_naming_it_and_references_nothing() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.output(&mut plan, "metrics").await;
    bed.output(&mut plan, "model").await;
    let out = bed.at("task/out");
    let script = format!("mkdir -p '{out}' && echo '{{}}' > '{out}/metrics'");
    assert_eq!(exec(&plan, &sh(&script)).await, EXIT_TASK_FAULT);
    assert_eq!(
        bed.termination_message(),
        format!("output artifact model: path {out}/model does not exist")
    );
}

#[tokio::test]
async fn a_failing_command_keeps_its_code_and_uploads_nothing() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.output(&mut plan, "model").await;
    let out = bed.at("task/out");
    let log = &plan.termination_log;
    let script = format!(
        "mkdir -p '{out}' && echo partial > '{out}/model'
         mkdir -p \"$(dirname '{log}')\" && echo 'out of memory' > '{log}'; exit 3"
    );
    assert_eq!(exec(&plan, &sh(&script)).await, 3);
    assert_eq!(bed.termination_message(), "out of memory\n");
    assert_eq!(exec(&plan, &sh("kill -9 $$")).await, 128 + 9);
    assert!(bed.store.list("ns").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_command_that_is_not_there_exits_127_naming_it() {
    let bed = Bed::new();
    let plan = bed.plan();
    let command = vec!["/nonexistent/train".to_string()];
    assert_eq!(exec(&plan, &command).await, 127);
    let message = bed.termination_message();
    assert!(
        message.starts_with("command /nonexistent/train: "),
        "{message}"
    );
}

#[tokio::test]
async fn a_text_termination_message_is_not_taken_for_outputs() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    let model_key = bed.output(&mut plan, "model").await;
    let (out, log) = (bed.at("task/out"), &plan.termination_log);
    let script = format!(
        "mkdir -p '{out}' \"$(dirname '{log}')\" && echo weights > '{out}/model'
         echo 'done: all good' > '{log}'"
    );
    assert_eq!(exec(&plan, &sh(&script)).await, 0);
    let message: Value = serde_json::from_str(&bed.termination_message()).unwrap();
    let keys: Vec<&String> = message.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["artifacts"]);
    assert_eq!(message["artifacts"]["model"]["key"], model_key.as_str());
}

#[tokio::test]
async fn an_input_with_another_digest_fails_the_task_and_is_removed() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.input(&mut plan, "data", Kind::File, b"what is stored".to_vec())
        .await;
    let recorded = Digest::of(b"what was uploaded");
    plan.inputs[0].digest = Some(recorded.to_string());
    let fault = bed.init(&plan).await.unwrap_err();
    assert_eq!(fault.code, EXIT_TASK_FAULT);
    assert!(
        fault
            .message
            .starts_with("input artifact data: digest mismatch")
            && fault.message.contains(&recorded.to_string()),
        "{fault}"
    );
    assert!(!bed.path("io/inputs/data").exists());
}

#[tokio::test]
async fn an_input_over_the_size_limit_fails_naming_its_size_and_the_limit() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.input(&mut plan, "small", Kind::File, vec![1; 100])
        .await;
    bed.input(&mut plan, "big", Kind::File, vec![2; 5000]).await;
    plan.max_size = Some(1000);
    let fault = bed.init(&plan).await.unwrap_err();
    assert_eq!(
        fault,
        Fault {
            message: "input artifact big: 5000 bytes is over the limit of 1000 bytes".into(),
            code: EXIT_TASK_FAULT,
        }
    );
    assert!(!bed.path("io/inputs/big").exists());
}

#[tokio::test]
async fn an_input_whose_path_exists_is_refused_before_the_command_runs() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.input(&mut plan, "data", Kind::File, b"x".to_vec())
        .await;
    bed.init(&plan).await.unwrap();
    std::fs::create_dir_all(bed.path("task/in/data")).unwrap();
    let ran = bed.path("ran");
    let command = sh(&format!("touch '{}'", ran.display()));
    assert_eq!(exec(&plan, &command).await, EXIT_TASK_FAULT);
    assert_eq!(
        bed.termination_message(),
        format!(
            "input artifact data: path {} already exists",
            plan.inputs[0].path
        )
    );
    assert!(!ran.exists());
}

#[tokio::test]
async fn a_store_that_refuses_an_upload_is_the_store_fault() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    bed.output(&mut plan, "model").await;
    // A file where the store's directory should be: the upload cannot
    // create the object.
    let url = url::Url::parse(&plan.outputs[0].url).unwrap();
    let blocked = url.to_file_path().unwrap();
    let parent = blocked.parent().unwrap();
    std::fs::create_dir_all(parent.parent().unwrap()).unwrap();
    std::fs::write(parent, "not a directory").unwrap();
    let out = bed.at("task/out");
    let script = format!("mkdir -p '{out}' && echo weights > '{out}/model'");
    assert_eq!(exec(&plan, &sh(&script)).await, EXIT_STORE_FAULT);
    let message = bed.termination_message();
    assert!(message.starts_with("output artifact model: "), "{message}");
}

#[tokio::test]
async fn a_forwarded_sigterm_reaches_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'exit 7' TERM; touch '{}'; while :; do sleep 0.05; done",
        ready.display()
    );
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    while !ready.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    forward(&mut child, rustix::process::Signal::TERM).await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait());
    assert_eq!(exit_code(status.await.unwrap().unwrap()), 7);
}

#[tokio::test]
async fn the_log_is_archived_whatever_the_exit_and_large_outputs_are_offloaded() {
    let bed = Bed::new();
    let mut plan = bed.plan();
    plan.log = Some(crate::store::plan::PlannedLog {
        url: bed.url(Method::PUT, "ns/wf/uid/train/1/main.log").await,
        key: "ns/wf/uid/train/1/main.log".into(),
    });
    let code = exec(&plan, &sh("echo to stdout; echo to stderr >&2; exit 3")).await;
    assert_eq!(code, 3);
    let log = bed
        .store
        .get_bytes("ns/wf/uid/train/1/main.log")
        .await
        .unwrap();
    let log = String::from_utf8(log).unwrap();
    assert!(
        log.contains("to stdout\n") && log.contains("to stderr\n"),
        "{log:?}"
    );

    // Outputs over the message's limit go to the store; the message holds
    // their reference.
    let mut plan = bed.plan();
    plan.offload = Some(crate::store::plan::Offload {
        url: bed.url(Method::PUT, "ns/wf/uid/train/1/outputs.json").await,
        key: "ns/wf/uid/train/1/outputs.json".into(),
        above: 100,
    });
    let big = "x".repeat(500);
    let log = &plan.termination_log;
    let script = format!("mkdir -p $(dirname {log}); printf '{{\"big\": \"{big}\"}}' > {log}");
    assert_eq!(exec(&plan, &sh(&script)).await, 0);
    let message: Value = serde_json::from_str(&bed.termination_message()).unwrap();
    let r: ArtifactRef =
        serde_json::from_value(message[crate::store::plan::OFFLOADED_KEY].clone()).unwrap();
    assert_eq!(r.key, "ns/wf/uid/train/1/outputs.json");
    let stored = bed.store.get_bytes(&r.key).await.unwrap();
    assert_eq!(Digest::of(&stored).as_str(), r.digest);
    let stored: Value = serde_json::from_slice(&stored).unwrap();
    assert_eq!(stored["big"], big.as_str());
}
