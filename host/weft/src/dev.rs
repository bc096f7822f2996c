//! The embedded dev cluster as `weft run` and `weft dev` start it: the
//! `weft-cluster` API server and local pod runner, with a kubeconfig
//! written beside its data so `kubectl` can follow along.

use std::path::Path;

pub use weft_cluster::DevCluster;

/// Starts the dev cluster with its data in `dir` (reused across runs: a
/// restart resumes where the last run stopped) and writes `dir/kubeconfig`.
pub async fn start(dir: &Path) -> anyhow::Result<DevCluster> {
    std::fs::create_dir_all(dir)?;
    // Absolute: pods run in their own directories and are handed paths
    // under this one.
    let dir = &std::path::absolute(dir)?;
    let cluster = DevCluster::start(weft_cluster::Config::new(dir)).await?;
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig)?;
    tracing::info!(url = %cluster.base_url(), kubeconfig = %kubeconfig.display(), "dev cluster started");
    Ok(cluster)
}
