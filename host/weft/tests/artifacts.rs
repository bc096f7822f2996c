//! Artifacts end to end (issue 42): workflows created with kubectl, a real
//! `weft controller` process whose `--artifact-repository` is a real S3
//! server (SeaweedFS, one for the file) with credentials from a Secret,
//! and pods that move their files with `weft io` and presigned URLs only.
//! On the dev cluster and, with `WEFT_TEST_CLUSTER=k8s`, on kube-apiserver
//! with `weft node` running the pods.

mod common;

use std::time::Duration;

use common::pod_task as task;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use weft::api::Workflow;
use weft::store::Digest;
use weft_dag::WorkflowPhase;
use weft_dag::artifacts::ArtifactRef;

fn from(node: &str, name: &str, path: &str) -> Value {
    json!({"name": name, "path": path, "from": format!("${{nodes.{node}.outputs.artifacts.{name}}}")})
}

/// A bed, a bucket's repository file and its Secret, and a controller
/// process using them.
struct S3Bed {
    bed: common::cluster::Bed,
    store: weft::store::Store,
    _controller: common::ControllerProcess,
}

async fn s3_bed(bucket: &str) -> S3Bed {
    s3_bed_with(bucket, &[]).await
}

/// [`s3_bed`] with more controller flags.
async fn s3_bed_with(bucket: &str, flags: &[&str]) -> S3Bed {
    let bed = common::cluster::Bed::start().await;
    let file = bed.path("artifact-repository.yaml");
    common::s3::secret_repository_file(bucket, &file);
    let secret = &common::s3::server().credentials.secret_access_key;
    common::s3::apply_secret(&bed.kubeconfig, &bed.ns, secret).await;
    let mut args = vec![
        "--artifact-repository",
        file.to_str().unwrap(),
        "--io-binary",
        env!("CARGO_BIN_EXE_weft"),
    ];
    args.extend(flags);
    let controller = bed.controller("artifacts", &args);
    S3Bed {
        store: common::s3::store(bucket),
        bed,
        _controller: controller,
    }
}

impl S3Bed {
    async fn create(&self, name: &str, nodes: Value) {
        self.create_spec(name, json!({ "nodes": nodes })).await
    }

    async fn create_spec(&self, name: &str, spec: Value) {
        let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": self.bed.ns}, "spec": spec});
        common::kubectl_ok(
            &self.bed.kubeconfig,
            &["create", "-f", "-"],
            Some(&wf.to_string()),
        )
        .await;
    }

    async fn finish(&self, name: &str, secs: u64) -> Workflow {
        let api: Api<Workflow> = Api::namespaced(self.bed.client.clone(), &self.bed.ns);
        for _ in 0..secs * 5 {
            if let Ok(w) = api.get(name).await
                && w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
            {
                return w;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "workflow {name} did not finish in {secs} s: {:#?}",
            api.get(name).await.ok().and_then(|w| w.status)
        );
    }

    async fn pods(&self, workflow: &str) -> Vec<Value> {
        let api: Api<Pod> = Api::namespaced(self.bed.client.clone(), &self.bed.ns);
        let lp = ListParams::default().labels(&format!("weft.dev/workflow={workflow}"));
        let pods = api.list(&lp).await.unwrap().items;
        pods.iter()
            .map(|p| serde_json::to_value(p).unwrap())
            .collect()
    }
}

fn artifact(wf: &Workflow, node: &str, name: &str) -> ArtifactRef {
    let st = common::node(wf, node);
    let v = &st.outputs.as_ref().expect("outputs")["artifacts"][name];
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{node}.{name}: {e}: {v}"))
}

fn outputs(wf: &Workflow, node: &str) -> serde_json::Map<String, Value> {
    common::node(wf, node).outputs.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_passes_a_large_file_and_a_directory_with_no_credentials_in_its_pods() {
    let t = s3_bed("pipeline").await;
    let make = task(
        "head -c 209715200 /dev/urandom > /work/big.bin && mkdir -p /work/dir && \
         for i in $(seq 1 1000); do echo \"file $i\" > /work/dir/f$i.txt; done && \
         sha256sum /work/big.bin | cut -d' ' -f1 > /work/sha",
        json!({"outputs": {"artifacts": [{"name": "big", "path": "/work/big.bin"}, {"name": "dir", "path": "/work/dir"}],
                           "parameters": [{"name": "sha", "path": "/work/sha"}]}}),
    );
    let pass = task(
        "cp /work/in.bin /work/out.bin && cp -rL /work/indir /work/outdir",
        json!({"inputs": {"artifacts": [from("make", "big", "/work/in.bin"), from("make", "dir", "/work/indir")]},
               "outputs": {"artifacts": [{"name": "big", "path": "/work/out.bin"}, {"name": "dir", "path": "/work/outdir"}]}}),
    );
    let check = task(
        "env > /work/env.txt; s=$(sha256sum /work/big.bin | cut -d' ' -f1); n=$(ls /work/dir | wc -l); \
         echo \"{\\\"sha\\\": \\\"$s\\\", \\\"files\\\": $n}\" > /dev/termination-log",
        json!({"inputs": {"artifacts": [from("pass", "big", "/work/big.bin"), from("pass", "dir", "/work/dir")]},
               "outputs": {"parameters": [{"name": "env", "path": "/work/env.txt"}]}}),
    );
    let nodes = json!([{"id": "make", "task": make},
        {"id": "pass", "dependsOn": ["make"], "task": pass},
        {"id": "check", "dependsOn": ["pass"], "task": check}]);
    t.create("pipeline", nodes).await;
    let wf = t.finish("pipeline", 300).await;
    let status = wf.status.clone().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Succeeded, "{status:#?}");

    // The file: the same bytes at every hop, as the store holds them.
    let sha = outputs(&wf, "make")["sha"].as_str().unwrap().to_string();
    let (made, passed) = (artifact(&wf, "make", "big"), artifact(&wf, "pass", "big"));
    assert_eq!(made.digest, format!("sha256:{sha}"));
    assert_eq!(passed.digest, made.digest);
    assert_eq!(made.size, 200 << 20);
    assert_eq!(made.kind, "file");
    assert_eq!(outputs(&wf, "check")["sha"], sha.as_str());
    let ns = &t.bed.ns;
    let uid = wf.metadata.uid.clone().unwrap();
    assert_eq!(made.key, format!("{ns}/pipeline/{uid}/make/0/big"));
    // The directory: 1,000 files arrive; the archive's digest is the
    // store's object's.
    assert_eq!(outputs(&wf, "check")["files"], 1000);
    let dir = artifact(&wf, "pass", "dir");
    assert_eq!(dir.kind, "directory");
    let stored = t.store.get_bytes(&dir.key).await.unwrap();
    assert_eq!(Digest::of(&stored).as_str(), dir.digest);
    assert_eq!(stored.len() as u64, dir.size);
    // Four objects, under the workflow's keys.
    let keys = t
        .store
        .list(&format!("{ns}/pipeline/{uid}/"))
        .await
        .unwrap();
    assert_eq!(keys.len(), 4, "{keys:?}");

    // No credentials in any pod: not in its spec (env, args, volumes),
    // not in the environment its command saw.
    let creds = &common::s3::server().credentials;
    let pods = t.pods("pipeline").await;
    assert_eq!(pods.len(), 3);
    for p in &pods {
        let text = p.to_string();
        assert!(
            !text.contains(&creds.secret_access_key),
            "a pod holds the secret key"
        );
        // The access key id is in the presigned URLs (X-Amz-Credential
        // names the signer); the secret that signs never leaves the
        // controller, and no AWS_ variable is set.
        assert!(!text.contains("AWS_"), "a pod has AWS_ variables: {text}");
        assert_eq!(p["spec"]["initContainers"][0]["name"], "weft-io");
    }
    let env = outputs(&wf, "check")["env"].as_str().unwrap().to_string();
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains(&creds.secret_access_key));
    assert!(!env.contains("AWS_"), "{env}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_artifacts_fail_the_node_naming_them_and_keep_what_was_uploaded() {
    let t = s3_bed("faults").await;
    // One output exists, the other does not: the node fails naming the
    // missing one, and nothing is referenced.
    let half = task(
        "echo kept > /work/a.txt",
        json!({"outputs": {"artifacts": [{"name": "a", "path": "/work/a.txt"}, {"name": "b", "path": "/work/missing"}]}}),
    );
    t.create("missing-output", json!([{"id": "half", "task": half}]))
        .await;
    let wf = t.finish("missing-output", 120).await;
    let st = common::node(&wf, "half");
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    let msg = st.message.clone().unwrap_or_default();
    assert!(
        msg.contains("output artifact b") && msg.contains("/work/missing"),
        "{msg}"
    );
    assert!(st.outputs.is_none(), "{:?}", st.outputs);

    // An input whose `from` is not an artifact fails before any pod.
    let num = task("echo '{\"n\": 4}' > /dev/termination-log", json!({}));
    let wrong = task(
        "true",
        json!({"inputs": {"artifacts": [{"name": "data", "path": "/work/d", "from": "${nodes.num.outputs.n}"}]}}),
    );
    t.create(
        "not-an-artifact",
        json!([{"id": "num", "task": num}, {"id": "use", "dependsOn": ["num"], "task": wrong}]),
    )
    .await;
    let wf = t.finish("not-an-artifact", 120).await;
    let st = common::node(&wf, "use");
    let msg = st.message.clone().unwrap_or_default();
    assert_eq!(st.reason.as_deref(), Some("InputError"), "{msg}");
    assert!(
        msg.starts_with("input artifact data: ${nodes.num.outputs.n} gives 4, not an artifact"),
        "{msg}"
    );
    assert_eq!(t.pods("not-an-artifact").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_misses_on_new_content_and_hits_on_a_new_name() {
    let t = s3_bed("cache").await;
    let produce = |text: &str| {
        task(
            &format!("echo {text} > /work/f"),
            json!({"outputs": {"artifacts": [{"name": "f", "path": "/work/f"}]}}),
        )
    };
    let consume = |name: &str| {
        let mut c = task(
            &format!(
                "echo \"{{\\\"got\\\": \\\"$(cat /work/{name})\\\"}}\" > /dev/termination-log"
            ),
            json!({"inputs": {"artifacts": [{"name": name, "path": format!("/work/{name}"),
                "from": "${nodes.produce.outputs.artifacts.f}"}]}}),
        );
        c["config"]["podSpec"]["containers"][0]["command"][2] =
            "echo \"{\\\"got\\\": \\\"$(cat /work/*)\\\"}\" > /dev/termination-log".into();
        c
    };
    let run = |wf: &'static str, text: &'static str, name: &'static str| {
        let nodes = json!([{"id": "produce", "task": produce(text)},
            {"id": "consume", "dependsOn": ["produce"], "cache": {"version": "1"}, "task": consume(name)}]);
        (wf, nodes)
    };
    let mut cached = Vec::new();
    for (wf, nodes) in [
        run("first", "one", "data"),
        run("renamed", "one", "input"),
        run("changed", "two", "data"),
    ] {
        t.create(wf, nodes).await;
        let done = t.finish(wf, 120).await;
        let status = done.status.as_ref().unwrap();
        assert_eq!(status.phase, WorkflowPhase::Succeeded, "{wf}: {status:#?}");
        let st = common::node(&done, "consume");
        cached.push((st.cached, outputs(&done, "consume")["got"].clone()));
    }
    assert_eq!(
        cached,
        vec![
            (false, json!("one")),
            (true, json!("one")),
            (false, json!("two"))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_json_output_stays_in_the_store_and_flows_downstream() {
    let t = s3_bed("large-outputs").await;
    // 100 KiB of JSON (one string) from a file: too large for a
    // termination message, and over the 32 KiB the status keeps inline.
    let big = task(
        "head -c 76800 /dev/urandom | base64 -w0 > /work/raw && \
         printf '\"%s\"' \"$(cat /work/raw)\" > /work/blob.json && \
         sha256sum /work/raw | cut -d' ' -f1 > /work/sha",
        json!({"outputs": {"parameters": [{"name": "blob", "path": "/work/blob.json"},
                                          {"name": "sha", "path": "/work/sha"}]}}),
    );
    let mut use_it = task(
        "s=$(printf %s \"$WEFT_INPUT_BLOB\" | sha256sum | cut -d' ' -f1); \
         echo \"{\\\"sha\\\": \\\"$s\\\", \\\"length\\\": ${#WEFT_INPUT_BLOB}}\" > /dev/termination-log",
        json!({}),
    );
    use_it["config"]["podSpec"]["containers"][0]["command"][0] = "bash".into();
    let nodes = json!([{"id": "big", "task": big},
        {"id": "use", "dependsOn": ["big"], "inputs": {"blob": "${nodes.big.outputs.blob}"}, "task": use_it}]);
    t.create("large", nodes).await;
    let wf = t.finish("large", 120).await;
    let status = wf.status.clone().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Succeeded, "{status:#?}");
    let big = common::node(&wf, "big");
    assert!(big.outputs.is_none(), "the outputs are inline");
    let r = big.outputs_ref.clone().expect("outputsRef");
    assert!(r.size > 100 << 10, "{r:?}");
    let stored = t.store.get_bytes(&r.key).await.unwrap();
    assert_eq!(Digest::of(&stored).as_str(), r.digest);
    let stored: serde_json::Map<String, Value> = serde_json::from_slice(&stored).unwrap();
    let used = outputs(&wf, "use");
    assert_eq!(used["length"], 102400);
    assert_eq!(used["sha"], stored["sha"]);
    // The Workflow object itself stays small.
    let text = common::kubectl_ok(
        &t.bed.kubeconfig,
        &["get", "workflow", "large", "-n", &t.bed.ns, "-o", "json"],
        None,
    )
    .await;
    assert!(
        text.len() < 64 << 10,
        "the Workflow is {} bytes",
        text.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_logs_outlive_their_pods() {
    let t = s3_bed("logs").await;
    let talk = task(
        "for i in 1 2 3; do echo \"line $i\"; done; echo oops >&2",
        json!({}),
    );
    let fail = task("echo about to fail; exit 4", json!({}));
    let spec = json!({"archiveLogs": true, "podGC": {"strategy": "OnPodCompletion"},
        "failurePolicy": "FailAfterExecutableNodesComplete",
        "nodes": [{"id": "talk", "task": talk}, {"id": "fail", "task": fail}]});
    t.create_spec("chatty", spec).await;
    let wf = t.finish("chatty", 120).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    for _ in 0..100 {
        if t.pods("chatty").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(t.pods("chatty").await.is_empty(), "pod GC left pods");
    let uid = wf.metadata.uid.clone().unwrap();
    let ns = &t.bed.ns;
    let log = |node: &str| format!("{ns}/chatty/{uid}/{node}/0/main.log");
    let talked = String::from_utf8(t.store.get_bytes(&log("talk")).await.unwrap()).unwrap();
    // Both streams, each in its own order (they interleave as they come).
    for line in ["line 1\n", "line 2\n", "line 3\n", "oops\n"] {
        assert!(talked.contains(line), "{talked:?}");
    }
    assert!(talked.find("line 1").unwrap() < talked.find("line 3").unwrap());
    let failed = String::from_utf8(t.store.get_bytes(&log("fail")).await.unwrap()).unwrap();
    assert_eq!(failed, "about to fail\n");
}

/// The namespace's ConfigMap `weft-artifact-repository` (YAML under
/// `repository`, credentials from Secrets of the namespace).
async fn namespace_repository(t: &S3Bed, repository: &str) {
    let s3 = common::s3::server();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "team-s3", "namespace": t.bed.ns},
        "stringData": {"id": s3.credentials.access_key_id, "key": s3.credentials.secret_access_key}});
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "weft-artifact-repository", "namespace": t.bed.ns,
                     "labels": {"weft.dev/artifact-repository": "true"}},
        "data": {"repository": repository}});
    for o in [secret, cm] {
        common::kubectl_ok(
            &t.bed.kubeconfig,
            &["apply", "-f", "-"],
            Some(&o.to_string()),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_keeps_its_artifacts_in_its_own_repository() {
    let t = s3_bed("controller-default").await;
    let endpoint = &common::s3::server().endpoint;
    let repository = format!(
        "s3: {{endpoint: '{endpoint}', bucket: team-bucket, insecure: true, prefix: team, \
         accessKeySecret: {{name: team-s3, key: id}}, secretKeySecret: {{name: team-s3, key: key}}}}"
    );
    namespace_repository(&t, &repository).await;
    let write = task(
        "echo ours > /work/f",
        json!({"outputs": {"artifacts": [{"name": "f", "path": "/work/f"}]}}),
    );
    t.create("own", json!([{"id": "write", "task": write}]))
        .await;
    let wf = t.finish("own", 120).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    let f = artifact(&wf, "write", "f");
    let team = weft::store::Store::open(
        &weft::store::ArtifactRepository::parse("team", &repository.replace("team-s3", "x"))
            .unwrap(),
        Some(&common::s3::server().credentials),
    )
    .unwrap();
    assert_eq!(team.get_bytes(&f.key).await.unwrap(), b"ours\n");
    assert!(
        t.store.get_bytes(&f.key).await.is_err(),
        "also in the controller's bucket"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_namespace_repository_fails_the_task_naming_it() {
    let t = s3_bed("controller-default-2").await;
    namespace_repository(&t, "s3: {bucket: b, endpiont: 'http://x'}").await;
    let write = task(
        "echo x > /work/f",
        json!({"outputs": {"artifacts": [{"name": "f", "path": "/work/f"}]}}),
    );
    t.create("bad-repo", json!([{"id": "write", "task": write}]))
        .await;
    let wf = t.finish("bad-repo", 120).await;
    let st = common::node(&wf, "write");
    assert_eq!(st.reason.as_deref(), Some("ArtifactRepositoryInvalid"));
    let msg = st.message.clone().unwrap_or_default();
    assert!(
        msg.contains(&format!("ConfigMap {}/weft-artifact-repository", t.bed.ns))
            && msg.contains("endpiont"),
        "{msg}"
    );
    assert!(t.pods("bad-repo").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_over_the_limit_or_missing_fails_naming_it() {
    let t = s3_bed_with("limits", &["--max-artifact-size", "1Mi"]).await;
    let big = task(
        "head -c 2097152 /dev/zero > /work/big",
        json!({"outputs": {"artifacts": [{"name": "big", "path": "/work/big"}]}}),
    );
    t.create("too-big", json!([{"id": "big", "task": big}]))
        .await;
    let wf = t.finish("too-big", 120).await;
    let msg = common::node(&wf, "big").message.clone().unwrap_or_default();
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    assert!(
        msg.contains("output artifact big") && msg.contains("1048576"),
        "{msg}"
    );

    // An input whose object is not there: the init step fails naming it.
    let ns = &t.bed.ns;
    let missing = json!({"key": format!("{ns}/uploads/none/data.csv"),
        "digest": format!("sha256:{}", "0".repeat(64)), "size": 3, "kind": "file"});
    let read = task(
        "cat /work/data.csv",
        json!({"inputs": {"artifacts": [{"name": "data", "path": "/work/data.csv", "from": "${inputs.data}"}]}}),
    );
    let spec = json!({"inputs": {"data": missing}, "nodes": [{"id": "read", "task": read}]});
    t.create_spec("missing-input", spec).await;
    let wf = t.finish("missing-input", 120).await;
    let st = common::node(&wf, "read");
    let msg = st.message.clone().unwrap_or_default();
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    assert!(
        msg.contains("input artifact data") && msg.contains("404"),
        "{msg}"
    );
}

/// A k8s-resource task's batch/v1 Job, reading an input artifact and
/// writing an output artifact and parameter from its pod.
fn job_task() -> Value {
    let manifest = json!({"apiVersion": "batch/v1", "kind": "Job",
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
            "volumes": [{"name": "work", "emptyDir": {}}],
            "containers": [{"name": "main", "image": "busybox:1.36",
                "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                "command": ["sh", "-c", "wc -l < /work/in.txt | tr -d ' ' > /work/lines && cp /work/in.txt /work/out.txt && echo counted >> /work/out.txt"]}]}}}});
    json!({"type": "k8s-resource",
        "config": {"manifest": manifest,
            "successCondition": "has(object.status.succeeded) && object.status.succeeded > 0",
            "failureCondition": "has(object.status.failed) && object.status.failed > 0"},
        "inputs": {"artifacts": [from("make", "data", "/work/in.txt")]},
        "outputs": {"artifacts": [{"name": "counted", "path": "/work/out.txt"}],
                    "parameters": [{"name": "lines", "path": "/work/lines"}]}})
}

/// The Job controller's part on the dev cluster (kube-controller-manager
/// plays it on kube-apiserver): the Job's pod from its template, then the
/// Job's status once the pod succeeded.
async fn play_the_job_controller(t: &S3Bed, workflow: &str) {
    use k8s_openapi::api::batch::v1::Job;
    let (client, ns) = (t.bed.client.clone(), &t.bed.ns);
    let (jobs, pods) = (
        Api::<Job>::namespaced(client.clone(), ns),
        Api::<Pod>::namespaced(client, ns),
    );
    let lp = ListParams::default().labels(&format!("weft.dev/workflow={workflow}"));
    let job = async {
        loop {
            if let Some(j) = jobs.list(&lp).await.unwrap().items.pop() {
                return j;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let Ok(job) = tokio::time::timeout(Duration::from_secs(60), job).await else {
        let wf = t.finish(workflow, 1).await;
        panic!("no Job for {workflow} in 60 s: {:#?}", wf.status);
    };
    let name = job.metadata.name.clone().unwrap();
    let template = serde_json::to_value(&job.spec.as_ref().unwrap().template).unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-play"), "labels": {"job-name": name},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                "uid": job.metadata.uid, "controller": true}]},
        "spec": template["spec"]});
    let pod: Pod = serde_json::from_value(pod).unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    let mut phase = String::new();
    for _ in 0..300 {
        let p = pods.get(&format!("{name}-play")).await.unwrap();
        match p.status.and_then(|s| s.phase).as_deref() {
            Some(ph @ ("Succeeded" | "Failed")) => {
                phase = ph.to_string();
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    assert!(!phase.is_empty(), "the Job's pod did not end in 60 s");
    let status = match phase.as_str() {
        "Succeeded" => json!({"succeeded": 1}),
        _ => json!({"failed": 1}),
    };
    let patch = kube::api::Patch::Merge(json!({ "status": status }));
    jobs.patch_status(&name, &Default::default(), &patch)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_pod_moves_artifacts_as_a_pod_task_does() {
    let t = s3_bed("job").await;
    let make = task(
        "printf 'one\\ntwo\\nthree\\n' > /work/data.txt",
        json!({"outputs": {"artifacts": [{"name": "data", "path": "/work/data.txt"}]}}),
    );
    let check = task(
        "echo \"{\\\"sha\\\": \\\"$(sha256sum /work/in.txt | cut -d' ' -f1)\\\"}\" > /dev/termination-log",
        json!({"inputs": {"artifacts": [from("job", "counted", "/work/in.txt")]}}),
    );
    let nodes = json!([{"id": "make", "task": make},
        {"id": "job", "dependsOn": ["make"], "task": job_task()},
        {"id": "check", "dependsOn": ["job"], "task": check}]);
    t.create("job", nodes).await;
    if !common::cluster::real() {
        play_the_job_controller(&t, "job").await;
    }
    let wf = t.finish("job", 120).await;
    let status = wf.status.clone().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Succeeded, "{status:#?}");

    // The Job's pod read the input and reported both outputs, from the
    // store (the controller sees the Job, not its pod).
    let want = b"one\ntwo\nthree\ncounted\n";
    assert_eq!(outputs(&wf, "job")["lines"], 3);
    let counted = artifact(&wf, "job", "counted");
    let uid = wf.metadata.uid.clone().unwrap();
    assert_eq!(counted.key, format!("{}/job/{uid}/job/0/counted", t.bed.ns));
    assert_eq!(counted.digest, Digest::of(&want[..]).as_str());
    assert_eq!(t.store.get_bytes(&counted.key).await.unwrap(), want);
    assert_eq!(
        outputs(&wf, "check")["sha"],
        Digest::of(&want[..]).as_str().trim_start_matches("sha256:")
    );

    // What kubectl shows: the Job marked by the plugin, its template
    // wrapped by the host, no credentials; one pod ran it.
    let text = common::kubectl_ok(
        &t.bed.kubeconfig,
        &[
            "get",
            "jobs",
            "-n",
            &t.bed.ns,
            "-l",
            "weft.dev/workflow=job",
            "-o",
            "json",
        ],
        None,
    )
    .await;
    let jobs: Value = serde_json::from_str(&text).unwrap();
    let job = &jobs["items"][0];
    assert_eq!(jobs["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        job["metadata"]["annotations"]["weft.dev/pod-specs"],
        r#"["/spec/template/spec"]"#
    );
    let spec = &job["spec"]["template"]["spec"];
    assert_eq!(spec["initContainers"][0]["name"], "weft-io");
    let command = &spec["containers"][0]["command"];
    assert_eq!((&command[1], &command[2]), (&json!("io"), &json!("exec")));
    assert!(!text.contains(&common::s3::server().credentials.secret_access_key));
    let name = job["metadata"]["name"].as_str().unwrap();
    let api: Api<Pod> = Api::namespaced(t.bed.client.clone(), &t.bed.ns);
    let ran = api
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await
        .unwrap();
    assert_eq!(ran.items.len(), 1, "the Job's pods");
}
