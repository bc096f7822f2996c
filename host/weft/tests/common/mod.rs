//! The end-to-end harness: a real embedded dev cluster (over HTTP), the real
//! plugins built from the repo (`make guests`), the real controller, and
//! kube-rs as the client, exactly as against a real cluster.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, PostParams},
    runtime::watcher,
};
use weft::api::Workflow;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A dev cluster with the controller running against it.
pub struct Env {
    pub client: Client,
    pub registry: std::sync::Arc<weft_plugin::Registry>,
    pub ctx: std::sync::Arc<weft::controller::Context>,
    pub loader: Option<std::sync::Arc<weft::hotload::HotLoader>>,
    pub cluster: Option<weft_cluster::DevCluster>,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stop_hotload: Option<tokio::sync::oneshot::Sender<()>>,
    controller: Option<tokio::task::JoinHandle<()>>,
}

impl Env {
    /// Starts everything in a fresh directory.
    pub async fn start() -> Env {
        Self::start_with(None).await
    }

    /// Starts everything, with plugins also hot-loaded from ConfigMaps.
    pub async fn start_hotload(config: weft::hotload::HotloadConfig) -> Env {
        Self::start_with(Some(config)).await
    }

    async fn start_with(hotload: Option<weft::hotload::HotloadConfig>) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let cluster = weft::dev::start(dir.path()).await.expect("dev cluster");
        let client = weft::runtime::client_for(&cluster.base_url()).unwrap();
        let plugins = root().join("target/plugins");
        assert!(
            plugins.join("pod.wasm").is_file(),
            "build the plugins first: make guests"
        );
        let (engine, registry) =
            weft::runtime::load_plugins(&plugins, Some(&root().join("target/weft-test-cache")))
                .unwrap();
        weft::runtime::install_crd(&client).await.unwrap();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let (ctx, controller) =
            weft::runtime::spawn_controller(client.clone(), registry.clone(), None, async {
                let _ = rx.await;
            });
        let (stop_hotload, hotload_rx) = tokio::sync::oneshot::channel::<()>();
        let loader = hotload.map(|config| {
            let (loader, _task) = weft::runtime::spawn_hotload(
                client.clone(),
                engine,
                registry.clone(),
                ctx.metrics.clone(),
                config,
                async {
                    let _ = hotload_rx.await;
                },
            );
            loader
        });
        if let Some(l) = &loader {
            l.synced().await;
        }
        Env {
            client,
            registry,
            ctx,
            loader,
            cluster: Some(cluster),
            dir,
            stop: Some(stop),
            stop_hotload: Some(stop_hotload),
            controller: Some(controller),
        }
    }

    /// Stops the controller, then the cluster.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop_hotload.take() {
            let _ = s.send(());
        }
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(c) = self.controller.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c).await;
        }
        if let Some(c) = self.cluster.take() {
            c.shutdown().await;
        }
    }

    pub fn workflows(&self) -> Api<Workflow> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Creates a Workflow from YAML (a `spec:` document), named `name`.
    pub async fn submit(&self, name: &str, spec_yaml: &str) -> Workflow {
        let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(spec_yaml).expect("spec YAML");
        let wf = Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
        self.workflows()
            .create(&PostParams::default(), &wf)
            .await
            .expect("create")
    }

    /// Waits until the Workflow satisfies `done`, up to `secs` seconds.
    pub async fn wait_for(
        &self,
        name: &str,
        secs: u64,
        done: impl Fn(&Workflow) -> bool,
    ) -> Workflow {
        let mut events = watcher::watch_object(self.workflows(), name).boxed();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut last = None;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(Some(wf)))) => {
                    if done(&wf) {
                        return wf;
                    }
                    last = Some(wf);
                }
                Ok(Some(Ok(None))) => {}
                Ok(Some(Err(e))) => panic!("watch failed: {e}"),
                Ok(None) => panic!("watch ended"),
                Err(_) => panic!(
                    "workflow {name} did not get there in {secs}s; last status: {}",
                    serde_json::to_string_pretty(&last.and_then(|w| w.status)).unwrap()
                ),
            }
        }
    }

    /// Waits for a terminal phase.
    pub async fn finish(&self, name: &str, secs: u64) -> Workflow {
        self.wait_for(name, secs, |wf| {
            wf.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await
    }

    /// The Pods of a workflow (by Weft's label).
    pub async fn pods_of(&self, workflow: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={workflow}")))
            .await
            .unwrap()
            .items
    }
}

/// The node's status.
pub fn node<'a>(wf: &'a Workflow, id: &str) -> &'a weft_dag::NodeStatus {
    &wf.status.as_ref().expect("status").nodes[id]
}

/// A pod's name.
pub fn name(p: &Pod) -> String {
    p.name_any()
}
