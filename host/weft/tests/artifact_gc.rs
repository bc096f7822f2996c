//! Artifact GC end to end (issue 42, Argo's `artifactGC`): real `weft
//! controller` processes whose artifact repository is a real S3 server
//! (SeaweedFS, one for the file; a bucket per test), pods that upload
//! with presigned URLs, and every outcome read from where it lives: the
//! objects listed from the store, finalizers and Events from the API
//! server. On the dev cluster and, with `WEFT_TEST_CLUSTER=k8s`, on
//! kube-apiserver with `weft node` running the pods.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use weft::api::{ARTIFACT_GC_FINALIZER, Workflow};
use weft_dag::WorkflowPhase;

/// A pod task running `script` with an `emptyDir` at /work, declaring
/// `outputs` (output artifacts, by name, with their `artifactGC` when
/// given) as files under /work.
fn task(script: &str, outputs: &[(&str, Option<&str>)]) -> Value {
    let artifacts: Vec<Value> = outputs
        .iter()
        .map(|(name, gc)| {
            let mut a = json!({"name": name, "path": format!("/work/{name}")});
            if let Some(s) = gc {
                a["artifactGC"] = json!({"strategy": s});
            }
            a
        })
        .collect();
    json!({"type": "pod", "config": {"podSpec": {
        "volumes": [{"name": "work", "emptyDir": {}}],
        "containers": [{"name": "main", "image": "busybox:1.36",
            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            "command": ["sh", "-c", script]}]}},
        "outputs": {"artifacts": artifacts}})
}

/// A test's bed: its bucket's repository file and credentials Secret, and
/// a controller process using them (started again after a kill).
struct GcBed {
    bed: common::cluster::Bed,
    store: weft::store::Store,
    repo_file: std::path::PathBuf,
    controller: Option<common::ControllerProcess>,
    starts: u32,
}

impl GcBed {
    async fn start(bucket: &str) -> GcBed {
        let bed = common::cluster::Bed::start().await;
        let repo_file = bed.path("artifact-repository.yaml");
        common::s3::secret_repository_file(bucket, &repo_file);
        let mut t = GcBed {
            store: common::s3::store(bucket),
            bed,
            repo_file,
            controller: None,
            starts: 0,
        };
        let secret = &common::s3::server().credentials.secret_access_key;
        t.set_secret_key(secret).await;
        t.start_controller(&[]);
        t
    }

    /// The credentials Secret, with `secret_key` (the controller reads it
    /// when it starts).
    async fn set_secret_key(&self, secret_key: &str) {
        common::s3::apply_secret(&self.bed.kubeconfig, &self.bed.ns, secret_key).await;
    }

    /// A controller process (the one before it must be gone).
    fn start_controller(&mut self, extra: &[&str]) {
        self.starts += 1;
        let mut args = vec![
            "--artifact-repository",
            self.repo_file.to_str().unwrap(),
            "--io-binary",
            env!("CARGO_BIN_EXE_weft"),
        ];
        args.extend_from_slice(extra);
        let identity = format!("gc-{}", self.starts);
        self.controller = Some(self.bed.controller(&identity, &args));
    }

    /// SIGKILL.
    fn kill_controller(&mut self) {
        if let Some(mut c) = self.controller.take() {
            c.kill();
        }
    }

    fn api(&self) -> Api<Workflow> {
        Api::namespaced(self.bed.client.clone(), &self.bed.ns)
    }

    async fn create(&self, name: &str, spec: Value) {
        let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": self.bed.ns}, "spec": spec});
        let text = wf.to_string();
        common::kubectl_ok(&self.bed.kubeconfig, &["create", "-f", "-"], Some(&text)).await;
    }

    async fn finish(&self, name: &str) -> Workflow {
        common::wait_workflow(&self.api(), name, |w| {
            w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await
    }

    async fn delete(&self, name: &str) {
        self.api()
            .delete(name, &DeleteParams::background())
            .await
            .unwrap();
    }

    /// Waits until the Workflow is gone from the API server.
    async fn gone(&self, name: &str, secs: u64) {
        for _ in 0..secs * 10 {
            if self.api().get_opt(name).await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "workflow {name} is still there after {secs} s: {:?}; controller log:\n{}",
            self.api().get_opt(name).await.unwrap().map(|w| w.metadata),
            self.log_tail()
        );
    }

    /// The objects under the workflow's prefix, as the store lists them.
    async fn objects(&self, wf: &Workflow) -> Vec<String> {
        let prefix = format!("{}/{}/{}/", self.bed.ns, wf.name_any(), wf.uid().unwrap());
        self.store.list(&prefix).await.unwrap()
    }

    /// The Warning Events on `name` with `reason`.
    async fn warnings(&self, name: &str, reason: &str) -> Vec<String> {
        let api: Api<Event> = Api::namespaced(self.bed.client.clone(), &self.bed.ns);
        let events = api.list(&ListParams::default()).await.unwrap().items;
        events
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .filter(|e| {
                e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning")
            })
            .map(|e| e.message.unwrap_or_default())
            .collect()
    }

    fn log_tail(&self) -> String {
        let log = self
            .controller
            .as_ref()
            .map(|c| c.log())
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

fn held(wf: &Workflow) -> bool {
    wf.finalizers().iter().any(|f| f == ARTIFACT_GC_FINALIZER)
}

/// Two artifacts from `make`, then `half`, which uploads `a` and fails
/// (its `b` is missing) on both of its attempts: objects no status names.
fn two_nodes(gc: &str) -> Value {
    json!({"artifactGC": {"strategy": gc}, "nodes": [
        {"id": "make", "task": task("echo x > /work/x && echo y > /work/y", &[("x", None), ("y", None)])},
        {"id": "half", "dependsOn": ["make"], "retries": {"limit": 1, "backoff": "1s"},
         "task": task("echo a > /work/a", &[("a", None), ("b", None)])}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_twenty_workflows_leaves_none_of_their_objects_across_a_sigkill() {
    let mut t = GcBed::start("gc-deletion").await;
    let names: Vec<String> = (0..20).map(|i| format!("del-{i}")).collect();
    for n in &names {
        t.create(n, two_nodes("OnWorkflowDeletion")).await;
    }
    let mut finished = Vec::new();
    for n in &names {
        let wf = t.finish(n).await;
        assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
        assert!(held(&wf), "{n}: no finalizer: {:?}", wf.finalizers());
        // make's two, and half's `a` from each of its two attempts.
        let objects = t.objects(&wf).await;
        assert_eq!(objects.len(), 4, "{n}: {objects:?}");
        finished.push(wf);
    }

    // Deleted while no controller runs: the finalizer holds every one.
    t.kill_controller();
    for n in &names {
        t.delete(n).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for wf in &finished {
        let now = t.api().get(&wf.name_any()).await.unwrap();
        assert!(now.metadata.deletion_timestamp.is_some() && held(&now));
        assert_eq!(t.objects(wf).await.len(), 4);
    }

    // A controller that collects one workflow at a time is SIGKILLed as
    // soon as the first is gone, with the rest still to do.
    t.start_controller(&["--concurrent-reconciles", "1"]);
    let mut left = names.len();
    for _ in 0..6000 {
        left = t
            .api()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        if left < names.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.kill_controller();
    assert!(
        left < names.len(),
        "the controller collected nothing in 60 s"
    );
    eprintln!(
        "killed with {left} of {} workflows still to collect",
        names.len()
    );

    // The next controller finishes the job: no Workflow, no object.
    t.start_controller(&[]);
    for n in &names {
        t.gone(n, 120).await;
    }
    for wf in &finished {
        let objects = t.objects(wf).await;
        assert!(objects.is_empty(), "{}: {objects:?}", wf.name_any());
    }
    let everything = t.store.list(&format!("{}/", t.bed.ns)).await.unwrap();
    assert!(everything.is_empty(), "{everything:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_completion_the_objects_go_after_the_exit_handler_and_the_workflow_stays() {
    let t = GcBed::start("gc-completion").await;
    let mut read = task("cat /work/in", &[]);
    read["inputs"] = json!({"artifacts": [{"name": "f", "path": "/work/in",
        "from": "${nodes.make.outputs.artifacts.f}"}]});
    let spec = json!({"artifactGC": {"strategy": "OnWorkflowCompletion"}, "nodes": [
        {"id": "make", "task": task("echo f > /work/f", &[("f", None)])},
        {"id": "read", "dependsOn": ["make"], "task": read}],
        "onExit": [{"id": "report", "task": task("sleep 1; echo r > /work/r", &[("r", None)])}]});
    t.create("done", spec).await;
    let wf = t.finish("done").await;
    assert_eq!(
        wf.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{:#?}",
        wf.status
    );
    // The exit handler's upload, made last, is gone too.
    let mut objects = t.objects(&wf).await;
    for _ in 0..100 {
        if objects.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        objects = t.objects(&wf).await;
    }
    assert!(objects.is_empty(), "{objects:?}");
    let st = common::node(&wf, "read");
    assert_eq!(st.phase, weft_dag::NodePhase::Succeeded);
    // The Workflow stays, finished, with its status.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let now = t.api().get("done").await.unwrap();
    assert!(now.metadata.deletion_timestamp.is_none());
    assert_eq!(now.status.unwrap().phase, WorkflowPhase::Succeeded);
    t.delete("done").await;
    t.gone("done", 30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_keeps_and_per_artifact_strategies_override_the_default() {
    let t = GcBed::start("gc-override").await;
    // The default collects on deletion; `kept` says Never, `early` says
    // on completion.
    let mixed = json!({"artifactGC": {"strategy": "OnWorkflowDeletion"}, "archiveLogs": true, "nodes": [{"id": "n",
        "task": task("echo > /work/a; echo > /work/kept; echo > /work/early",
            &[("a", None), ("kept", Some("Never")), ("early", Some("OnWorkflowCompletion"))])}]});
    // No strategy: nothing collected, no finalizer.
    let plain = json!({"nodes": [{"id": "n", "task": task("echo > /work/a", &[("a", None)])}]});
    // Never by default, one artifact collected on deletion.
    let one = json!({"archiveLogs": true, "nodes": [{"id": "n", "task": task("echo > /work/a; echo > /work/b",
        &[("a", None), ("b", Some("OnWorkflowDeletion"))])}]});
    for (name, spec) in [("mixed", mixed), ("plain", plain), ("one", one)] {
        t.create(name, spec).await;
    }
    let (mixed, plain, one) = (
        t.finish("mixed").await,
        t.finish("plain").await,
        t.finish("one").await,
    );
    let names = |keys: Vec<String>| -> Vec<String> {
        keys.iter()
            .map(|k| k.rsplit('/').next().unwrap().to_string())
            .collect()
    };
    let prefix = |wf: &Workflow| format!("{}/{}/{}/", t.bed.ns, wf.name_any(), wf.uid().unwrap());
    // `early` went at completion; the Workflow and the rest (its archived
    // log too) stay.
    let mut left = names(t.objects(&mixed).await);
    for _ in 0..100 {
        if left == ["a", "kept", "main.log"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = names(t.objects(&mixed).await);
    }
    assert_eq!(left, ["a", "kept", "main.log"]);
    assert!(held(&t.api().get("mixed").await.unwrap()));
    assert!(!held(&plain), "{:?}", plain.finalizers());
    assert!(held(&one));

    for name in ["mixed", "plain", "one"] {
        t.delete(name).await;
        t.gone(name, 60).await;
    }
    assert_eq!(
        names(t.store.list(&prefix(&mixed)).await.unwrap()),
        ["kept"]
    );
    assert_eq!(names(t.store.list(&prefix(&plain)).await.unwrap()), ["a"]);
    // The log follows the default: collected with `mixed`, kept with `one`.
    assert_eq!(
        names(t.store.list(&prefix(&one)).await.unwrap()),
        ["a", "main.log"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_workflow_deleted_is_stopped_then_collected() {
    let t = GcBed::start("gc-running").await;
    let spec = json!({"artifactGC": {"strategy": "OnWorkflowDeletion"}, "nodes": [
        {"id": "make", "task": task("echo x > /work/x", &[("x", None)])},
        {"id": "slow", "dependsOn": ["make"], "task": task("sleep 60; echo > /work/s", &[("s", None)])}]});
    t.create("running", spec).await;
    let wf = common::wait_workflow(&t.api(), "running", |w| {
        w.status
            .as_ref()
            .and_then(|s| s.nodes.get("slow"))
            .is_some_and(|n| n.phase == weft_dag::NodePhase::Running)
    })
    .await;
    assert_eq!(t.objects(&wf).await.len(), 1);
    t.delete("running").await;
    t.gone("running", 90).await;
    let objects = t.objects(&wf).await;
    assert!(objects.is_empty(), "{objects:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_deletion_waits_for_the_artifacts() {
    let t = GcBed::start("gc-ttl").await;
    let mut spec = two_nodes("OnWorkflowDeletion");
    // Long enough for the test to see it finished before it goes (with
    // 1 s, a loaded machine saw it only after it was gone).
    spec["ttlStrategy"] = json!({"secondsAfterCompletion": 4});
    t.create("short-lived", spec).await;
    let wf = t.finish("short-lived").await;
    assert!(held(&wf));
    t.gone("short-lived", 60).await;
    let objects = t.objects(&wf).await;
    assert!(objects.is_empty(), "{objects:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_refuses_gives_warnings_and_is_retried_until_it_accepts() {
    let mut t = GcBed::start("gc-refused").await;
    t.create("refused", two_nodes("OnWorkflowDeletion")).await;
    let wf = t.finish("refused").await;
    assert_eq!(t.objects(&wf).await.len(), 4);

    // The store's secret key rotated, and the controller started since
    // has the old one: the store refuses every request it signs.
    t.kill_controller();
    t.set_secret_key("not-the-secret-key").await;
    t.start_controller(&[]);
    t.delete("refused").await;
    let mut warnings = Vec::new();
    for _ in 0..300 {
        warnings = t.warnings("refused", "ArtifactGCFailed").await;
        if warnings.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        warnings.len() >= 3,
        "retried: {warnings:?}; log:\n{}",
        t.log_tail()
    );
    let w = &warnings[0];
    eprintln!("first of {} warnings: {w:?}", warnings.len());
    assert!(
        w.starts_with("cannot delete the workflow's artifacts (retrying in ")
            && w.contains("the store says SignatureDoesNotMatch: ")
            && w.contains("in s3://gc-refused/weft")
            && w.contains("403 Forbidden"),
        "{w}"
    );
    // With back-off: 1 s, then 2 s, then 4 s.
    let mut waits: Vec<u64> = warnings
        .iter()
        .filter_map(|w| {
            w.split("retrying in ")
                .nth(1)?
                .split('s')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    waits.sort();
    assert_eq!(waits[..3], [1, 2, 4], "{waits:?}");
    let now = t.api().get("refused").await.unwrap();
    assert!(held(&now), "{:?}", now.finalizers());
    assert_eq!(t.objects(&wf).await.len(), 4);

    // Given the key again, the next controller collects and releases it.
    t.kill_controller();
    let secret = &common::s3::server().credentials.secret_access_key;
    t.set_secret_key(secret).await;
    t.start_controller(&[]);
    t.gone("refused", 60).await;
    assert!(t.objects(&wf).await.is_empty());
}
