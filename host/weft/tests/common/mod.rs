//! The end-to-end harness: a real embedded dev cluster (over HTTP), the real
//! plugins built from the repo (`make guests`), the real controller, and
//! kube-rs as the client, exactly as against a real cluster.

#![allow(dead_code)]

pub mod browser;
pub mod cluster;
pub mod examples;
pub mod install;
pub mod k8s;
pub mod loopback;
pub mod oidc;
mod port;
pub mod postgres;
pub mod runs;
pub mod s3;

pub use port::free_port;

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, PostParams},
    runtime::watcher,
};
use weft::api::Workflow;

/// A pod task whose main container mounts an `emptyDir` at /work and
/// runs `script`, with `io` (the task's `inputs`/`outputs`) beside it.
pub fn pod_task(script: &str, io: serde_json::Value) -> serde_json::Value {
    let mut t = serde_json::json!({"type": "pod", "config": {"podSpec": {
        "volumes": [{"name": "work", "emptyDir": {}}],
        "containers": [{"name": "main", "image": "busybox:1.36",
            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            "command": ["sh", "-c", script]}]}}});
    for (k, v) in io.as_object().unwrap() {
        t[k] = v.clone();
    }
    t
}

/// The data plane `weft dev` has: a local directory, pods given this
/// crate's `weft` binary (they run as processes on this machine).
pub fn local_artifacts(dir: &Path) -> std::sync::Arc<weft::pod_io::PodIo> {
    let repo = weft::store::ArtifactRepository {
        local: Some(weft::store::LocalRepository {
            path: dir.to_path_buf(),
            prefix: String::new(),
        }),
        s3: None,
    };
    let store = weft::store::Store::open(&repo, None).expect("a local store");
    std::sync::Arc::new(weft::pod_io::PodIo::new(
        store,
        env!("CARGO_BIN_EXE_weft"),
        weft::pod_io::DEFAULT_IMAGE,
    ))
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The controller (in this process) on a test's [`cluster::Bed`], whose
/// fields (`client`, `ns`, `dir`, `cluster`) it lends through `Deref`.
pub struct Env {
    pub bed: cluster::Bed,
    pub registry: std::sync::Arc<weft_plugin::Registry>,
    pub ctx: std::sync::Arc<weft::controller::Context>,
    pub loader: Option<std::sync::Arc<weft::hotload::HotLoader>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stop_hotload: Option<tokio::sync::oneshot::Sender<()>>,
    controller: Option<tokio::task::JoinHandle<()>>,
}

impl std::ops::Deref for Env {
    type Target = cluster::Bed;
    fn deref(&self) -> &cluster::Bed {
        &self.bed
    }
}

impl Env {
    /// Starts everything in a fresh directory.
    pub async fn start() -> Env {
        Self::start_with(None::<fn(&str) -> weft::hotload::HotloadConfig>).await
    }

    /// Starts everything, with plugins also hot-loaded from ConfigMaps:
    /// `config` is given the test's namespace.
    pub async fn start_hotload(config: impl FnOnce(&str) -> weft::hotload::HotloadConfig) -> Env {
        Self::start_with(Some(config)).await
    }

    async fn start_with(hotload: Option<impl FnOnce(&str) -> weft::hotload::HotloadConfig>) -> Env {
        let bed = cluster::Bed::start().await;
        let hotload = hotload.map(|config| config(&bed.ns));
        let client = bed.client.clone();
        let plugins = root().join("target/plugins");
        assert!(
            plugins.join("pod.wasm").is_file(),
            "build the plugins first: make guests"
        );
        let (engine, registry) =
            weft::runtime::load_plugins(&plugins, Some(&root().join("target/weft-test-cache")))
                .unwrap();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let (open, synced) = weft::runtime::after_sync();
        let (ctx, controller) = weft::runtime::spawn_controller_after(
            client.clone(),
            registry.clone(),
            bed.watched(),
            synced,
            async {
                let _ = rx.await;
            },
        );
        ctx.set_artifacts(local_artifacts(&bed.dir.path().join("artifacts")));
        let (stop_hotload, hotload_rx) = tokio::sync::oneshot::channel::<()>();
        let loader = hotload.map(|mut config| {
            // As `weft controller` and `weft dev` do: pins from the
            // controller's Workflow cache.
            config.workflows.get_or_insert_with(|| ctx.live.clone());
            let (loader, _task) = weft::runtime::spawn_hotload(
                client.clone(),
                engine,
                registry.clone(),
                ctx.metrics.clone(),
                config,
                async {
                    let _ = hotload_rx.await;
                },
            );
            loader
        });
        open(loader.clone());
        if let Some(l) = &loader {
            l.synced().await;
        }
        Env {
            bed,
            registry,
            ctx,
            loader,
            stop: Some(stop),
            stop_hotload: Some(stop_hotload),
            controller: Some(controller),
        }
    }

    /// Stops the controller, then the bed.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop_hotload.take() {
            let _ = s.send(());
        }
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(c) = self.controller.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c).await;
        }
        self.bed.stop().await;
    }

    pub fn workflows(&self) -> Api<Workflow> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Creates a Workflow from YAML (a `spec:` document), named `name`.
    pub async fn submit(&self, name: &str, spec_yaml: &str) -> Workflow {
        let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(spec_yaml).expect("spec YAML");
        let wf = Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
        self.workflows()
            .create(&PostParams::default(), &wf)
            .await
            .expect("create")
    }

    /// Waits until the Workflow satisfies `done`, up to `secs` seconds.
    pub async fn wait_for(
        &self,
        name: &str,
        secs: u64,
        done: impl Fn(&Workflow) -> bool,
    ) -> Workflow {
        let mut events = watcher::watch_object(self.workflows(), name).boxed();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut last = None;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(Some(wf)))) => {
                    if done(&wf) {
                        return wf;
                    }
                    last = Some(wf);
                }
                Ok(Some(Ok(None))) => {}
                Ok(Some(Err(e))) => panic!("watch failed: {e}"),
                Ok(None) => panic!("watch ended"),
                Err(_) => panic!(
                    "workflow {name} did not get there in {secs}s; last status: {}",
                    serde_json::to_string_pretty(&last.and_then(|w| w.status)).unwrap()
                ),
            }
        }
    }

    /// Waits for a terminal phase.
    pub async fn finish(&self, name: &str, secs: u64) -> Workflow {
        self.wait_for(name, secs, |wf| {
            wf.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await
    }

    /// The Pods of a workflow (by Weft's label).
    pub async fn pods_of(&self, workflow: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={workflow}")))
            .await
            .unwrap()
            .items
    }
}

/// The node's status.
pub fn node<'a>(wf: &'a Workflow, id: &str) -> &'a weft_dag::NodeStatus {
    &wf.status.as_ref().expect("status").nodes[id]
}

/// A pod's name.
pub fn name(p: &Pod) -> String {
    p.name_any()
}

/// `weft ARGS` with `KUBECONFIG` set, run from the repository root: the
/// CLI as a user runs it.
pub async fn weft(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(root())
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .expect("run weft")
}

/// A command's standard output, as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The output of a `weft` command that must succeed.
pub async fn weft_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = weft(kubeconfig, args).await;
    assert!(
        out.status.success(),
        "weft {args:?} failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// The standard error of a `weft` command that must fail.
pub async fn weft_err(kubeconfig: &Path, args: &[&str]) -> String {
    let out = weft(kubeconfig, args).await;
    assert!(
        !out.status.success(),
        "weft {args:?} should fail:\n{}",
        stdout(&out)
    );
    stderr(&out)
}

/// `kubectl ARGS` that must succeed; its standard output.
pub async fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(kubeconfig, args, stdin).await;
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// `kubectl --kubeconfig K ARGS`, with `stdin` piped in when given.
pub async fn kubectl(
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    child.wait_with_output().await.unwrap()
}

/// The body of `GET http://127.0.0.1:PORT/PATH`, or `None` while nothing
/// answers there.
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The value of one series of a Prometheus exposition, named as printed
/// (`weft_leader{shard="0"}`); `None` when it is absent.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
    })
}

/// The sum of every series of a metric (`weft_reconciles_total` sums
/// `{result="ok"}` and `{result="error"}`).
pub fn sum(exposition: &str, metric: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// The Workflow `name` once `done` holds (up to 120 s).
pub async fn wait_workflow(
    api: &Api<Workflow>,
    name: &str,
    done: impl Fn(&Workflow) -> bool,
) -> Workflow {
    let mut last = None;
    for _ in 0..1200 {
        if let Ok(w) = api.get(name).await {
            if done(&w) {
                return w;
            }
            last = Some(w);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("workflow {name} did not get there in 120 s: {last:#?}");
}

/// A real `weft controller` process against a dev cluster, its log (JSON
/// lines) in a file. Killed (SIGKILL) when dropped.
pub struct ControllerProcess {
    child: std::process::Child,
    /// Where `/metrics` is served.
    pub metrics_port: u16,
    /// Its identity (Lease holder, Events' reportingInstance).
    pub identity: String,
    log: PathBuf,
}

impl ControllerProcess {
    /// Starts `weft controller` with the first-party plugins and `args`
    /// (no admin API unless `args` configure it).
    pub fn start(kubeconfig: &Path, identity: &str, args: &[&str]) -> Self {
        let metrics_port = free_port();
        let log = kubeconfig.with_file_name(format!("{identity}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["--log-format", "json", "controller", "--metrics-addr"])
            .arg(format!("127.0.0.1:{metrics_port}"))
            .args(
                (!args.contains(&"--plugins"))
                    .then(|| ["--plugins".into(), root().join("target/plugins")])
                    .into_iter()
                    .flatten(),
            )
            .arg("--cache-dir")
            .arg(root().join("target/weft-test-cache"))
            .args(["--leader-elect-identity", identity])
            .args(
                // Two processes would fight over the admin API's default
                // port: serve it only when a test configures it.
                (!args.iter().any(|a| a.starts_with("--admin"))).then_some("--no-admin"),
            )
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start weft controller");
        ControllerProcess {
            child,
            metrics_port,
            identity: identity.to_string(),
            log,
        }
    }

    /// Its `/metrics`, once it serves them (up to 60 s: the first start
    /// compiles the plugins).
    pub async fn metrics(&self) -> String {
        for _ in 0..600 {
            if let Some(m) = http_get(self.metrics_port, "/metrics").await {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{}: no /metrics on port {}; log:\n{}",
            self.identity,
            self.metrics_port,
            self.log()
        );
    }

    /// /metrics once the Workflow controller has started: its series exist
    /// from then on (as controller-runtime creates them in Start), but the
    /// endpoint answers earlier, while the controller still reads the API.
    pub async fn started_metrics(&self) -> String {
        let started = r#"controller_runtime_max_concurrent_reconciles{controller="workflow"}"#;
        for _ in 0..600 {
            let m = self.metrics().await;
            if m.lines().any(|l| l.starts_with(started)) {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{}: the workflow controller never started (no {started}); log:\n{}",
            self.identity,
            self.log()
        );
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a rolling update's stop), and reap it: how it exited.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let _ = std::process::Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        self.child.wait().ok()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What RBAC rules grant, one (apiGroup, resource, verb) each.
pub fn grant_set(
    rules: &[k8s_openapi::api::rbac::v1::PolicyRule],
) -> std::collections::BTreeSet<(String, String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for r in rules {
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

/// A dev cluster in a fresh directory with the Workflow CRD installed,
/// for tests that run the controller as a process: the directory (its
/// `kubeconfig` inside), the cluster and a client.
pub async fn dev_cluster() -> (tempfile::TempDir, weft_cluster::DevCluster, PathBuf, Client) {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft::dev::start(dir.path()).await.expect("dev cluster");
    let kubeconfig = dir.path().join("kubeconfig");
    let client = weft::runtime::client_for(&cluster.base_url()).unwrap();
    weft::runtime::install_crd(&client).await.unwrap();
    (dir, cluster, kubeconfig, client)
}

/// The standard output of a renderer (`kubectl kustomize`, Helm), which
/// must succeed: the install's YAML.
pub fn rendered(cmd: &mut std::process::Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run it: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

/// `helm template` of the chart with deploy/helm/examples/`example`.yaml,
/// by Helm's own engine (the Go SDK, through deploy/helm/template.py).
pub fn helm_template(example: &str) -> String {
    rendered(
        std::process::Command::new("python3")
            .arg(root().join("deploy/helm/template.py"))
            .arg(root().join("deploy/helm/weft"))
            .arg("-f")
            .arg(root().join(format!("deploy/helm/examples/{example}.yaml")))
            .arg("--include-crds"),
        &format!("helm template ({example})"),
    )
}

/// `kubectl kustomize DIR` (a path relative to the repository root).
pub fn kustomize(dir: &str) -> String {
    rendered(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(root().join(dir)),
        &format!("kubectl kustomize {dir}"),
    )
}

/// An admin API client of a `weft` serving on `port` (waits up to 10 s).
pub async fn admin_client(
    port: u16,
) -> weft::admin::pb::admin_service_client::AdminServiceClient<tonic::transport::Channel> {
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if let Ok(c) =
            weft::admin::pb::admin_service_client::AdminServiceClient::connect(url.clone()).await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no admin API at {url}");
}
