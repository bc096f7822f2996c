//! The local runner: the kubelet's role for the dev cluster's one node.
//!
//! The dev cluster has no scheduler, so its runner binds unbound pods to
//! itself; every pod then runs as [`pod`] describes, with the store read and
//! written in-process. `weft node` runs the same pod runs against any API
//! server (host/weft's `node` module).

pub mod pod;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::RunnerConfig;
use crate::api::Cluster;
use crate::registry::ResourceType;
use crate::store::EventKind;
pub use pod::{PodHost, Pods, log_path, pod_dir};

/// Runs until shutdown; on shutdown every local process is killed.
pub(crate) async fn run(cx: Arc<Cluster>, cfg: RunnerConfig, mut shutdown: watch::Receiver<bool>) {
    let mut rx = cx.store.subscribe();
    let mut pods = Pods::new(cx.clone(), cfg);
    resync(&cx, &mut pods);
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if ev.gr == "/pods" => {
                    pods.update(&ev.object, ev.kind == EventKind::Deleted);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => resync(&cx, &mut pods),
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = shutdown.changed() => break,
        }
    }
    pods.shutdown().await;
}

fn resync(cx: &Arc<Cluster>, pods: &mut Pods) {
    let (all, _) = cx.store.list("/pods", None);
    for p in all {
        pods.update(&p, false);
    }
}

fn pods_rt(cx: &Cluster) -> Arc<ResourceType> {
    cx.registry
        .lookup("", "v1", "pods")
        .expect("pods are built in")
}

impl PodHost for Cluster {
    fn node_name(&self) -> &str {
        &self.node_name
    }

    fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn service_port(&self) -> String {
        self.addr.rsplit(':').next().unwrap_or("").to_string()
    }

    fn binds(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        "the weft dev cluster".into()
    }

    fn modify<'a>(
        &'a self,
        pod: &'a Value,
        status: bool,
        f: Box<dyn FnOnce(&mut Value) + Send + 'a>,
    ) -> BoxFuture<'a, Option<Arc<Value>>> {
        async move {
            let rt = pods_rt(self);
            let ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
            let name = pod["metadata"]["name"].as_str().unwrap_or("");
            let (out, fut) = {
                let mut txn = self.store.begin();
                let cur = txn.get("/pods", ns, name)?;
                if cur["metadata"]["uid"] != pod["metadata"]["uid"] {
                    return None;
                }
                let mut new = (*cur).clone();
                f(&mut new);
                let out = self.system_replace(&mut txn, &rt, &cur, new, status).ok();
                (out, txn.commit())
            };
            fut.await.ok()?;
            out
        }
        .boxed()
    }

    fn create_event<'a>(&'a self, ns: &'a str, event: Value) -> BoxFuture<'a, ()> {
        async move {
            let Some(rt) = self.registry.lookup("", "v1", "events") else {
                return;
            };
            let fut = {
                let mut txn = self.store.begin();
                let _ = self.system_create(&mut txn, &rt, ns, event);
                txn.commit()
            };
            let _ = fut.await;
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        gr: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Arc<Value>>> {
        std::future::ready(self.store.get(gr, ns, name)).boxed()
    }

    /// Removes a pod whose deletion is due.
    fn finish<'a>(&'a self, pod: &'a Value) -> BoxFuture<'a, ()> {
        let rt = pods_rt(self);
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
        let name = pod["metadata"]["name"].as_str().unwrap_or("");
        let mut txn = self.store.begin();
        if txn
            .get("/pods", ns, name)
            .is_some_and(|p| p["metadata"]["uid"] == pod["metadata"]["uid"])
        {
            self.finish_delete(&mut txn, &rt, ns, name);
        }
        let fut = txn.commit();
        tokio::spawn(fut);
        let _ = std::fs::remove_dir_all(pod_dir(&self.data_dir, pod));
        std::future::ready(()).boxed()
    }

    fn live_logs(&self) -> &Mutex<HashSet<PathBuf>> {
        &self.live_logs
    }
}
