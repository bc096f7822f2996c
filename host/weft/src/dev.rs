//! The embedded dev cluster as `weft run` and `weft dev` start it: the
//! `weft-cluster` API server and local pod runner, with a kubeconfig
//! written beside its data so `kubectl` can follow along.

use std::path::Path;

pub use weft_cluster::DevCluster;

/// Starts the dev cluster with its data in `dir` (reused across runs: a
/// restart resumes where the last run stopped) and writes `dir/kubeconfig`.
/// It authorizes as `WEFT_DEV_AUTHORIZATION_MODE` says (`RBAC`, or the
/// default `AlwaysAllow`).
pub async fn start(dir: &Path) -> anyhow::Result<DevCluster> {
    let mode = weft_cluster::Authorization::from_env()?.unwrap_or_default();
    start_with(dir, mode).await
}

/// [`start`] with RBAC on or off whatever the environment says (tests).
pub async fn start_with(
    dir: &Path,
    authorization: weft_cluster::Authorization,
) -> anyhow::Result<DevCluster> {
    std::fs::create_dir_all(dir)?;
    // Absolute: pods run in their own directories and are handed paths
    // under this one.
    let dir = &std::path::absolute(dir)?;
    let config = weft_cluster::Config::new(dir).with_authorization(authorization);
    let cluster = DevCluster::start(config).await?;
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig)?;
    tracing::info!(url = %cluster.base_url(), kubeconfig = %kubeconfig.display(), ?authorization, "dev cluster started");
    Ok(cluster)
}
