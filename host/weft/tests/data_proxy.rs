//! The data proxy end to end (issue 42): a real `weft controller` process
//! serving the admin API with the first-party middleware (auth-token,
//! audit) and namespace authorization, its artifact repository a real S3
//! server (SeaweedFS); `weft cp` and `weft submit -a` as a user runs them.
//! On the dev cluster and, with `WEFT_TEST_CLUSTER=k8s`, on kube-apiserver
//! with `weft node` running the pods.

mod common;

use std::path::Path;
use std::time::Duration;

use common::pod_task as task;
use kube::Api;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request};
use weft::admin::pb;
use weft::api::Workflow;
use weft::store::Digest;
use weft_dag::WorkflowPhase;
use weft_dag::artifacts::ArtifactRef;

type Client = pb::admin_service_client::AdminServiceClient<Channel>;

/// A bed, an S3 bucket, and a controller process whose admin API runs
/// request-id, auth-token (alice-token is alice, bob-token is bob) and
/// audit, lets alice act on the bed's namespace and bob on another only,
/// and signs uploads of at most 1 MiB.
struct ProxyBed {
    bed: common::cluster::Bed,
    store: weft::store::Store,
    controller: common::ControllerProcess,
    url: String,
}

async fn proxy_bed(bucket: &str) -> ProxyBed {
    let bed = common::cluster::Bed::start().await;
    let repo_file = bed.path("artifact-repository.yaml");
    common::s3::secret_repository_file(bucket, &repo_file);
    let secret = &common::s3::server().credentials.secret_access_key;
    common::s3::apply_secret(&bed.kubeconfig, &bed.ns, secret).await;
    let port = common::free_port();
    let admin = bed.path("admin.yaml");
    let config = json!({"listen": format!("127.0.0.1:{port}"),
        "middleware": ["request-id", "auth-token", "audit"],
        "authorization": {"principals": {"alice": [bed.ns], "bob": ["elsewhere"]}}});
    std::fs::write(&admin, config.to_string()).unwrap();
    let registry = bed.path("registry.yaml");
    let tokens = json!({"plugins": {"auth-token": {"config":
        {"tokens": {"alice-token": "alice", "bob-token": "bob"}}}}});
    std::fs::write(&registry, tokens.to_string()).unwrap();
    let controller = bed.controller(
        "data-proxy",
        &[
            "--artifact-repository",
            repo_file.to_str().unwrap(),
            "--io-binary",
            env!("CARGO_BIN_EXE_weft"),
            "--admin-config",
            admin.to_str().unwrap(),
            "--registry-config",
            registry.to_str().unwrap(),
            "--max-upload-size",
            "1Mi",
        ],
    );
    ProxyBed {
        store: common::s3::store(bucket),
        bed,
        controller,
        url: format!("http://127.0.0.1:{port}"),
    }
}

impl ProxyBed {
    /// An admin API client, once the controller serves it.
    async fn client(&self) -> Client {
        for _ in 0..600 {
            if let Ok(c) = Client::connect(self.url.clone()).await {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no admin API at {}", self.url);
    }

    /// `weft ARGS --admin URL [--token TOKEN]`, as the user runs it.
    async fn weft(&self, args: &[&str], token: Option<&str>) -> std::process::Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--admin", &self.url]);
        if let Some(t) = token {
            all.extend(["--token", t]);
        }
        common::weft(&self.bed.kubeconfig, &all).await
    }

    async fn weft_ok(&self, args: &[&str], token: Option<&str>) -> String {
        let out = self.weft(args, token).await;
        assert!(
            out.status.success(),
            "weft {args:?} failed:\n{}\n{}",
            common::stdout(&out),
            common::stderr(&out)
        );
        common::stdout(&out)
    }

    async fn weft_err(&self, args: &[&str], token: Option<&str>) -> String {
        let out = self.weft(args, token).await;
        assert!(!out.status.success(), "weft {args:?} should fail");
        common::stderr(&out)
    }

    /// Creates the Workflow `name` of `nodes` and waits for its end.
    async fn run(&self, name: &str, nodes: Value) -> Workflow {
        let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": self.bed.ns}, "spec": {"nodes": nodes}});
        common::kubectl_ok(
            &self.bed.kubeconfig,
            &["create", "-f", "-"],
            Some(&wf.to_string()),
        )
        .await;
        self.finish(name).await
    }

    async fn finish(&self, name: &str) -> Workflow {
        let api: Api<Workflow> = Api::namespaced(self.bed.client.clone(), &self.bed.ns);
        for _ in 0..600 {
            if let Ok(w) = api.get(name).await
                && w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
            {
                return w;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("workflow {name} did not finish in 120 s");
    }

    /// A node that stores a file `out` and a directory `dir`.
    async fn produce(&self, name: &str) -> Workflow {
        let make = task(
            "printf 'hello from make\\n' > /work/out.txt && mkdir -p /work/dir/sub && \
             echo a > /work/dir/a.txt && echo b > /work/dir/sub/b.txt",
            json!({"outputs": {"artifacts": [{"name": "out", "path": "/work/out.txt"},
                                             {"name": "dir", "path": "/work/dir"}]}}),
        );
        let wf = self.run(name, json!([{"id": "make", "task": make}])).await;
        let phase = wf.status.as_ref().map(|s| s.phase);
        assert_eq!(phase, Some(WorkflowPhase::Succeeded), "{:#?}", wf.status);
        wf
    }
}

fn artifact(wf: &Workflow, node: &str, name: &str) -> ArtifactRef {
    let v = &common::node(wf, node).outputs.as_ref().expect("outputs")["artifacts"][name];
    serde_json::from_value(v.clone()).unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn with_token<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

fn maybe_token<T>(msg: T, token: Option<&str>) -> Request<T> {
    match token {
        Some(t) => with_token(msg, t),
        None => Request::new(msg),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_downloads_artifacts_and_submit_uploads_inputs_that_reach_a_node() {
    let t = proxy_bed("copies").await;
    let ns = t.bed.ns.clone();
    let wf = t.produce("produce").await;
    let alice = Some("alice-token");
    let local = tempfile::tempdir().unwrap();
    let dir = local.path();

    // A file: the same bytes, the digest the status records.
    let got = dir.join("got.txt");
    t.weft_ok(
        &["cp", "produce/make/out", got.to_str().unwrap(), "-n", &ns],
        alice,
    )
    .await;
    let out = artifact(&wf, "make", "out");
    assert_eq!(read(&got), "hello from make\n");
    assert_eq!(Digest::of(read(&got).as_bytes()).as_str(), out.digest);
    // Into an existing directory, it keeps its name.
    t.weft_ok(&["cp", "produce/make/out", dir.to_str().unwrap()], alice)
        .await;
    assert_eq!(read(&dir.join("out")), "hello from make\n");
    // A directory: unpacked.
    let tree = dir.join("tree");
    t.weft_ok(&["cp", "produce/make/dir", tree.to_str().unwrap()], alice)
        .await;
    assert_eq!(read(&tree.join("a.txt")), "a\n");
    assert_eq!(read(&tree.join("sub/b.txt")), "b\n");
    // An array item's artifact: NODE[i]; an item that is not there is named.
    let fan = task(
        "echo \"item $WEFT_INPUT_NUM\" > /work/out.txt",
        json!({"outputs": {"artifacts": [{"name": "out", "path": "/work/out.txt"}]}}),
    );
    let items = json!([{"id": "fan", "inputs": {"num": "${item}"},
        "array": {"over": [10, 20], "task": fan}}]);
    let wf = t.run("items", items).await;
    let phase = wf.status.as_ref().map(|s| s.phase);
    assert_eq!(phase, Some(WorkflowPhase::Succeeded), "{:#?}", wf.status);
    let second = dir.join("second.txt");
    let fan1 = ["cp", "items/fan[1]/out", second.to_str().unwrap()];
    t.weft_ok(&fan1, alice).await;
    assert_eq!(read(&second), "item 20\n");
    let fan2 = ["cp", "items/fan[2]/out", dir.to_str().unwrap()];
    let err = t.weft_err(&fan2, alice).await;
    assert!(err.contains("items 0 to 1: no item 2"), "{err}");

    // An upload by hand: the reference names an object of the namespace
    // with exactly these bytes.
    let input = dir.join("input.txt");
    std::fs::write(&input, "uploaded 42").unwrap();
    let printed = t
        .weft_ok(&["cp", input.to_str().unwrap(), "-"], alice)
        .await;
    let r: ArtifactRef = serde_json::from_str(printed.trim()).unwrap();
    assert!(r.key.starts_with(&format!("{ns}/uploads/")), "{r:?}");
    assert!(r.key.ends_with("/input.txt"), "{r:?}");
    assert_eq!((r.size, r.kind.as_str()), (11, "file"));
    assert_eq!(r.digest, Digest::of(b"uploaded 42").as_str());
    assert_eq!(t.store.get_bytes(&r.key).await.unwrap(), b"uploaded 42");

    // weft submit -a: a file and a directory reach the node as inputs.
    let upload_dir = dir.join("leaves");
    std::fs::create_dir(&upload_dir).unwrap();
    std::fs::write(upload_dir.join("leaf.txt"), "leaf!").unwrap();
    let read_them = task(
        "echo \"{\\\"got\\\": \\\"$(cat /work/data.txt)\\\", \\\"leaf\\\": \\\"$(cat /work/tree/leaf.txt)\\\"}\" > /dev/termination-log",
        json!({"inputs": {"artifacts": [
            {"name": "data", "path": "/work/data.txt", "from": "${inputs.data}"},
            {"name": "tree", "path": "/work/tree", "from": "${inputs.tree}"}]}}),
    );
    let manifest = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "consume"},
        "spec": {"inputs": {"data": {"type": "object"}, "tree": null},
                 "nodes": [{"id": "read", "task": read_them}]}});
    let file = dir.join("consume.yaml");
    std::fs::write(&file, manifest.to_string()).unwrap();
    let data = format!("data={}", input.display());
    let leaves = format!("tree={}", upload_dir.display());
    let args = [
        "submit",
        file.to_str().unwrap(),
        "-a",
        &data,
        "-a",
        &leaves,
        "--watch",
        "--timeout",
        "2m",
    ];
    t.weft_ok(&args, alice).await;
    let wf = t.finish("consume").await;
    let outputs = common::node(&wf, "read")
        .outputs
        .clone()
        .unwrap_or_default();
    assert_eq!(outputs["got"], "uploaded 42", "{:#?}", wf.status);
    assert_eq!(outputs["leaf"], "leaf!");
    let inputs = wf.status.unwrap().inputs.unwrap();
    assert_eq!(inputs["tree"]["kind"], "directory", "{inputs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_middleware_refuses_strangers_and_bad_requests_are_named() {
    let t = proxy_bed("refusals").await;
    let ns = t.bed.ns.clone();
    let mut c = t.client().await;
    let upload = |len: u64, name: &str| pb::CreateUploadLocationRequest {
        namespace: ns.clone(),
        filename: name.into(),
        content_length: len,
        ..Default::default()
    };
    let link = |wf: &str, node: &str, art: &str| pb::CreateDownloadLinkRequest {
        namespace: ns.clone(),
        workflow: wf.into(),
        node: node.into(),
        artifact: art.into(),
        ..Default::default()
    };

    // No token and an unknown one: the middleware refuses both calls.
    for token in [None, Some("mallory-token")] {
        let e = c
            .create_upload_location(maybe_token(upload(1, "a.txt"), token))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        let e = c
            .create_download_link(maybe_token(link("x", "make", "out"), token))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    }
    // bob is known, but not on this namespace.
    let e = c
        .create_upload_location(with_token(upload(1, "a.txt"), "bob-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message().contains("bob") && e.message().contains(&ns),
        "{}",
        e.message()
    );
    let e = c
        .create_download_link(with_token(link("x", "make", "out"), "bob-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // The CLI says so too.
    let e = t
        .weft_err(&["cp", "x/make/out", "/tmp/nowhere"], None)
        .await;
    assert!(e.contains("CreateDownloadLink: Unauthenticated"), "{e}");

    // Too large, a bad name: named, nothing signed.
    let e = c
        .create_upload_location(with_token(upload(2 << 20, "big.bin"), "alice-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("2097152 bytes") && e.message().contains("1048576 bytes"),
        "{}",
        e.message()
    );
    let e = c
        .create_upload_location(with_token(upload(1, "../x"), "alice-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().starts_with("filename: \"../x\""),
        "{}",
        e.message()
    );
    let big = t.bed.path("big.bin");
    std::fs::write(&big, vec![7u8; 2 << 20]).unwrap();
    let e = t
        .weft_err(&["cp", big.to_str().unwrap(), "-"], Some("alice-token"))
        .await;
    assert!(e.contains("upload limit"), "{e}");

    // What is missing is named: the workflow, the node, the artifact.
    t.produce("small").await;
    let alice = |m| with_token(m, "alice-token");
    let e = c
        .create_download_link(alice(link("nope", "make", "out")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains(&format!("execution {ns}/nope")),
        "{}",
        e.message()
    );
    let e = c
        .create_download_link(alice(link("small", "nope", "out")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("has no node nope"), "{}", e.message());
    let e = c
        .create_download_link(alice(link("small", "make", "nope")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message()
            .contains("has no artifact nope (its artifacts: dir, out)"),
        "{}",
        e.message()
    );
    let e = t
        .weft_err(
            &["cp", "small/make/nope", "/tmp/nowhere"],
            Some("alice-token"),
        )
        .await;
    assert!(
        e.contains("NotFound") && e.contains("no artifact nope"),
        "{e}"
    );
    // alice's link works, and lives as long as she asked.
    let mut req = link("small", "make", "out");
    req.expires_in_seconds = 60;
    let ok = c
        .create_download_link(alice(req))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((ok.size, ok.kind.as_str()), (16, "file"));
    assert!(
        ok.signed_url.contains("X-Amz-Expires=60"),
        "{}",
        ok.signed_url
    );

    // Through the chain: metrics per method and code, audit lines.
    let metrics = t.controller.metrics().await;
    for want in [
        r#"method="/weft.admin.v1.AdminService/CreateUploadLocation",code="UNAUTHENTICATED""#,
        r#"method="/weft.admin.v1.AdminService/CreateDownloadLink",code="PERMISSION_DENIED""#,
        r#"method="/weft.admin.v1.AdminService/CreateDownloadLink",code="OK""#,
    ] {
        assert!(metrics.contains(want), "{want} in\n{metrics}");
    }
    let audited = "audit method=/weft.admin.v1.AdminService/CreateDownloadLink principal=bob";
    for _ in 0..50 {
        if t.controller.log().contains(audited) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no audit line {audited:?} in\n{}", t.controller.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_repository_the_data_proxy_says_so() {
    let env = common::Env::start().await;
    let config = weft::admin::AdminConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        middleware: Some(vec![]),
        ..Default::default()
    };
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = weft::admin::serve(
        &config,
        env.client.clone(),
        env.registry.clone(),
        env.ctx.metrics.clone(),
        async {
            let _ = rx.await;
        },
    )
    .await
    .unwrap();
    let mut c = Client::connect(format!("http://{}", server.addr))
        .await
        .unwrap();
    let e = c
        .create_upload_location(pb::CreateUploadLocationRequest {
            namespace: env.ns.clone(),
            filename: "a.txt".into(),
            content_length: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("--artifact-repository"),
        "{}",
        e.message()
    );
    let _ = stop.send(());
    env.stop().await;
}

/// Logs that outlive their pods: `archiveLogs` keeps the main container's
/// log in the store; once pod GC removed the pods, the admin API
/// (StreamNodeLogs, CreateDownloadLink with `log`) and `weft logs` serve
/// the archived copy, to the namespace's principal only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_logs_are_served_after_their_pods_are_gone() {
    let t = proxy_bed("archived-logs").await;
    let ns = t.bed.ns.clone();
    let talk = task("for i in 1 2 3; do echo \"line $i\"; done", json!({}));
    let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "chatty", "namespace": ns},
        "spec": {"archiveLogs": true, "podGC": {"strategy": "OnPodCompletion"},
                 "nodes": [{"id": "talk", "task": talk}]}});
    common::kubectl_ok(
        &t.bed.kubeconfig,
        &["create", "-f", "-"],
        Some(&wf.to_string()),
    )
    .await;
    let done = t.finish("chatty").await;
    assert_eq!(
        done.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(t.bed.client.clone(), &ns);
    let lp = kube::api::ListParams::default().labels("weft.dev/workflow=chatty");
    for _ in 0..100 {
        if pods.list(&lp).await.unwrap().items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        pods.list(&lp).await.unwrap().items.is_empty(),
        "pod GC left the pod"
    );

    // The admin API streams the archived copy.
    let mut client = t.client().await;
    let req = || pb::StreamNodeLogsRequest {
        id: Some(pb::ExecutionId {
            namespace: ns.clone(),
            name: "chatty".into(),
            ..Default::default()
        }),
        node_id: "talk".into(),
        ..Default::default()
    };
    let mut stream = client
        .stream_node_logs(with_token(req(), "alice-token"))
        .await
        .unwrap()
        .into_inner();
    let mut text = String::new();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        text.push_str(&chunk.unwrap().text);
    }
    assert_eq!(text, "line 1\nline 2\nline 3\n");
    let refused = client
        .stream_node_logs(with_token(req(), "bob-token"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // A download link to it.
    let link = client
        .create_download_link(with_token(
            pb::CreateDownloadLinkRequest {
                namespace: ns.clone(),
                workflow: "chatty".into(),
                node: "talk".into(),
                log: true,
                ..Default::default()
            },
            "alice-token",
        ))
        .await
        .unwrap()
        .into_inner();
    let uid = done.metadata.uid.clone().unwrap();
    assert_eq!(link.key, format!("{ns}/chatty/{uid}/talk/0/main.log"));
    let body = reqwest::get(&link.signed_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "line 1\nline 2\nline 3\n");

    // weft logs, as the user runs it.
    let out = t
        .weft_ok(&["logs", "chatty", "-n", &ns], Some("alice-token"))
        .await;
    assert!(
        out.contains("talk: line 1\ntalk: line 2\ntalk: line 3"),
        "{out}"
    );
    // With -f too: the pod was gone before following began.
    let out = t
        .weft_ok(&["logs", "chatty", "-f", "-n", &ns], Some("alice-token"))
        .await;
    assert!(
        out.contains("talk: line 1\ntalk: line 2\ntalk: line 3"),
        "{out}"
    );
}
