//! The embedded dev cluster, as `weft run` and `weft dev` start it.

use std::path::Path;

/// A running dev cluster.
pub struct DevCluster {
    url: String,
}

impl DevCluster {
    /// Its base URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }
}

/// Starts the dev cluster with its data in `dir`.
pub async fn start(dir: &Path) -> anyhow::Result<DevCluster> {
    anyhow::bail!(
        "the embedded dev cluster is not wired yet (data dir {})",
        dir.display()
    )
}
