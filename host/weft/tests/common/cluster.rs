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

    /// A namespace of the calling test's own on the real control plane
    /// (named after the test, which libtest runs on a thread of its name),
    /// with an admin kubeconfig at `kubeconfig` whose context names it.
    pub fn test_namespace(kubeconfig: &std::path::Path) -> String {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("test").rsplit("::").next().unwrap();
        let mut ns: String = test
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(50)
            .collect();
        ns = format!("{}-{n}", ns.trim_matches('-'));
        k8s::shared().namespace(&ns, kubeconfig);
        ns
    }

    /// Stops the dev cluster (the real one stops with the test process).
    pub async fn stop(self) {
        if let Some((_dir, c)) = self.dev {
            c.shutdown().await;
        }
    }
}

/// A test's own place to work: on the dev cluster a cluster of its own
/// (namespace `default`); on the real control plane, which the tests of a
/// file share, a namespace of its own. `kubeconfig`'s context names the
/// namespace, so kubectl and `weft` without `-n` use it, and `client`
/// defaults to it.
pub struct Bed {
    pub dir: tempfile::TempDir,
    /// The dev cluster; none on the real control plane.
    pub cluster: Option<weft_cluster::DevCluster>,
    pub kubeconfig: PathBuf,
    pub client: Client,
    pub ns: String,
}

impl Bed {
    /// The bed [`SWITCH`] names, with Weft's CRDs installed.
    pub async fn start() -> Bed {
        Self::start_with(weft_cluster::Authorization::AlwaysAllow).await
    }

    /// [`Bed::start`] with the dev cluster enforcing RBAC as the real
    /// control plane does (the admin kubeconfig stays `system:masters`).
    pub async fn start_rbac() -> Bed {
        Self::start_with(weft_cluster::Authorization::Rbac).await
    }

    /// A second namespace beside the bed's (`{ns}-{suffix}`), created.
    pub async fn namespace_beside(&self, suffix: &str) -> String {
        let ns = format!("{}-{suffix}", self.ns);
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(self.client.clone());
        let mut object = k8s_openapi::api::core::v1::Namespace::default();
        object.metadata.name = Some(ns.clone());
        api.create(&Default::default(), &object).await.unwrap();
        ns
    }

    async fn start_with(authorization: weft_cluster::Authorization) -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (cluster, client, ns) = if real() {
            TestCluster::start().await;
            let ns = TestCluster::test_namespace(&kubeconfig);
            (None, k8s::client_for(&kubeconfig).await, ns)
        } else {
            let cluster = weft::dev::start_with(dir.path(), authorization)
                .await
                .expect("dev cluster");
            let client = weft::runtime::client_for(&cluster.base_url()).unwrap();
            weft::runtime::install_crd(&client).await.unwrap();
            (Some(cluster), client, "default".to_string())
        };
        Bed {
            dir,
            cluster,
            kubeconfig,
            client,
            ns,
        }
    }

    /// A file in the bed's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The flags that keep a `weft controller` to this bed: on the shared
    /// control plane, the test's namespace (its Workflows and its Lease).
    pub fn controller_args(&self) -> Vec<String> {
        match self.cluster {
            Some(_) => Vec::new(),
            None => vec![
                format!("--namespace={}", self.ns),
                format!("--leader-elect-namespace={}", self.ns),
            ],
        }
    }

    /// A `weft controller` process on this bed, with [`Self::controller_args`].
    pub fn controller(&self, identity: &str, args: &[&str]) -> super::ControllerProcess {
        let own = self.controller_args();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(own.iter().map(String::as_str));
        super::ControllerProcess::start(&self.kubeconfig, identity, &all)
    }

    /// What the in-process controller watches: the test's namespace on
    /// the shared control plane, everything on its own dev cluster.
    pub fn watched(&self) -> Option<String> {
        self.cluster.is_none().then(|| self.ns.clone())
    }

    /// Stops the dev cluster, or deletes the test's namespace (the
    /// namespace controller deletes what the test left in it).
    pub async fn stop(self) {
        match self.cluster {
            Some(c) => c.shutdown().await,
            None => {
                let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(self.client.clone());
                let _ = api.delete(&self.ns, &Default::default()).await;
            }
        }
    }
}
