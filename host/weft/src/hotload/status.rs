//! What the loader reports: the `weft.dev/plugin-status` annotation on
//! each head ([`PluginStatus`], read back by `weft plugin status`), and
//! Events on the ConfigMaps.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_plugin::{Pinning, engine::Digest};

use super::package::{self, ANNOTATION_STATUS, LABEL_PLUGIN};
use super::{HotLoader, rollout};

/// What the loader knows of a plugin, as kept in the `weft.dev/plugin-status`
/// annotation of its head ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// The plugin name (from the manifest).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plugin: String,
    /// Where the ConfigMap's version stands: `compiling`, `serving`,
    /// `rejected` (the previous version, if any, keeps serving),
    /// `conflict` (another plugin owns one of its task types), `shadow` or
    /// `canary` (rolled out beside the serving version) or `aborted` (its
    /// roll-out was aborted; the serving version stays).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The roll-out under way, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<rollout::RolloutStatus>,
    /// The task-type conflict it is part of, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// The version serving new work (manifest version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The digest serving new work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// The digest the ConfigMap holds (differs from `serving` after a
    /// rejection or a rollback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// `pinned` or `latest`.
    #[serde(default)]
    pub pinning: String,
    /// Other loaded versions, with how many running Workflows pin each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedVersion>,
    /// Running Workflows pinned to the serving digest.
    #[serde(default)]
    pub pins: usize,
    /// Why the last change was rejected, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The circuit breaker's last trip, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerStatus>,
}

/// A loaded version that is not the serving one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetainedVersion {
    /// Its digest.
    pub digest: String,
    /// Its manifest version.
    pub version: String,
    /// Running Workflows pinned to it.
    pub pins: usize,
}

/// The circuit breaker's last trip of a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakerStatus {
    /// The version that faulted.
    pub tripped: String,
    /// The version it was rolled back to (none: it had no earlier version).
    pub rolled_back_to: Option<String>,
    /// Faults counted in the window.
    pub faults: u32,
    /// The last fault.
    pub last_error: String,
}

/// Reads the status annotations of every plugin ConfigMap in `namespace`
/// (all when `None`), for `weft plugin status`.
pub async fn read_status(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<(String, String, Option<PluginStatus>, Option<String>)>, kube::Error> {
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = api
        .list(&ListParams::default().labels(LABEL_PLUGIN))
        .await?;
    Ok(list
        .items
        .into_iter()
        .map(|cm| {
            let status = cm
                .annotations()
                .get(ANNOTATION_STATUS)
                .and_then(|s| serde_json::from_str(s).ok());
            let desired = cm
                .data
                .as_ref()
                .and_then(|d| d.get(package::KEY_DIGEST).cloned());
            (
                cm.namespace().unwrap_or_default(),
                cm.name_any(),
                status,
                desired,
            )
        })
        .collect())
}

impl HotLoader {
    /// The status of the plugin of one head ConfigMap.
    pub fn status(
        &self,
        key: &(String, String),
        pins: &BTreeMap<(String, Digest), usize>,
    ) -> Option<PluginStatus> {
        let source = self.sources().get(key).cloned()?;
        let snap = self.registry.snapshot();
        let name = source
            .plugin
            .clone()
            .or_else(|| source.compiling.as_ref().map(|c| c.0.clone()))
            .unwrap_or_default();
        let conflict = snap
            .conflicts()
            .values()
            .find(|c| c.losers.contains(&name))
            .map(|c| c.to_string());
        let current = snap.plugins().get(&name);
        let pin = |d: Digest| pins.get(&(name.clone(), d)).copied().unwrap_or(0);
        let retained = snap
            .retained()
            .iter()
            .filter(|(_, p)| p.manifest().name == name)
            .map(|(d, p)| RetainedVersion {
                digest: d.to_string(),
                version: p.manifest().version.clone(),
                pins: pin(*d),
            })
            .collect();
        let trips = self.registry.trips();
        let rollout = snap.rollout(&name).map(|r| rollout::status(&snap, r));
        let state = if source.compiling.is_some() {
            "compiling"
        } else if source.conflict || conflict.is_some() {
            "conflict"
        } else if source.error.is_some() {
            "rejected"
        } else if let Some(r) = &rollout {
            if r.mode == weft_plugin::rollout::RolloutMode::Shadow {
                "shadow"
            } else {
                "canary"
            }
        } else if source.rollout == Some(package::HeadRollout::Aborted) {
            "aborted"
        } else if current.is_some() {
            "serving"
        } else {
            "withdrawn"
        };
        Some(PluginStatus {
            plugin: name.clone(),
            state: state.into(),
            rollout,
            conflict,
            version: current.map(|p| p.manifest().version.clone()),
            serving: current.map(|p| p.digest().to_string()),
            desired: source
                .compiling
                .map(|c| c.1)
                .or(source.desired)
                .map(|d| d.to_string()),
            pinning: match snap.pinning(&name) {
                Pinning::Pinned => "pinned".into(),
                Pinning::Latest => "latest".into(),
            },
            retained,
            pins: current.map(|p| pin(p.digest())).unwrap_or(0),
            error: source.error.clone(),
            breaker: trips.get(&name).map(|t| BreakerStatus {
                tripped: t.from.to_string(),
                rolled_back_to: t.to.map(|d| d.to_string()),
                faults: t.faults,
                last_error: t.last_error.clone(),
            }),
        })
    }

    pub(super) async fn write_status(
        &self,
        key: &(String, String),
        pins: &BTreeMap<(String, Digest), usize>,
    ) {
        let Some(status) = self.status(key, pins) else {
            return;
        };
        let text = serde_json::to_string(&status).unwrap_or_default();
        if self.sources().get(key).and_then(|s| s.written.clone()) == Some(text.clone()) {
            return;
        }
        if self.annotate(key, json!({ANNOTATION_STATUS: text})).await
            && let Some(s) = self.sources().get_mut(key)
        {
            s.written = Some(text);
        }
    }

    pub(super) async fn annotate(
        &self,
        key: &(String, String),
        annotations: serde_json::Value,
    ) -> bool {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let patch = json!({"metadata": {"annotations": annotations}});
        match api
            .patch(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.metrics.api_write("configmap");
                true
            }
            Err(e) => {
                tracing::debug!("cannot annotate configmap {}/{}: {e}", key.0, key.1);
                false
            }
        }
    }

    pub(super) async fn publish_event(
        &self,
        cm: &ConfigMap,
        kind: &str,
        reason: &str,
        message: &str,
    ) {
        crate::events::record_event(&self.client, &self.metrics, cm, kind, reason, message).await;
    }
}
