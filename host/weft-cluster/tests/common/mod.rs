//! Helpers shared by the integration tests: a dev cluster in a temp dir and
//! a kube-rs client talking to it over real HTTP.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use kube::Client;
use weft_cluster::{Config, DevCluster, RunnerConfig};

/// A running cluster with its data directory.
pub struct TestCluster {
    pub cluster: DevCluster,
    pub dir: tempfile::TempDir,
    pub client: Client,
}

pub fn client_for(cluster: &DevCluster) -> Client {
    let config = kube::Config::new(cluster.base_url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

pub fn api_only(dir: &std::path::Path) -> Config {
    let mut c = Config::new(dir);
    c.runner.enabled = false;
    c
}

pub fn with_runner(dir: &std::path::Path) -> Config {
    let mut c = Config::new(dir);
    c.runner = RunnerConfig {
        enabled: true,
        restart_backoff: Duration::from_millis(100),
        max_restart_backoff: Duration::from_millis(400),
        simulate_all: false,
    };
    c
}

pub async fn start_with(f: impl FnOnce(&std::path::Path) -> Config) -> TestCluster {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = DevCluster::start(f(dir.path())).await.expect("start");
    let client = client_for(&cluster);
    TestCluster {
        cluster,
        dir,
        client,
    }
}

pub async fn start() -> TestCluster {
    start_with(api_only).await
}

/// Polls `f` until it returns Some, failing the test after a generous
/// deadline (a hang is a failure, not a speed measurement).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Status of a failed kube-rs call.
pub fn status_of<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Real kubectl against a test cluster, with its own kubeconfig and cache.
pub struct Kubectl {
    pub kubeconfig: std::path::PathBuf,
    cache: std::path::PathBuf,
}

impl Kubectl {
    pub fn new(t: &TestCluster) -> Option<Self> {
        if std::process::Command::new("kubectl")
            .args(["version", "--client"])
            .output()
            .is_err()
        {
            eprintln!("SKIPPED: kubectl is not on PATH");
            return None;
        }
        let kubeconfig = t.dir.path().join("kubeconfig");
        t.cluster.write_kubeconfig(&kubeconfig).unwrap();
        Some(Kubectl {
            kubeconfig,
            cache: t.dir.path().join("kube-cache"),
        })
    }

    pub fn cmd(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl; (success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.cmd(args).output().await.expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    pub async fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a).await).unwrap()
    }
}

/// Writes `body` to `dir/name`; returns the path.
pub fn write(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}
