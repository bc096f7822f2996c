//! The task output cache, stored as Kubernetes objects: one `TaskCache`
//! per namespace and task type, `weft-cache-<type>`, labelled
//! `weft.dev/cache=true`, whose `spec.entries` maps a cache key (a sha256,
//! see `weft_dag::cache::key`) to the entry.
//!
//! Why a kind of Weft's own, one object per task type (as Argo keeps one
//! ConfigMap per cache): no database, RBAC and quotas apply per namespace,
//! `kubectl get taskcaches -o yaml` shows them, a watch keeps every
//! replica's view current, and the controller needs no access to
//! ConfigMaps, which hold other applications' configuration. The price is
//! size: an object holds at most about 1 MiB, so each is kept under
//! [`MAX_BYTES`] by evicting expired entries, then the oldest, and an entry
//! over [`MAX_ENTRY_BYTES`] is not stored at all. Look-ups read the watch
//! cache (memory, no API call); this process's own writes are seen at
//! once, before the watch brings them back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::{Value, json};
use weft_dag::cache::CacheEntry;

use crate::api::{TaskCache as CacheObject, TaskCacheSpec};
use crate::metrics::Metrics;

/// The label on TaskCaches.
pub const LABEL: &str = "weft.dev/cache";
/// The label naming a TaskCache's task type.
pub const TASK_TYPE_LABEL: &str = "weft.dev/task-type";
/// A TaskCache is kept under this many bytes of entries (etcd refuses
/// objects over about 1.5 MiB; 1 MiB is the usual request limit).
pub const MAX_BYTES: usize = 900 * 1024;
/// A bigger entry is not cached (its node still succeeds).
pub const MAX_ENTRY_BYTES: usize = 256 * 1024;
/// This process's own writes kept until the watch shows them.
const MAX_PENDING: usize = 10_000;
/// How long this process's own write is served before the watch must show
/// it: past this, an entry the watched object lacks was deleted (`weft
/// cache delete`) and is no longer served.
const PENDING_FOR: Duration = Duration::from_secs(30);

/// The TaskCache that holds a task type's entries.
pub fn object_name(task_type: &str) -> String {
    let t: String = task_type
        .to_lowercase()
        .chars()
        .map(
            |c| match c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
                true => c,
                false => '-',
            },
        )
        .collect();
    format!("weft-cache-{}", t.trim_matches('-'))
}

/// One entry to store after a round.
#[derive(Debug, Clone)]
pub struct CacheWrite {
    /// The task type (picks the TaskCache).
    pub task_type: String,
    /// The key.
    pub key: String,
    /// The entry.
    pub entry: CacheEntry,
}

/// The cache: the watched TaskCaches and this process's recent writes.
pub struct TaskCache {
    client: Client,
    store: Store<CacheObject>,
    pending: Mutex<HashMap<(String, String), (CacheEntry, std::time::Instant)>>,
    metrics: Arc<Metrics>,
    watch: Mutex<Option<tokio::task::AbortHandle>>,
}

impl TaskCache {
    /// Watches the TaskCaches in `namespace` (all when `None`).
    pub fn start(client: Client, namespace: Option<&str>, metrics: Arc<Metrics>) -> Arc<Self> {
        let api: Api<CacheObject> = match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (store, writer) = reflector::store();
        let cfg = watcher::Config::default().labels(&format!("{LABEL}=true"));
        let stream = reflector::reflector(writer, watcher::watcher(api, cfg).default_backoff())
            .applied_objects()
            .for_each(|_| futures::future::ready(()));
        let handle = tokio::spawn(stream).abort_handle();
        Arc::new(Self {
            client,
            store,
            pending: Mutex::new(HashMap::new()),
            metrics,
            watch: Mutex::new(Some(handle)),
        })
    }

    /// Stops the watch.
    pub fn stop(&self) {
        if let Some(h) = self.watch.lock().unwrap_or_else(|e| e.into_inner()).take() {
            h.abort();
        }
    }

    /// The entry for `key` if a reader with `max_age` may use it now.
    pub fn lookup(
        &self,
        namespace: &str,
        task_type: &str,
        key: &str,
        max_age: Option<Duration>,
        now: SystemTime,
    ) -> Option<CacheEntry> {
        let found = self.stored(namespace, task_type, key).or_else(|| {
            let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending
                .get(&(namespace.to_string(), key.to_string()))
                .filter(|(_, at)| at.elapsed() < PENDING_FOR)
                .map(|(e, _)| e.clone())
        });
        let hit = found.filter(|e| e.fresh(max_age, now));
        self.metrics.cache_lookup(task_type, hit.is_some());
        hit
    }

    fn stored(&self, namespace: &str, task_type: &str, key: &str) -> Option<CacheEntry> {
        let obj = self
            .store
            .get(&ObjectRef::new(&object_name(task_type)).within(namespace))?;
        obj.spec.entries.get(key).cloned()
    }

    /// Stores entries (after the round that produced them): one merge
    /// patch per TaskCache adds them and drops what must go to keep it
    /// under [`MAX_BYTES`]; a missing TaskCache is created.
    pub async fn write(&self, namespace: &str, writes: &[CacheWrite]) {
        let mut by_map: HashMap<String, Vec<&CacheWrite>> = HashMap::new();
        for w in writes {
            let json = serde_json::to_string(&w.entry).unwrap_or_default();
            if json.len() > MAX_ENTRY_BYTES {
                tracing::warn!(node = %w.entry.node, bytes = json.len(), "outputs too big to cache");
                continue;
            }
            by_map.entry(w.task_type.clone()).or_default().push(w);
        }
        for (task_type, ws) in by_map {
            self.remember(namespace, &ws);
            if let Err(e) = self.write_map(namespace, &task_type, &ws).await {
                tracing::warn!(%task_type, "cannot write the task cache: {e}");
            }
        }
    }

    fn remember(&self, namespace: &str, ws: &[&CacheWrite]) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.len() + ws.len() > MAX_PENDING {
            pending.retain(|_, (_, at)| at.elapsed() < PENDING_FOR);
        }
        let now = std::time::Instant::now();
        for w in ws {
            pending.insert((namespace.into(), w.key.clone()), (w.entry.clone(), now));
        }
    }

    async fn write_map(
        &self,
        namespace: &str,
        task_type: &str,
        ws: &[&CacheWrite],
    ) -> Result<(), kube::Error> {
        let name = object_name(task_type);
        let api: Api<CacheObject> = Api::namespaced(self.client.clone(), namespace);
        let current = self
            .store
            .get(&ObjectRef::new(&name).within(namespace))
            .map(|o| o.spec.entries.clone())
            .unwrap_or_default();
        let mut entries = serde_json::Map::new();
        for key in evictions(&current, ws, SystemTime::now()) {
            entries.insert(key, Value::Null);
        }
        for w in ws {
            let entry = serde_json::to_value(&w.entry).unwrap_or_default();
            entries.insert(w.key.clone(), entry);
        }
        let patch = json!({"spec": {"taskType": task_type, "entries": entries}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let spec = TaskCacheSpec {
                    task_type: task_type.to_string(),
                    entries: ws
                        .iter()
                        .map(|w| (w.key.clone(), w.entry.clone()))
                        .collect(),
                };
                let mut obj = CacheObject::new(&name, spec);
                obj.metadata.labels = Some(
                    [
                        (LABEL.to_string(), "true".to_string()),
                        (TASK_TYPE_LABEL.to_string(), label_value(task_type)),
                    ]
                    .into(),
                );
                match api.create(&PostParams::default(), &obj).await {
                    // Another replica created it first: add to it.
                    Err(kube::Error::Api(s)) if s.code == 409 => api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop),
                    other => other.map(drop),
                }
            }
            other => other.map(drop),
        }?;
        self.metrics.api_write("cache");
        Ok(())
    }

    /// Drops expired entries from every TaskCache (each writer's
    /// `maxAge`); run now and then, so a cache nobody writes shrinks too.
    pub async fn collect(&self) {
        let now = SystemTime::now();
        for obj in self.store.state() {
            let (Some(ns), Some(name)) =
                (obj.metadata.namespace.clone(), obj.metadata.name.clone())
            else {
                continue;
            };
            let expired: serde_json::Map<String, Value> = obj
                .spec
                .entries
                .iter()
                .filter(|(_, e)| e.expired(now))
                .map(|(k, _)| (k.clone(), Value::Null))
                .collect();
            if expired.is_empty() {
                continue;
            }
            let api: Api<CacheObject> = Api::namespaced(self.client.clone(), &ns);
            let patch = json!({"spec": {"entries": expired}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => self.metrics.api_write("cache"),
                Err(e) => tracing::debug!(taskcache = %name, "cannot collect expired entries: {e}"),
            }
        }
    }
}

/// A task type as a label value.
pub(crate) fn label_value(task_type: &str) -> String {
    task_type
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-_.".contains(c) {
            true => c,
            false => '-',
        })
        .take(63)
        .collect()
}

/// The keys to drop so that `ws` fit: expired entries first, then the
/// oldest, until the entries are under [`MAX_BYTES`].
fn evictions(
    current: &std::collections::BTreeMap<String, CacheEntry>,
    ws: &[&CacheWrite],
    now: SystemTime,
) -> Vec<String> {
    let bytes = |k: &str, e: &CacheEntry| k.len() + serde_json::to_string(e).map_or(0, |s| s.len());
    let adding: usize = ws.iter().map(|w| bytes(&w.key, &w.entry)).sum();
    let mut size: usize = current.iter().map(|(k, e)| bytes(k, e)).sum::<usize>() + adding;
    let mut entries: Vec<(bool, &str, &String, usize)> = current
        .iter()
        .filter(|(k, _)| !ws.iter().any(|w| &w.key == *k))
        .map(|(k, e)| (!e.expired(now), e.created_at.as_str(), k, bytes(k, e)))
        .collect();
    // Expired (keep = false) first, then oldest first.
    entries.sort();
    let mut out = Vec::new();
    for (keep, _, k, n) in entries {
        if keep && size <= MAX_BYTES {
            break;
        }
        size -= n;
        out.push(k.clone());
    }
    out
}

#[cfg(test)]
mod tests;
