//! The bed both controllers run on, and how each is started: a fresh
//! control plane per run (etcd, kube-apiserver with an audit log,
//! kube-controller-manager, kube-scheduler), kwok nodes whose pods turn
//! Running at once and Succeeded after the same fixed time for any owner,
//! and the controller under test as a local process with a client
//! certificate of its own, watching the namespace `bench` only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::k8s::RealCluster;

/// The namespace every workflow of the bench is created in.
pub const NAMESPACE: &str = "bench";

/// The controller under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Weft,
    Argo,
    /// Flyte's flytepropeller alone: no flyteadmin (its launcher off, events
    /// to its log), no datacatalog, in-memory storage ([`flyte`]).
    Flyte,
}

/// How the controller is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Each controller as it ships: Weft 100 QPS / 200 burst and no limit
    /// on concurrent reconciles; Argo 20 QPS / 30 burst and 32 workflow
    /// workers; Flyte 100 QPS / 25 burst, 20 workers. Each at its default
    /// log level.
    Defaults,
    /// The same client limits and workers for both: 100 QPS / 200 burst
    /// (Weft's defaults) and 32 workers (Argo's), logs at warn.
    Matched,
}

pub const MATCHED_QPS: u32 = 100;
pub const MATCHED_BURST: u32 = 200;
pub const MATCHED_WORKERS: u32 = 32;

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Weft => "Weft",
            Peer::Argo => "Argo",
            Peer::Flyte => "Flyte",
        }
    }

    /// The user its client certificate names: its requests in the audit log.
    pub fn user(self) -> &'static str {
        match self {
            Peer::Weft => "weft-controller",
            Peer::Argo => "argo-workflow-controller",
            Peer::Flyte => "flytepropeller",
        }
    }

    /// The workflow kind's group/version and plural.
    pub fn resource(self) -> kube::api::ApiResource {
        let (group, kind, plural) = match self {
            Peer::Weft => ("weft.dev", "Workflow", "workflows"),
            Peer::Argo => ("argoproj.io", "Workflow", "workflows"),
            Peer::Flyte => ("flyte.lyft.com", "FlyteWorkflow", "flyteworkflows"),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, "v1alpha1", kind);
        kube::api::ApiResource::from_gvk_with_plural(&gvk, plural)
    }
}

impl Setting {
    pub fn name(self) -> &'static str {
        match self {
            Setting::Defaults => "defaults",
            Setting::Matched => "matched",
        }
    }
}

/// The directory `tests/k8s/build-peers.sh` built the peers (Argo's
/// controller and CRDs, flytepropeller) into (once per machine).
pub fn peers_dir() -> PathBuf {
    let out = Command::new("bash")
        .arg(crate::root().join("tests/k8s/build-peers.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/k8s/build-peers.sh");
    assert!(out.status.success(), "tests/k8s/build-peers.sh failed");
    let text = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(
        text.lines()
            .last()
            .expect("build-peers.sh printed a directory"),
    )
}

/// A fresh control plane with `peer`'s CRDs, kwok nodes and the namespace.
pub fn cluster(peer: Peer, peers: &Path, run_ms: u64) -> RealCluster {
    let extra = match peer {
        // flytepropeller creates its CRD itself (`create-flyteworkflow-crd`,
        // from its own Go definition): the bench waits for it.
        Peer::Weft | Peer::Flyte => Vec::new(),
        Peer::Argo => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(peers.join("argo-crds"))
                .expect("the Argo CRDs")
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            files
        }
    };
    let mut cluster = RealCluster::start_with_crds(&extra);
    cluster.start_kwok(4, run_ms);
    let out = cluster.kubectl(&["create", "namespace", NAMESPACE]);
    assert!(out.status.success(), "create namespace: {out:?}");
    if peer == Peer::Argo {
        // Its install ships this ConfigMap empty; the controller refuses
        // to start without it.
        let args = [
            "create",
            "configmap",
            "workflow-controller-configmap",
            "-n",
            NAMESPACE,
        ];
        let out = cluster.kubectl(&args);
        assert!(out.status.success(), "create Argo's ConfigMap: {out:?}");
    }
    cluster
}

/// Starts `peer`'s controller with `setting` against `cluster`.
pub fn start(peer: Peer, setting: Setting, cluster: &RealCluster, peers: &Path) -> Child {
    let kubeconfig = cluster.kubeconfig_as(peer.user(), Some("system:masters"));
    let log = std::fs::File::create(cluster.dir.join("controller.log")).unwrap();
    let metrics = crate::free_port();
    let mut cmd = match peer {
        Peer::Weft => weft(setting, metrics),
        Peer::Argo => argo(setting, peers),
        Peer::Flyte => flyte(setting, peers, cluster, &kubeconfig, metrics),
    };
    let child = cmd
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}'s controller: {e}", peer.name()));
    cluster.adopt(child.id());
    if let Err(e) = wait_ready(peer, &child, metrics, cluster) {
        panic!("{e}; its log ends:\n{}", log_tail(cluster, 30));
    }
    child
}

/// The last `n` lines of the controller's log, for a failed run's message.
pub fn log_tail(cluster: &RealCluster, n: usize) -> String {
    let log = cluster.log("controller");
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn weft(setting: Setting, metrics: u16) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(["controller", "--no-admin", "--metrics-addr"])
        .arg(format!("127.0.0.1:{metrics}"))
        .args(["--namespace", NAMESPACE, "--plugins"])
        .arg(crate::root().join("target/plugins"));
    // PEERS_PROFILE serves the profiles without the heap snapshots that
    // PEERS_HEAP takes at every new high (for a CPU profile by hand).
    let profiling = std::env::var("PEERS_HEAP").or_else(|_| std::env::var("PEERS_PROFILE"));
    if let Ok(addr) = profiling {
        cmd.args(["--profiling-addr", &addr]);
    }
    if setting == Setting::Matched {
        cmd.arg(format!("--kube-api-qps={MATCHED_QPS}"))
            .arg(format!("--kube-api-burst={MATCHED_BURST}"))
            .arg(format!("--concurrent-reconciles={MATCHED_WORKERS}"))
            .env("RUST_LOG", "warn");
    }
    cmd
}

/// As Argo's own local development runs it (its tasks.yaml): namespaced,
/// leader election with a fixed identity; the executor image is never
/// pulled (kwok runs no container).
fn argo(setting: Setting, peers: &Path) -> Command {
    let mut cmd = Command::new(peers.join("bin/workflow-controller"));
    cmd.env("ARGO_NAMESPACE", NAMESPACE)
        .env("ARGO_NAMESPACED", "true")
        .env("ARGO_MANAGED_NAMESPACE", NAMESPACE)
        .env("LEADER_ELECTION_IDENTITY", "local")
        // Its own namespace comes from the client's configuration (the
        // kubeconfig's context or this flag), not from ARGO_NAMESPACE.
        .args(["--namespace", NAMESPACE])
        .arg("--executor-image=quay.io/argoproj/argoexec:v4.0.5");
    if setting == Setting::Matched {
        cmd.arg(format!("--qps={MATCHED_QPS}"))
            .arg(format!("--burst={MATCHED_BURST}"))
            .arg(format!("--workflow-workers={MATCHED_WORKERS}"))
            .arg("--loglevel=warn");
    }
    cmd
}

/// flytepropeller as a platform team would run it without flyteadmin
/// (tests/k8s/flyte/README.md says why each key): its admin launcher off,
/// storage in memory, no catalog, only the pod plugin's
/// `container` task type, watching `bench`; events to stdout (its log). Every pod asks 10m CPU and
/// 16Mi (its default is 1 CPU and 1 GiB a pod; Argo's and Weft's pods ask
/// nothing). `admin.endpoint` must name something (the client is built at
/// start; it is never called with the launcher off): nothing listens.
fn flyte(
    setting: Setting,
    peers: &Path,
    cluster: &RealCluster,
    kubeconfig: &Path,
    metrics: u16,
) -> Command {
    // Its logs are at warn by default: both settings.
    let (workers, qps, burst) = match setting {
        Setting::Defaults => (20, 100, 25),
        Setting::Matched => (MATCHED_WORKERS, MATCHED_QPS, MATCHED_BURST),
    };
    let admin = crate::free_port();
    let config = format!(
        "propeller:\n  kube-config: {kc}\n  create-flyteworkflow-crd: true\n  enable-admin-launcher: false\n  workers: {workers}\n  limit-namespace: {NAMESPACE}\n  prof-port: {metrics}\n  metadata-prefix: mem://flyte/metadata\n  rawoutput-prefix: mem://flyte/raw\n  kube-client-config:\n    qps: {qps}\n    burst: {burst}\n    timeout: 30s\n  leader-election:\n    enabled: false\nadmin:\n  endpoint: localhost:{admin}\n  insecure: true\nevent:\n  type: stdout\nstorage:\n  type: mem\ncatalog-cache:\n  type: noop\ntasks:\n  task-plugins:\n    enabled-plugins: [container]\n    default-for-task-types:\n      container: container\nplugins:\n  k8s:\n    default-cpus: 10m\n    default-memory: 16Mi\n",
        kc = kubeconfig.display(),
    );
    let file = cluster.dir.join("propeller.yaml");
    std::fs::write(&file, config).expect("write propeller.yaml");
    let mut cmd = Command::new(peers.join("bin/flytepropeller"));
    cmd.arg("--config")
        .arg(file)
        .env("POD_NAMESPACE", NAMESPACE);
    cmd
}

/// Waits until the controller says it is ready, then a little more for
/// its informers to list: Argo serves /healthz once its controller runs;
/// flytepropeller serves /version on its profiling port and has created
/// its CRD;
/// Weft answers 200 on /readyz once its plugins are loaded and its caches
/// synced (until 2026-11-30 the bench waited 3 s from the start for Weft,
/// while it still compiled its plugins: its first workflows waited for
/// that, and its CPU figure included part of it).
fn wait_ready(
    peer: Peer,
    child: &Child,
    metrics: u16,
    cluster: &RealCluster,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if !alive(child.id()) {
            return Err(format!("{}'s controller exited at start", peer.name()));
        }
        let ready = match peer {
            // Argo serves /healthz on :6060 once its controller runs.
            Peer::Argo => std::net::TcpStream::connect("127.0.0.1:6060").is_ok(),
            Peer::Weft => http_ok(metrics, "/readyz"),
            Peer::Flyte => {
                http_ok(metrics, "/version")
                    && cluster
                        .kubectl(&[
                            "wait",
                            "--for=condition=Established",
                            "crd/flyteworkflows.flyte.lyft.com",
                            "--timeout=1s",
                        ])
                        .status
                        .success()
            }
        };
        if ready {
            std::thread::sleep(Duration::from_secs(3));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("{}'s controller not ready in 60 s", peer.name()))
}

/// Whether `GET path` on loopback `port` answers 200.
fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut head = [0u8; 12];
    s.write_all(request.as_bytes()).is_ok()
        && s.read_exact(&mut head).is_ok()
        && head.ends_with(b" 200")
}

/// Whether `pid` runs (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}
