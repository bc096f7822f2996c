//! What the controller benches share: the embedded dev cluster with every
//! pod simulated (no process, as kwok does), the first-party plugins, the
//! CRDs and a controller running against it.

use std::path::Path;
use std::sync::Arc;

/// A running simulated cluster and controller.
pub struct Simulated {
    /// A client of the cluster.
    pub client: kube::Client,
    /// The controller's context (its metrics).
    #[allow(dead_code, reason = "only some benches read the metrics")]
    pub ctx: Arc<weft::controller::Context>,
    /// The loaded plugins.
    #[allow(dead_code, reason = "only the console bench serves the admin API")]
    pub registry: Arc<weft_plugin::Registry>,
    cluster: weft_cluster::DevCluster,
    _dir: tempfile::TempDir,
}

/// Starts the cluster (pods simulated) and the controller.
pub async fn simulated() -> anyhow::Result<Simulated> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir()?;
    let mut config = weft_cluster::Config::new(dir.path());
    config.runner.simulate_all = true;
    let cluster = weft_cluster::DevCluster::start(config).await?;
    let client = weft::runtime::client_for(&cluster.base_url())?;
    let (_engine, registry) = weft::runtime::load_plugins(&root.join("target/plugins"), None)?;
    weft::runtime::install_crd(&client).await?;
    // The controller starts once its settings are in: CONCURRENT_RECONCILES
    // (`--concurrent-reconciles`, default 0: no limit).
    let (go, gate) = tokio::sync::oneshot::channel::<()>();
    let start = async {
        let _ = gate.await;
    };
    let (ctx, _controller) = weft::runtime::spawn_controller_after(
        client.clone(),
        registry.clone(),
        None,
        start,
        std::future::pending(),
    );
    if let Ok(n) = std::env::var("CONCURRENT_RECONCILES") {
        ctx.set_concurrency(n.parse()?);
    }
    let _ = go.send(());
    Ok(Simulated {
        client,
        ctx,
        registry,
        cluster,
        _dir: dir,
    })
}

impl Simulated {
    /// Stops the cluster (the controller stops with the process).
    #[allow(dead_code, reason = "not every bench shuts down explicitly")]
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

/// A pod task the simulated cluster "runs" in 10 ms (no process).
#[allow(dead_code, reason = "only some benches build workflows of their own")]
pub fn simulated_task() -> serde_json::Value {
    serde_json::json!({"type": "pod", "config": {"image": "busybox", "command": ["true"],
        "annotations": {"weft.dev/simulate": "true", "weft.dev/simulate-duration": "10ms"}}})
}

/// Creates the Workflow `name` with `spec` and waits until it succeeds;
/// how long that took from the create (an error if it did not succeed).
#[allow(dead_code, reason = "only some benches build workflows of their own")]
pub async fn run_to_success(
    api: &kube::Api<weft::api::Workflow>,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<std::time::Duration> {
    let spec: weft_dag::WorkflowSpec = serde_json::from_value(spec)?;
    let start = std::time::Instant::now();
    let wf = weft::api::Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
    api.create(&Default::default(), &wf).await?;
    loop {
        let w = api.get(name).await?;
        if let Some(s) = w.status.as_ref().filter(|s| s.phase.is_terminal()) {
            anyhow::ensure!(
                s.phase == weft_dag::WorkflowPhase::Succeeded,
                "{name}: {:?}",
                s.message
            );
            return Ok(start.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
