//! Weft's embedded dev cluster.
//!
//! No Kubernetes runs on a developer laptop or in CI here, yet the controller
//! must be exercised exactly as it runs in a cluster: through kube-rs over
//! HTTP. So the host can start, in-process, a small Kubernetes-compatible API
//! server (in the spirit of k3s/kine and kwok) with its data in a redb file,
//! and a local runner that plays kubelet by running a Pod's container
//! commands as local processes. `kubectl` works against it too.
//!
//! ```no_run
//! # async fn demo() -> weft_cluster::Result<()> {
//! let cluster = weft_cluster::DevCluster::start(weft_cluster::Config::new("/tmp/weft-dev")).await?;
//! cluster.write_kubeconfig("/tmp/weft-dev/kubeconfig")?;
//! println!("API server at {}", cluster.base_url());
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! On a real cluster none of this runs.

#![forbid(unsafe_code)]

mod admission;
mod api;
mod audit;
mod authn;
mod body;
mod error;
mod event_ttl;
pub mod fuzz;
mod gc;
pub mod logs;
mod meta;
mod patch;
mod protobuf;
mod quota;
mod quota_controller;
mod rbac;
mod registry;
mod reviews;
pub mod runner;
mod schema;
mod selector;
mod server;
mod status;
mod store;
mod table;
mod user;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use audit::AuditRecord;
pub use error::{Error, Result};
pub use rbac::{AUTHORIZATION_MODE_ENV, Authorization};

/// How the local runner behaves.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Run pods at all. Without a runner pods stay Pending, which is what
    /// API-only tests want.
    pub enabled: bool,
    /// First delay before restarting a failed container (doubles each time,
    /// capped at `max_restart_backoff`). The kubelet uses 10 s.
    pub restart_backoff: Duration,
    /// Cap for the restart back-off (the kubelet uses 5 min).
    pub max_restart_backoff: Duration,
    /// Simulate every pod (no process), as with the
    /// `weft.dev/simulate` annotation; for scale tests.
    pub simulate_all: bool,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            enabled: true,
            restart_backoff: Duration::from_secs(10),
            max_restart_backoff: Duration::from_secs(300),
            simulate_all: false,
        }
    }
}

/// Configuration of a dev cluster.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the database, pod directories and logs live. Reusing it after a
    /// restart resumes everything, resourceVersions included.
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free one. Keep it on loopback:
    /// there is no authentication (a bearer token is taken as a user name).
    pub bind: SocketAddr,
    /// How many changes are kept for watches to resume from; a watch from
    /// an older resourceVersion gets 410 Gone.
    pub history_limit: usize,
    /// Upper bound on the bytes of that history (stored JSON); whichever
    /// limit is reached first applies.
    pub history_bytes: usize,
    /// The node pods are bound to.
    pub node_name: String,
    /// The local runner.
    pub runner: RunnerConfig,
    /// Whether requests are checked against the stored RBAC objects and
    /// impersonation rights ([`Authorization::Rbac`]) or all allowed
    /// ([`Authorization::AlwaysAllow`], the default).
    pub authorization: Authorization,
    /// How long an Event lives after its last write (kube-apiserver's
    /// `--event-ttl`, whose default of one hour is this one's).
    pub event_ttl: std::time::Duration,
}

impl Config {
    /// Defaults: loopback on a free port, 100 000 changes (at most 256 MiB)
    /// of history, node
    /// `weft-dev`, runner on.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Config {
            data_dir: data_dir.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 100_000,
            history_bytes: 256 * 1024 * 1024,
            node_name: "weft-dev".into(),
            runner: RunnerConfig::default(),
            authorization: Authorization::AlwaysAllow,
            event_ttl: std::time::Duration::from_secs(3600),
        }
    }

    /// The same configuration with another authorization mode, e.g.
    /// `Config::new(dir).with_authorization(Authorization::Rbac)`.
    pub fn with_authorization(mut self, authorization: Authorization) -> Self {
        self.authorization = authorization;
        self
    }
}

/// A running dev cluster. Dropping it without [`DevCluster::shutdown`]
/// leaves its tasks running until the runtime stops.
pub struct DevCluster {
    addr: SocketAddr,
    cx: Arc<api::Cluster>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl DevCluster {
    /// Opens the store in `config.data_dir`, binds the listener and starts
    /// serving, with the garbage collector, the quota controller and the
    /// runner beside it.
    pub async fn start(config: Config) -> Result<DevCluster> {
        let limits = store::HistoryLimits {
            events: config.history_limit,
            bytes: config.history_bytes,
        };
        let store = store::Store::open(&config.data_dir, limits)?;
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|e| Error::Bind(config.bind, e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Bind(config.bind, e))?;
        let cx = Arc::new(api::Cluster {
            store,
            registry: registry::Registry::new(),
            gc: tokio::sync::Notify::new(),
            addr: addr.to_string(),
            node_name: config.node_name.clone(),
            runner_enabled: config.runner.enabled,
            data_dir: config.data_dir.clone(),
            live_logs: Mutex::new(HashSet::new()),
            audit: audit::AuditLog::default(),
            authorization: config.authorization,
        });
        cx.bootstrap()
            .await
            .map_err(|e| Error::Storage(e.message))?;
        let (shutdown, rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        tasks.spawn(accept_loop(listener, cx.clone(), rx.clone()));
        tasks.spawn(gc::run(cx.clone(), rx.clone()));
        tasks.spawn(event_ttl::run(cx.clone(), config.event_ttl, rx.clone()));
        tasks.spawn(quota_controller::run(cx.clone(), rx.clone()));
        if config.runner.enabled {
            tasks.spawn(runner::run(cx.clone(), config.runner.clone(), rx.clone()));
        }
        tracing::info!(%addr, data_dir = %config.data_dir.display(), authorization = ?config.authorization, "dev cluster serving");
        Ok(DevCluster {
            addr,
            cx,
            shutdown,
            tasks,
        })
    }

    /// Every resource request so far (the most recent 100,000), in order:
    /// which user (bearer token, or the impersonated user) used which verb
    /// on which resource. Requests refused by RBAC are not recorded.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.cx.audit.records()
    }

    /// The audit log with each request's arrival time, oldest first: the
    /// server's request log (e.g. to check a client's rate limit).
    pub fn audit_timed(&self) -> Vec<(std::time::SystemTime, AuditRecord)> {
        self.cx.audit.timed()
    }

    /// The address the API server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, what a kubeconfig's `server` holds.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this cluster (context `weft-dev`, namespace
    /// `default`, no credentials: the server does not authenticate). With
    /// [`Authorization::Rbac`] its user is the cluster admin.
    pub fn kubeconfig(&self) -> String {
        kubeconfig_for(&self.base_url())
    }

    /// A kubeconfig whose user is `user` (sent as the bearer token, which
    /// the dev cluster takes as the user name), e.g.
    /// `system:serviceaccount:weft-system:weft-controller`. For kube-rs:
    /// kubectl (client-go) reads credentials only for `https://` servers,
    /// so it never sends the token here; `kubectl --as USER` acts as a user.
    pub fn kubeconfig_as(&self, user: &str) -> String {
        kubeconfig_with_token(&self.base_url(), user)
    }

    /// Writes [`DevCluster::kubeconfig`] to `path`, creating parent
    /// directories.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::Io(parent.to_path_buf(), e))?;
        }
        std::fs::write(path, self.kubeconfig()).map_err(|e| Error::Io(path.to_path_buf(), e))
    }

    /// Stops serving, stops local processes, and closes the database so the
    /// same data directory can be opened again.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        while let Some(r) = tokio::time::timeout(Duration::from_secs(10), self.tasks.join_next())
            .await
            .ok()
            .flatten()
        {
            if let Err(e) = r
                && e.is_panic()
            {
                tracing::error!("dev cluster task panicked: {e}");
            }
        }
        self.tasks.abort_all();
        self.cx.store.close().await;
    }
}

/// The kubeconfig YAML for a server URL.
pub fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: weft-dev
  cluster:
    server: {server}
users:
- name: weft-dev
  user: {{}}
contexts:
- name: weft-dev
  context:
    cluster: weft-dev
    user: weft-dev
    namespace: default
current-context: weft-dev
"
    )
}

/// The kubeconfig YAML for a server URL and a bearer token (the user name,
/// for the dev cluster).
pub fn kubeconfig_with_token(server: &str, token: &str) -> String {
    let token = serde_json::Value::from(token);
    kubeconfig_for(server).replace("  user: {}", &format!("  user:\n    token: {token}"))
}

/// What `weft dev` runs: start, write the kubeconfig, serve until Ctrl-C.
pub async fn run_until_ctrl_c(config: Config, kubeconfig: &Path) -> Result<()> {
    let cluster = DevCluster::start(config).await?;
    cluster.write_kubeconfig(kubeconfig)?;
    println!("weft dev cluster serving at {}", cluster.base_url());
    println!("kubeconfig written to {}", kubeconfig.display());
    if cluster.cx.authorization == Authorization::Rbac {
        println!(
            "RBAC is enforced: this kubeconfig is the cluster admin; a bearer token names any other user"
        );
    }
    println!(
        "pods run as local processes on this machine: images are not pulled, only command/args run"
    );
    let _ = tokio::signal::ctrl_c().await;
    cluster.shutdown().await;
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    cx: Arc<api::Cluster>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let cx = cx.clone();
                let rx = shutdown.clone();
                conns.spawn(async move {
                    let svc = service_fn(move |req| server::handle(cx.clone(), rx.clone(), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    conns.abort_all();
}
