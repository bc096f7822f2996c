//! One switch for the suites that run on both test beds:
//! `WEFT_TEST_CLUSTER=dev` (the default: Weft's embedded dev cluster in the
//! test process) or `WEFT_TEST_CLUSTER=k8s` (the real control plane of
//! [`super::k8s`], one per test file, with a `weft node` to run pods).

use std::path::PathBuf;

use kube::Client;

use super::k8s::{self, NodeProcess};

/// The environment variable that picks the test bed.
pub const SWITCH: &str = "WEFT_TEST_CLUSTER";

/// Whether this run is on the real control plane.
pub fn real() -> bool {
    match std::env::var(SWITCH).as_deref() {
        Ok("k8s") => true,
        Ok("dev") | Err(_) => false,
        Ok(other) => panic!("{SWITCH}={other}: use dev or k8s"),
    }
}

/// A cluster to drive with kubectl, kube-rs and `weft` processes.
pub struct TestCluster {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// An admin client, for this test's runtime.
    pub client: Client,
    /// Which bed this is, for messages.
    pub name: &'static str,
    dev: Option<(tempfile::TempDir, weft_cluster::DevCluster)>,
}

static NODE: std::sync::OnceLock<NodeProcess> = std::sync::OnceLock::new();

impl TestCluster {
    /// The bed [`SWITCH`] names, with Weft's CRDs installed.
    pub async fn start() -> TestCluster {
        let tc = if real() {
            let cluster = k8s::shared();
            NODE.get_or_init(|| {
                let node = NodeProcess::start(cluster, "weft-1");
                cluster.adopt(node.pid());
                node
            });
            TestCluster {
                kubeconfig: cluster.kubeconfig.clone(),
                client: cluster.client().await,
                name: "kube-apiserver",
                dev: None,
            }
        } else {
            let dir = tempfile::tempdir().unwrap();
            let cluster = weft::dev::start(dir.path()).await.expect("dev cluster");
            TestCluster {
                kubeconfig: dir.path().join("kubeconfig"),
                client: weft::runtime::client_for(&cluster.base_url()).unwrap(),
                name: "the dev cluster",
                dev: Some((dir, cluster)),
            }
        };
        weft::runtime::install_crd(&tc.client).await.unwrap();
        tc
    }

    /// Stops the dev cluster (the real one stops with the test process).
    pub async fn stop(self) {
        if let Some((_dir, c)) = self.dev {
            c.shutdown().await;
        }
    }
}
