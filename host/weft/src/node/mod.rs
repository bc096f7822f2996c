//! `weft node`: the local runner as a node of any API server, as
//! virtual-kubelet is. It registers a Node, keeps its Lease in
//! `kube-node-lease` fresh, runs the pods the scheduler binds to it as local
//! processes (the same pod runs as the dev cluster's runner:
//! `weft_cluster::runner::pod`), writes their status, and serves the
//! kubelet's `containerLogs` endpoint over TLS so `kubectl logs` and
//! `weft logs` work through kube-apiserver.
//!
//! What it does not do: pull images, isolate containers, report resource
//! use, or check who calls its endpoint beyond a client certificate (the
//! kubelet would also ask the API server with a SubjectAccessReview).

mod host;
mod kubelet;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};
use weft_cluster::RunnerConfig;
use weft_cluster::runner::Pods;

pub use host::KubeHost;

/// How the node presents itself and where it keeps pods' files.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The Node's name (pods' `spec.nodeName`).
    pub name: String,
    /// Pods' directories: logs, termination messages, volumes.
    pub data_dir: PathBuf,
    /// Where the kubelet endpoint listens (its port goes in the Node's
    /// `daemonEndpoints`; the API server reaches it at 127.0.0.1).
    pub listen: SocketAddr,
    /// Serving certificate and key (PEM); a self-signed pair when absent.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Accept only clients (the API server) with a certificate of this CA.
    pub client_ca: Option<PathBuf>,
    /// Container restarts and simulation, as the dev cluster's runner.
    pub runner: RunnerConfig,
}

/// How long the Lease lasts without renewal (the kubelet's 40 s).
const LEASE_SECONDS: i32 = 40;
/// How often the Lease is renewed (the kubelet: a quarter of the duration).
const RENEW: Duration = Duration::from_secs(10);
/// How often the Ready condition's heartbeat is written.
const STATUS_EVERY: Duration = Duration::from_secs(60);

/// Runs the node against the API server `config` names until `shutdown`;
/// then every local process is killed.
pub async fn run(
    config: kube::Config,
    cfg: NodeConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("node data dir {}", cfg.data_dir.display()))?;
    // Containers reach the API server as pods do: KUBERNETES_SERVICE_PORT.
    let service_port = config.cluster_url.port_u16().unwrap_or(443).to_string();
    let client = Client::try_from(config)?;
    let host = Arc::new(KubeHost {
        client: client.clone(),
        name: cfg.name.clone(),
        data_dir: cfg.data_dir.clone(),
        service_port,
        live: Arc::default(),
        seen: Mutex::default(),
    });
    let port = kubelet::serve(&cfg, host.clone()).await?;
    register(&client, &cfg.name, port).await?;
    let beat = tokio::spawn(heartbeat(client.clone(), cfg.name.clone(), port));
    tracing::info!(node = %cfg.name, port, "node registered; running the pods bound to it");
    let pods = run_pods(client, host, cfg.runner.clone(), shutdown);
    let result = pods.await;
    beat.abort();
    result
}

/// Feeds every change of this node's pods to their runs.
async fn run_pods(
    client: Client,
    host: Arc<KubeHost>,
    runner: RunnerConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", host.name));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut pods = Pods::new(host.clone(), runner);
    tokio::pin!(shutdown);
    loop {
        let next = tokio::select! {
            () = &mut shutdown => break,
            next = events.try_next() => next,
        };
        let ev = match next {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "watching this node's pods");
                continue;
            }
        };
        let (pod, gone) = match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => (p, false),
            watcher::Event::Delete(p) => (p, true),
            watcher::Event::Init | watcher::Event::InitDone => continue,
        };
        let pod = Arc::new(serde_json::to_value(pod)?);
        host.saw(&pod, gone);
        pods.update(&pod, gone);
    }
    pods.shutdown().await;
    Ok(())
}

fn now_micros() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

fn now_seconds() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The Node's status: Ready, reachable at 127.0.0.1:`port`, this machine's
/// CPUs and memory.
fn node_status(port: u16) -> Value {
    let now = now_seconds();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let capacity = json!({"cpu": cpus.to_string(), "memory": memory(), "pods": "110"});
    json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "weft node is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "capacity": capacity, "allocatable": capacity,
        "nodeInfo": {"operatingSystem": "linux", "architecture": std::env::consts::ARCH,
            "kubeletVersion": concat!("weft-node/", env!("CARGO_PKG_VERSION")),
            "containerRuntimeVersion": "weft://local-processes",
            "kernelVersion": "", "osImage": "", "machineID": "", "systemUUID": "", "bootID": "",
            "kubeProxyVersion": ""},
    }})
}

/// This machine's memory as a quantity, from /proc/meminfo.
fn memory() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .map(|v| format!("{}Ki", v.trim().trim_end_matches("kB").trim()))
        })
        .unwrap_or_else(|| "1Gi".into())
}

/// Creates the Node (or takes over an existing one of the same name) and
/// writes its status.
async fn register(client: &Client, name: &str, port: u16) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": std::env::consts::ARCH, "node.weft.dev/agent": "weft-node"}},
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).with_context(|| format!("registering Node {name}")),
    }
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(node_status(port)),
        )
        .await
        .with_context(|| format!("writing Node {name}'s status"))?;
    Ok(())
}

/// Renews the node's Lease every [`RENEW`] and its Ready heartbeat every
/// [`STATUS_EVERY`], as the kubelet does; failures are retried next tick.
async fn heartbeat(client: Client, name: String, port: u16) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let mut last_status = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(RENEW);
    loop {
        tick.tick().await;
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": now_micros()}});
        let apply = PatchParams::apply("weft-node").force();
        if let Err(e) = leases.patch(&name, &apply, &Patch::Apply(&lease)).await {
            tracing::warn!(error = %e, "renewing the node Lease");
        }
        if last_status.elapsed() >= STATUS_EVERY {
            last_status = tokio::time::Instant::now();
            let status = Patch::Merge(node_status(port));
            if let Err(e) = nodes
                .patch_status(&name, &PatchParams::default(), &status)
                .await
            {
                tracing::warn!(error = %e, "node status heartbeat");
            }
        }
    }
}
