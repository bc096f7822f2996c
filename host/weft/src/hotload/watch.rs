//! The loader's watch: plugin ConfigMaps followed with a kube-runtime
//! watcher, events coalesced per ConfigMap, deletions noticed on a relist,
//! breaker trips and Secret changes taken in the same loop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, runtime::watcher};
use weft_plugin::registry::Trip;

use super::package::LABEL_PLUGIN;
use super::{HotLoader, MAX_BATCH, fingerprint, key_of};

impl HotLoader {
    pub(super) fn watch(
        &self,
    ) -> BoxStream<'static, Result<watcher::Event<ConfigMap>, watcher::Error>> {
        self.watch_kind(watcher::Config::default().labels(LABEL_PLUGIN))
    }

    /// A watch of `K` in the plugin namespaces (all when none are set).
    pub(super) fn watch_kind<K>(
        &self,
        cfg: watcher::Config,
    ) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + 'static,
    {
        use kube::runtime::WatchStreamExt as _;
        // With backoff: an unreachable API server must not become a busy loop.
        if self.config.namespaces.is_empty() {
            watcher::watcher(Api::<K>::all(self.client.clone()), cfg)
                .default_backoff()
                .boxed()
        } else {
            futures::stream::select_all(self.config.namespaces.iter().map(|ns| {
                watcher::watcher(Api::<K>::namespaced(self.client.clone(), ns), cfg.clone())
                    .default_backoff()
                    .boxed()
            }))
            .boxed()
        }
    }

    /// Follows plugin ConfigMaps until `shutdown` resolves.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()> + Send) {
        let mut trips = self
            .trips
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("HotLoader::run is called once");
        // Archived versions first: they are part of what "synced" promises.
        self.load_archives().await;
        self.configure_dir_plugins().await;
        let mut events = self.watch();
        let mut secret_events = self.watch_secrets();
        let mut tick = tokio::time::interval(self.config.prune_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = std::pin::pin!(shutdown);
        // ConfigMaps seen during a (re)list, to notice deletions missed while
        // the watch was down.
        let mut listing: Option<BTreeSet<(String, String)>> = None;
        let mut lists_to_sync = self.config.namespaces.len().max(1);
        loop {
            let first = tokio::select! {
                _ = &mut shutdown => return,
                ev = events.next() => match ev {
                    Some(ev) => ev,
                    None => return,
                },
                Some(trip) = trips.recv() => {
                    self.tripped(trip).await;
                    continue;
                }
                Some(ev) = secret_events.next() => {
                    self.secret_event(ev).await;
                    continue;
                }
                _ = tick.tick() => {
                    // Not before the first sync: until every head has been
                    // read, an archived serving version (a roll-out's) looks
                    // unpinned and would be unloaded and deleted.
                    if *self.synced.borrow() {
                        self.prune().await;
                    }
                    continue;
                }
            };
            // Coalesce what is already queued: only the last state of each
            // ConfigMap matters.
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH
                && let Some(Some(ev)) = events.next().now_or_never()
            {
                batch.push(ev);
            }
            let mut changes: BTreeMap<(String, String), Option<ConfigMap>> = BTreeMap::new();
            let mut listed = 0;
            for ev in batch {
                match ev {
                    Ok(watcher::Event::Init) => listing = Some(BTreeSet::new()),
                    Ok(watcher::Event::InitApply(cm)) => {
                        if let Some(l) = listing.as_mut() {
                            l.insert(key_of(&cm));
                        }
                        changes.insert(key_of(&cm), Some(cm));
                    }
                    Ok(watcher::Event::InitDone) => {
                        listed += 1;
                        if let Some(seen) = listing.take() {
                            let gone: Vec<_> = self
                                .sources()
                                .keys()
                                .filter(|k| {
                                    !seen.contains(*k)
                                        && (self.config.namespaces.is_empty()
                                            || self.config.namespaces.contains(&k.0))
                                })
                                .cloned()
                                .collect();
                            for k in gone {
                                changes.entry(k).or_insert(None);
                            }
                        }
                    }
                    Ok(watcher::Event::Apply(cm)) => {
                        changes.insert(key_of(&cm), Some(cm));
                    }
                    Ok(watcher::Event::Delete(cm)) => {
                        changes.insert(key_of(&cm), None);
                    }
                    Err(e) => tracing::warn!("plugin ConfigMap watch: {e}"),
                }
            }
            for (key, change) in changes {
                match change {
                    Some(cm) => self.apply(cm).await,
                    None => self.deleted(&key).await,
                }
            }
            if lists_to_sync > 0 {
                lists_to_sync = lists_to_sync.saturating_sub(listed);
                if lists_to_sync == 0 {
                    self.synced.send_replace(true);
                }
            }
        }
    }

    /// One head ConfigMap created or changed.
    pub(super) async fn apply(&self, cm: ConfigMap) {
        let key = key_of(&cm);
        let fp = fingerprint(&cm);
        {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            if s.fingerprint == Some(fp) {
                return;
            }
            s.fingerprint = Some(fp);
            s.uid = cm.uid();
        }
        let started = Instant::now();
        let result = self.load(&cm).await;
        if let Some(s) = self.sources().get_mut(&key) {
            s.compiling = None;
        }
        match result {
            Ok(loaded) => self.loaded(&key, &cm, loaded, started.elapsed()).await,
            Err(rejection) => self.rejected(&key, &cm, rejection).await,
        }
    }

    /// Loads again the ConfigMaps that lost a task-type conflict: the
    /// plugin that beat them may be gone.
    pub(super) async fn retry_conflicts(&self) {
        let keys: Vec<_> = {
            let mut sources = self.sources();
            sources
                .iter_mut()
                .filter(|(_, s)| s.conflict)
                .map(|(k, s)| {
                    s.fingerprint = None;
                    k.clone()
                })
                .collect()
        };
        for key in keys {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
            if let Ok(cm) = api.get(&key.1).await {
                Box::pin(self.apply(cm)).await;
            }
        }
    }

    /// A head ConfigMap was deleted: new work no longer gets its plugin.
    pub(super) async fn deleted(&self, key: &(String, String)) {
        let Some(source) = self.sources().remove(key) else {
            return;
        };
        if let Some(name) = source.plugin {
            if let Some(d) = self.registry.withdraw(&name) {
                tracing::info!(
                    configmap = %format!("{}/{}", key.0, key.1),
                    plugin = %name, digest = %d,
                    "plugin ConfigMap deleted: no longer serving new work; unloading once unpinned"
                );
            }
            self.retry_conflicts().await;
            self.prune().await;
        }
    }

    /// The breaker rolled a plugin back (or could not).
    pub(super) async fn tripped(&self, trip: Trip) {
        if trip.rollout_aborted {
            return self.candidate_tripped(trip).await;
        }
        self.metrics.plugin_rollback(&trip.plugin);
        let key = self
            .sources()
            .iter()
            .find(|(_, s)| s.plugin.as_deref() == Some(trip.plugin.as_str()))
            .map(|(k, _)| k.clone());
        let message = match trip.to {
            Some(to) => format!(
                "plugin {} {} faulted {} times; rolled back to {to}: {}",
                trip.plugin, trip.from, trip.faults, trip.last_error
            ),
            None => format!(
                "plugin {} {} faulted {} times and has no earlier version to roll back to: {}",
                trip.plugin, trip.from, trip.faults, trip.last_error
            ),
        };
        let Some(key) = key else { return };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        if let Ok(cm) = api.get(&key.1).await {
            self.publish_event(&cm, "Warning", "PluginRolledBack", &message)
                .await;
        }
        self.write_status(&key, &BTreeMap::new()).await;
    }
}
