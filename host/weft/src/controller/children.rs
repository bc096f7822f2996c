//! The resources task plugins create, watched kind by kind.
//!
//! A kind is watched from the moment a loaded plugin declares it (pods at
//! start; SparkApplications when the spark plugin appears), through one
//! reflector per kind limited to what Weft manages. Every change to a child
//! wakes the Workflow that owns it.

mod cached;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt, channel::mpsc};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};

use crate::api::Workflow;
pub use cached::CachedChild;

/// A watched child kind.
#[derive(Clone)]
pub struct ChildKind {
    /// How to reach it.
    pub resource: ApiResource,
    /// What the watch has seen (compact: [`CachedChild`]).
    pub store: Store<CachedChild>,
}

/// Wakes the controller for a Workflow when one of its children changes.
pub type Wake = mpsc::UnboundedReceiver<ObjectRef<Workflow>>;

/// Every watched child kind, and the channel that wakes owners.
pub struct Children {
    client: Client,
    /// Watch children only here (the controller's `--namespace`), so a
    /// namespaced install needs no cluster-wide permission.
    namespace: Option<String>,
    kinds: Mutex<HashMap<(String, String), ChildKind>>,
    wake: mpsc::UnboundedSender<ObjectRef<Workflow>>,
    watches: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Children observed in the cache since this process started, so that
    /// one vanishing mid-task reads as deleted rather than not yet created.
    observed: Mutex<std::collections::HashSet<String>>,
    /// Children the API server refused to create (key -> why): the next
    /// round fails their node instead of asking again forever.
    denied: Mutex<HashMap<String, String>>,
    /// Children refused for an exceeded quota (or throttled): their
    /// nodes wait and the create is tried again with back-off.
    pub waits: super::quota::Waits,
}

/// A kind the API server does not serve: its CRD is not installed (yet).
/// Normal for optional operators (Spark, Ray, Kubeflow, Tekton): the kind
/// is watched once a workflow needs it and the CRD is there.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not served by the API server (is its CRD installed?)")]
pub struct NotInstalled(pub String);

/// Label on every resource Weft creates (the host sets it on every build).
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=weft";

impl Children {
    /// A new set watching `namespace` (all when `None`), and the stream of
    /// Workflows to wake.
    pub fn new_in(client: Client, namespace: Option<String>) -> (Arc<Self>, Wake) {
        let (wake, rx) = mpsc::unbounded();
        let children = Arc::new(Children {
            client,
            namespace,
            kinds: Mutex::new(HashMap::new()),
            wake,
            watches: Mutex::new(Vec::new()),
            observed: Mutex::new(std::collections::HashSet::new()),
            denied: Mutex::new(HashMap::new()),
            waits: Default::default(),
        });
        (children, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ChildKind>> {
        self.kinds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that a child (`ns/apiVersion/kind/name`) was observed.
    pub fn seen(&self, key: &str) {
        let mut seen = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.contains(key) {
            seen.insert(key.to_string());
        }
    }

    /// Whether a child was observed before.
    pub fn was_seen(&self, key: &str) -> bool {
        self.observed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    /// Records that the API server refused to create a child.
    pub fn deny(&self, key: &str, why: String) {
        self.denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), why);
    }

    /// Why the API server refused a child, once (the node fails with it).
    pub fn take_denied(&self, key: &str) -> Option<String> {
        self.denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
    }

    /// Puts a Workflow in the queue (something it waits on changed).
    pub fn wake(&self, namespace: &str, name: &str) {
        let _ = self
            .wake
            .unbounded_send(ObjectRef::new(name).within(namespace));
    }

    /// Forgets a child (it finished or went away).
    pub fn forget(&self, key: &str) {
        self.observed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Stops every child watch (the controller is shutting down).
    pub fn stop(&self) {
        for w in self
            .watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            w.abort();
        }
    }

    /// The kind, if watched.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<ChildKind> {
        self.lock()
            .get(&(api_version.to_string(), kind.to_string()))
            .cloned()
    }

    /// Every live child of a Workflow (by its `weft.dev/workflow` label) in
    /// the watch caches, with its `weft.dev/node` label: what pod GC
    /// deletes, found again after a restart.
    pub fn of_workflow(&self, namespace: &str, workflow: &str) -> Vec<(ChildKind, String, String)> {
        let kinds: Vec<ChildKind> = self.lock().values().cloned().collect();
        let mut out = Vec::new();
        for k in kinds {
            for obj in k.store.state() {
                let labels = obj.metadata.labels.as_ref();
                let label = |l: &str| labels.and_then(|m| m.get(l)).cloned();
                let ours = obj.metadata.namespace.as_deref() == Some(namespace)
                    && label(weft_plugin::plugin::LABEL_WORKFLOW).as_deref() == Some(workflow)
                    && obj.metadata.deletion_timestamp.is_none();
                if let (true, Some(name), Some(node)) = (
                    ours,
                    obj.metadata.name.clone(),
                    label(weft_plugin::plugin::LABEL_NODE),
                ) {
                    out.push((k.clone(), name, node));
                }
            }
        }
        out
    }

    /// The child as last seen, if its kind is watched and it exists.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<CachedChild>> {
        let k = self.kind(api_version, kind)?;
        k.store
            .get(&ObjectRef::new_with(name, k.resource.clone()).within(namespace))
    }

    /// Start watching a kind unless already watched. Asks API discovery for
    /// the kind's real plural and scope.
    pub async fn ensure(&self, api_version: &str, kind: &str) -> anyhow::Result<ChildKind> {
        if let Some(k) = self.kind(api_version, kind) {
            return Ok(k);
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| match e {
                kube::Error::Api(s) if s.code == 404 => {
                    anyhow::Error::new(NotInstalled(format!("{api_version}/{kind}")))
                }
                e => anyhow::anyhow!("cannot watch {api_version}/{kind}: {e}"),
            })?;
        let mut kinds = self.lock();
        if let Some(k) = kinds.get(&(api_version.to_string(), kind.to_string())) {
            return Ok(k.clone());
        }
        let writer = reflector::store::Writer::<CachedChild>::new(resource.clone());
        let store = writer.as_reader();
        let api: Api<DynamicObject> = match &self.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let config = watcher::Config::default().labels(MANAGED_SELECTOR);
        let wake = self.wake.clone();
        let label = format!("{api_version}/{kind}");
        let task = tokio::spawn(async move {
            let mut events = watcher(api, config)
                .default_backoff()
                .map_ok(compact)
                .reflect(writer)
                .touched_objects()
                .boxed();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(obj) => {
                        let ns = obj.metadata.namespace.clone().unwrap_or_default();
                        for owner in obj.metadata.owner_references.iter().flatten() {
                            if owner.kind == "Workflow"
                                && owner.api_version == crate::api::API_VERSION
                            {
                                let _ =
                                    wake.unbounded_send(ObjectRef::new(&owner.name).within(&ns));
                            }
                        }
                    }
                    Err(e) => tracing::warn!(kind = %label, "child watch: {e}"),
                }
            }
        });
        self.watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task.abort_handle());
        let k = ChildKind { resource, store };
        kinds.insert((api_version.to_string(), kind.to_string()), k.clone());
        tracing::info!(api_version, kind, "watching child kind");
        Ok(k)
    }
}

/// A watch event with its object in the cache's compact form.
fn compact(ev: watcher::Event<DynamicObject>) -> watcher::Event<CachedChild> {
    use watcher::Event;
    match ev {
        Event::Apply(o) => Event::Apply(CachedChild::new(o)),
        Event::Delete(o) => Event::Delete(CachedChild::new(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(CachedChild::new(o)),
        Event::InitDone => Event::InitDone,
    }
}
