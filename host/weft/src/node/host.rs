//! The pod runs' view of a real API server: [`PodHost`] through kube-rs.
//!
//! Status is written as a merge patch of the whole `status` with the pod's
//! uid as a precondition, so a pod deleted and created again under the same
//! name is never written by the old run, and no read-modify-write races the
//! controllers that patch labels or annotations.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};
use weft_cluster::runner::{PodHost, pod_dir};

/// One node's link to the API server, and the pods it last saw (for the
/// kubelet endpoint's log lookups).
pub struct KubeHost {
    pub(super) client: Client,
    pub(super) name: String,
    pub(super) data_dir: PathBuf,
    pub(super) service_port: String,
    pub(super) live: Arc<Mutex<HashSet<PathBuf>>>,
    pub(super) seen: Mutex<HashMap<(String, String), Arc<Value>>>,
}

impl KubeHost {
    /// The pod `ns/name` as this node last saw it.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// Remembers (or, when `gone`, forgets) a pod's latest state.
    pub fn saw(&self, pod: &Arc<Value>, gone: bool) {
        let key = (field(pod, "namespace"), field(pod, "name"));
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if gone {
            seen.remove(&key);
        } else {
            seen.insert(key, pod.clone());
        }
    }

    fn pods(&self, pod: &Value) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &field(pod, "namespace"))
    }
}

fn field(pod: &Value, f: &str) -> String {
    pod["metadata"][f].as_str().unwrap_or("").to_string()
}

impl PodHost for KubeHost {
    fn node_name(&self) -> &str {
        &self.name
    }

    fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn service_port(&self) -> String {
        self.service_port.clone()
    }

    fn binds(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        format!("weft node {}", self.name)
    }

    fn modify<'a>(
        &'a self,
        pod: &'a Value,
        status: bool,
        f: Box<dyn FnOnce(&mut Value) + Send + 'a>,
    ) -> BoxFuture<'a, Option<Arc<Value>>> {
        async move {
            let mut new = pod.clone();
            f(&mut new);
            let part = if status { "status" } else { "spec" };
            let patch = json!({"metadata": {"uid": pod["metadata"]["uid"]}, part: new[part]});
            let api = self.pods(pod);
            let name = field(pod, "name");
            let params = PatchParams::default();
            let done = match status {
                true => {
                    api.patch_status(&name, &params, &Patch::Merge(&patch))
                        .await
                }
                false => api.patch(&name, &params, &Patch::Merge(&patch)).await,
            };
            match done {
                Ok(p) => serde_json::to_value(p).ok().map(Arc::new),
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "pod {part} not written");
                    None
                }
            }
        }
        .boxed()
    }

    fn create_event<'a>(&'a self, ns: &'a str, event: Value) -> BoxFuture<'a, ()> {
        async move {
            let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
            let Ok(ev) = serde_json::from_value::<Event>(event) else {
                return;
            };
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        gr: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Arc<Value>>> {
        async move {
            let c = self.client.clone();
            let v = match gr {
                "/secrets" => serde_json::to_value(
                    Api::<Secret>::namespaced(c, ns)
                        .get_opt(name)
                        .await
                        .ok()??,
                ),
                _ => serde_json::to_value(
                    Api::<ConfigMap>::namespaced(c, ns)
                        .get_opt(name)
                        .await
                        .ok()??,
                ),
            };
            v.ok().map(Arc::new)
        }
        .boxed()
    }

    /// The kubelet's last word on a pod: delete it with grace 0 once its
    /// processes are gone (uid precondition: never a namesake).
    fn finish<'a>(&'a self, pod: &'a Value) -> BoxFuture<'a, ()> {
        async move {
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: pod["metadata"]["uid"].as_str().map(String::from),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            let name = field(pod, "name");
            if let Err(e) = self.pods(pod).delete(&name, &dp).await {
                tracing::debug!(pod = %name, error = %e, "final delete");
            }
            let _ = std::fs::remove_dir_all(pod_dir(&self.data_dir, pod));
        }
        .boxed()
    }

    fn live_logs(&self) -> &Mutex<HashSet<PathBuf>> {
        &self.live
    }
}
