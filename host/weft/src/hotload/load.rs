//! Loading one version: the head read, its parts fetched and checked,
//! the component compiled off the async runtime; then published (or
//! rejected, saying why) in the registry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};
use serde_json::json;
use weft_plugin::{Manifest, Plugin};

use super::package::{
    self, ANNOTATION_CLAIMED_AT, ANNOTATION_ERROR, Body, Head, LABEL_PLUGIN, Problem, Stored,
};
use super::{HotLoader, Loaded, Rejection, claimed_at, key_of};

impl HotLoader {
    /// A new version passed every check: publish it (or roll it out, as
    /// its head asks).
    pub(super) async fn loaded(
        &self,
        key: &(String, String),
        cm: &ConfigMap,
        l: Loaded,
        took: Duration,
    ) {
        match l.rollout {
            Some(package::HeadRollout::Start(mode)) => {
                return self.roll_out(key, cm, l, mode).await;
            }
            Some(package::HeadRollout::Aborted) => return self.keep_stable(key, cm, l).await,
            None => {}
        }
        let name = l.plugin.manifest().name.clone();
        let version = l.plugin.manifest().version.clone();
        let digest = l.plugin.digest();
        let (previous_name, previous_stored) = {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            let prev = s.plugin.replace(name.clone());
            s.desired = Some(digest);
            s.error = None;
            s.conflict = false;
            s.rollout = None;
            (prev, s.stored.replace(l.stored.clone()))
        };
        if let Some(prev) = previous_name.filter(|p| *p != name) {
            self.registry.withdraw(&prev);
        }
        self.registry.set_pinning(&name, l.pinning);
        let claimed = l
            .since
            .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().as_millisecond());
        self.registry.set_claimed_at(&name, claimed);
        if l.since.is_none() {
            self.annotate(key, json!({ANNOTATION_CLAIMED_AT: claimed.to_string()}))
                .await;
        }
        // A candidate being rolled out is promoted by serving it.
        self.registry.abort_rollout(&name);
        let replaced = self.registry.publish(l.plugin);
        drop(l.loading);
        if let Some(old) = previous_stored.filter(|o| Some(o.digest) == replaced) {
            self.archive_if_pinned(key, &name, &old).await;
        }
        self.metrics.plugin_load_latency(took);
        self.metrics
            .plugin_load(&name, "loaded", &format!("{:?}", l.source).to_lowercase());
        tracing::info!(
            configmap = %format!("{}/{}", key.0, key.1),
            plugin = %name, %version, %digest,
            replaced = ?replaced.map(|d| d.to_string()),
            compile = ?l.source, took_ms = took.as_millis() as u64,
            "plugin loaded from ConfigMap"
        );
        if cm.annotations().contains_key(ANNOTATION_ERROR) {
            self.annotate(key, json!({ANNOTATION_ERROR: null})).await;
        }
        self.publish_event(
            cm,
            "Normal",
            "PluginLoaded",
            &format!("plugin {name} {version} ({digest}) is serving"),
        )
        .await;
        self.write_status(key, &BTreeMap::new()).await;
        self.displaced(&name).await;
        self.retry_conflicts().await;
    }

    /// A version was refused: the previous one (if any) keeps serving.
    pub(super) async fn rejected(
        &self,
        key: &(String, String),
        cm: &ConfigMap,
        rejection: Rejection,
    ) {
        let message = rejection.to_string();
        let conflict = matches!(rejection, Rejection::Conflict { .. });
        let plugin = self
            .sources()
            .get(key)
            .and_then(|s| s.plugin.clone())
            .or_else(|| cm.labels().get(LABEL_PLUGIN).cloned())
            .unwrap_or_default();
        {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            s.error = Some(message.clone());
            s.conflict = conflict;
            s.desired = Head::parse(cm).ok().and_then(|h| h.digest);
        }
        self.metrics
            .plugin_load(&plugin, "rejected", rejection.metric_label());
        tracing::warn!(
            configmap = %format!("{}/{}", key.0, key.1),
            reason = rejection.metric_label(),
            "plugin ConfigMap rejected, the previous version keeps serving: {message}"
        );
        self.annotate(key, json!({ANNOTATION_ERROR: message.clone()}))
            .await;
        let reason = if conflict {
            "PluginConflict"
        } else {
            "PluginRejected"
        };
        self.publish_event(cm, "Warning", reason, &message).await;
        self.write_status(key, &BTreeMap::new()).await;
    }

    /// After `winner` was published: tells the owners of other plugins that
    /// lost a task type to it (a higher priority, or the operator's choice).
    pub(super) async fn displaced(&self, winner: &str) {
        let snap = self.registry.snapshot();
        let lost: Vec<_> = snap
            .conflicts()
            .values()
            .filter(|c| c.winner == winner)
            .cloned()
            .collect();
        for c in lost {
            for loser in &c.losers {
                let Some(key) = self.source_of(loser) else {
                    tracing::warn!(plugin = %loser, "{c}");
                    continue;
                };
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
                if let Ok(cm) = api.get(&key.1).await {
                    self.publish_event(&cm, "Warning", "PluginConflict", &c.to_string())
                        .await;
                }
                self.write_status(&key, &BTreeMap::new()).await;
            }
        }
    }

    /// The head ConfigMap that provides plugin `name`.
    pub(super) fn source_of(&self, name: &str) -> Option<(String, String)> {
        self.sources()
            .iter()
            .find(|(_, s)| s.plugin.as_deref() == Some(name))
            .map(|(k, _)| k.clone())
    }

    /// Assemble, check and compile one head ConfigMap.
    pub(super) async fn load(&self, cm: &ConfigMap) -> Result<Loaded, Rejection> {
        let (ns, name) = key_of(cm);
        let origin = format!("configmap {ns}/{name}");
        let head = Head::parse(cm)?;
        let manifest = Manifest::parse(&head.manifest, &origin)?;
        if let Some(other) = self
            .source_of(&manifest.name)
            .filter(|k| *k != (ns.clone(), name.clone()))
        {
            return Err(Rejection::Duplicate {
                name: manifest.name,
                other: format!("{}/{}", other.0, other.1),
            });
        }
        // Who claimed a task type first: when its plugin first served, as
        // recorded on its ConfigMap (creationTimestamp counts whole seconds,
        // too coarse for two pushes in a row); one that never served comes
        // after every plugin that does.
        let since = claimed_at(cm);
        if let Some(c) = self
            .registry
            .snapshot()
            .would_lose(&manifest, since.unwrap_or(i64::MAX))
        {
            let source_of_winner = self
                .source_of(&c.winner)
                .map(|(n, m)| format!(" (configmap {n}/{m})"))
                .unwrap_or_default();
            return Err(Rejection::Conflict {
                plugin: manifest.name,
                task_type: c.task_type,
                winner: c.winner,
                source_of_winner,
                why: c.why,
            });
        }
        // Its Secrets, as missing until read: a change to any of them loads
        // it again if this version is rejected.
        let named = crate::secrets::refs(&manifest.config)?;
        if let Some(s) = self.sources().get_mut(&(ns.clone(), name.clone())) {
            s.secrets = named
                .into_iter()
                .map(|(_, r)| ((ns.clone(), r.name), None))
                .collect();
        }
        // From here until it is published or rejected, work for its task
        // types waits for this version.
        let loading = self
            .registry
            .begin_loading(&manifest.name, &manifest.task_types);
        if let Some(d) = head.digest {
            let key = (ns.clone(), name.clone());
            if let Some(s) = self.sources().get_mut(&key) {
                s.compiling = Some((manifest.name.clone(), d));
            }
            self.write_status(&key, &BTreeMap::new()).await;
        }
        let packed = match head.body {
            Body::Inline(b) => b,
            Body::Parts(names) => self.fetch_parts(&ns, names).await?,
        };
        let engine = self.engine.clone();
        let cap = self.config.max_size;
        let digest = head.digest;
        let pinning = head.pinning;
        let rollout = head.rollout;
        let manifest_text = head.manifest.clone();
        let compiled = tokio::task::spawn_blocking(move || -> Result<_, Rejection> {
            let (bytes, digest) = package::unpack(&packed, digest, cap)?;
            let stored = Arc::new(Stored {
                manifest: manifest_text,
                digest,
                pinning,
                packed,
            });
            let (plugin, source) = Plugin::load(&engine, &bytes, manifest, &origin)?;
            Ok((plugin, source, stored))
        })
        .await
        .unwrap_or_else(|e| {
            Err(Rejection::Load(weft_plugin::plugin::LoadError {
                origin: format!("configmap {ns}/{name}"),
                problem: weft_plugin::plugin::LoadProblem::Compile(format!(
                    "compilation panicked: {e}"
                )),
            }))
        });
        let (plugin, source, stored) = compiled?;
        let (plugin, versions) = self.configure(&plugin, &ns).await?;
        if let Some(s) = self.sources().get_mut(&(ns.clone(), name.clone())) {
            s.secrets = versions;
        }
        Ok(Loaded {
            plugin,
            pinning,
            source,
            since,
            loading,
            stored,
            rollout,
        })
    }

    /// Reads the parts of a split component, under the size cap.
    pub(super) async fn fetch_parts(
        &self,
        ns: &str,
        names: Vec<String>,
    ) -> Result<Vec<u8>, Rejection> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let mut packed = Vec::new();
        for part in names {
            let cm = api.get(&part).await.map_err(|source| Rejection::Fetch {
                name: part.clone(),
                source,
            })?;
            let bytes = package::part_bytes(&cm).ok_or_else(|| Problem::Part {
                name: part.clone(),
                problem: format!("no binaryData.{}", package::KEY_PART),
            })?;
            if packed.len() + bytes.len() > self.config.max_size {
                return Err(Problem::TooLarge {
                    limit: self.config.max_size,
                }
                .into());
            }
            packed.extend_from_slice(bytes);
        }
        Ok(packed)
    }
}
