//! Archives of versions a head no longer holds but running Workflows pin,
//! so that a restarted loader still has them; and pruning: versions no
//! running Workflow pins are unloaded and their archives deleted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use weft_plugin::{Manifest, Plugin, engine::Digest};

use super::package::{self, Body, Head, LABEL_ARCHIVE, Stored};
use super::{HotLoader, Rejection, key_of};
use crate::api::Workflow;

/// The field manager of the loader's archives of pinned versions.
pub const ARCHIVE_MANAGER: &str = "weft-plugin-archive";

impl HotLoader {
    /// Writes a replaced version that running workflows pin as an archive
    /// ConfigMap, so a restarted controller can still serve them (without
    /// it, after a restart only each plugin's current version would load and
    /// pinned workflows would move to it). Unpinned: nothing to keep.
    pub(super) async fn archive_if_pinned(
        &self,
        key: &(String, String),
        plugin: &str,
        old: &Stored,
    ) {
        match self.pins().await {
            Ok(pins) if !pins.contains_key(&(plugin.to_string(), old.digest)) => return,
            Ok(_) => {}
            // Unknown: keep it; the next prune deletes it if nobody pins it.
            Err(e) => tracing::debug!("cannot list Workflows for plugin pins: {e}"),
        }
        self.write_archive(key, plugin, old).await;
    }

    /// Writes `old` of `plugin` (head `key`) as an archive ConfigMap, which
    /// the loader loads on start.
    pub(super) async fn write_archive(&self, key: &(String, String), plugin: &str, old: &Stored) {
        if self.archives().contains_key(&old.digest) {
            return;
        }
        let packed = package::archive(&key.1, plugin, old);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let apply = PatchParams::apply(ARCHIVE_MANAGER).force();
        for cm in packed.parts.iter().chain([&packed.head]) {
            let name = cm.name_any();
            if let Err(e) = api.patch(&name, &apply, &Patch::Apply(cm)).await {
                tracing::warn!(configmap = %format!("{}/{name}", key.0), "cannot archive pinned plugin version {}: {e}", old.digest);
                return;
            }
            self.metrics.api_write("configmap");
        }
        tracing::info!(plugin, digest = %old.digest, configmap = %format!("{}/{}", key.0, packed.head.name_any()), "archived a plugin version its head no longer holds");
        self.archives()
            .insert(old.digest, (key.0.clone(), packed.head.name_any()));
    }

    pub(super) fn archives(&self) -> std::sync::MutexGuard<'_, BTreeMap<Digest, (String, String)>> {
        self.archives.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At start: loads every archived version (kept, not served), so the
    /// workflows pinned to them before a restart finish on them.
    pub(super) async fn load_archives(&self) {
        let namespaces: Vec<Option<String>> = if self.config.namespaces.is_empty() {
            vec![None]
        } else {
            self.config.namespaces.iter().cloned().map(Some).collect()
        };
        for ns in namespaces {
            let api: Api<ConfigMap> = match &ns {
                Some(ns) => Api::namespaced(self.client.clone(), ns),
                None => Api::all(self.client.clone()),
            };
            let list = match api.list(&ListParams::default().labels(LABEL_ARCHIVE)).await {
                Ok(l) => l.items,
                Err(e) => {
                    tracing::warn!("cannot list archived plugin versions: {e}");
                    continue;
                }
            };
            for cm in list {
                let key = key_of(&cm);
                match self.load_archive(&cm).await {
                    Ok(plugin) => {
                        let digest = plugin.digest();
                        tracing::info!(plugin = %plugin.manifest().name, %digest, configmap = %format!("{}/{}", key.0, key.1), "archived plugin version loaded for pinned workflows");
                        self.registry.retain(plugin);
                        self.archives().insert(digest, key);
                    }
                    Err(e) => {
                        tracing::warn!(configmap = %format!("{}/{}", key.0, key.1), "cannot load archived plugin version: {e}")
                    }
                }
            }
        }
    }

    pub(super) async fn load_archive(&self, cm: &ConfigMap) -> Result<Plugin, Rejection> {
        let (ns, name) = key_of(cm);
        let origin = format!("configmap {ns}/{name}");
        let head = Head::parse(cm)?;
        let manifest = Manifest::parse(&head.manifest, &origin)?;
        let packed = match head.body {
            Body::Inline(b) => b,
            Body::Parts(names) => self.fetch_parts(&ns, names).await?,
        };
        let (engine, cap, digest) = (self.engine.clone(), self.config.max_size, head.digest);
        tokio::task::spawn_blocking(move || -> Result<Plugin, Rejection> {
            let (bytes, _) = package::unpack(&packed, digest, cap)?;
            Ok(Plugin::load(&engine, &bytes, manifest, &origin)?.0)
        })
        .await
        .map_err(|e| {
            Rejection::Load(weft_plugin::plugin::LoadError {
                origin: format!("configmap {ns}/{name}"),
                problem: weft_plugin::plugin::LoadProblem::Compile(format!("panicked: {e}")),
            })
        })?
    }

    /// Deletes the archives of versions no running workflow pins (a
    /// rollback target stays loaded in memory, but needs no archive: only
    /// pins must survive a restart).
    pub(super) async fn prune_archives(&self, pins: &BTreeMap<(String, Digest), usize>) {
        let stable = self.rollout_stables();
        let gone: Vec<(Digest, (String, String))> = self
            .archives()
            .iter()
            .filter(|(d, _)| !pins.keys().any(|(_, p)| p == *d) && !stable.contains(*d))
            .map(|(d, k)| (*d, k.clone()))
            .collect();
        for (digest, (ns, name)) in gone {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
            // Part by part (list and delete, no deletecollection: the Role
            // grants only what the controller uses).
            let parts = ListParams::default().labels(&format!("{}={name}", package::LABEL_PART));
            for part in api.list(&parts).await.map(|l| l.items).unwrap_or_default() {
                let _ = api.delete(&part.name_any(), &Default::default()).await;
            }
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::debug!("cannot delete plugin archive {ns}/{name}: {e}");
                    continue;
                }
            }
            self.metrics.api_write("configmap");
            tracing::info!(%digest, configmap = %format!("{ns}/{name}"), "plugin archive deleted: no running workflow pins it");
            self.archives().remove(&digest);
        }
    }

    /// Unloads versions no running Workflow pins, and refreshes status.
    pub async fn prune(&self) {
        let pins = match self.pins().await {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("cannot list Workflows for plugin pins: {e}");
                return;
            }
        };
        for (name, digest) in self
            .registry
            .prune(|n, d| pins.contains_key(&(n.to_string(), d)))
        {
            let snap = self.registry.snapshot();
            if snap.version(digest).is_none() {
                self.engine.forget(digest);
            }
            self.metrics.plugin_unload(&name);
            tracing::info!(plugin = %name, %digest, "plugin version unloaded: no running workflow pins it");
        }
        self.prune_archives(&pins).await;
        let keys: Vec<_> = self.sources().keys().cloned().collect();
        for key in keys {
            self.write_status(&key, &pins).await;
        }
    }

    /// (plugin, digest) -> running Workflows whose nodes used it: from the
    /// controller's cache when it lent one (`crate::live`), else listed.
    pub(super) async fn pins(&self) -> Result<BTreeMap<(String, Digest), usize>, kube::Error> {
        let ns = self.config.workflow_namespace.as_deref();
        if let Some(store) = self.config.workflows.as_ref().and_then(|l| l.get()) {
            let all = store.state();
            let mine = all
                .iter()
                .filter(|w| ns.is_none() || w.namespace().as_deref() == ns);
            return Ok(count_pins(mine.map(|w| w.as_ref())));
        }
        let api: Api<Workflow> = match ns {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        Ok(count_pins(api.list(&ListParams::default()).await?.iter()))
    }
}

/// (plugin, digest) -> how many of `workflows` that still run used it.
fn count_pins<'a>(
    workflows: impl Iterator<Item = &'a Workflow>,
) -> BTreeMap<(String, Digest), usize> {
    let mut pins = BTreeMap::new();
    for status in workflows.filter_map(|wf| wf.status.as_ref()) {
        if status.phase.is_terminal() {
            continue;
        }
        let used: BTreeSet<(String, Digest)> = status
            .nodes
            .values()
            .filter_map(|n| n.plugin.as_ref())
            .filter_map(|p| Some((p.name.clone(), Digest::parse(&p.digest)?)))
            .collect();
        for u in used {
            *pins.entry(u).or_insert(0) += 1;
        }
    }
    pins
}
