//! Shadow and canary roll-outs from head ConfigMaps (see
//! [`super::package`]): `data.rollout` loads the head's version beside the
//! serving one instead of publishing it; removing it promotes the
//! candidate, `aborted` drops it. The serving version is archived while
//! its head holds the candidate, so a restarted loader finds it again (its
//! digest is the `serving` of the head's status annotation).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_plugin::{
    Plugin,
    engine::Digest,
    registry::{Snapshot, Trip},
    rollout::{Rollout, RolloutMode, ShadowStats},
};

use super::package::{ANNOTATION_STATUS, HeadRollout, KEY_ROLLOUT};
use super::{HotLoader, Loaded, PluginStatus, Rejection};

/// A roll-out as `weft plugin status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// `shadow` or `canary`.
    pub mode: RolloutMode,
    /// The candidate's digest.
    pub candidate: String,
    /// The candidate's manifest version.
    pub version: String,
    /// New workflows routed while it ran, and of those to the candidate.
    pub routed: u64,
    /// Workflows that went to the candidate.
    pub to_candidate: u64,
    /// The shadow comparison (shadow only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowStats>,
}

/// The status of `r`.
pub(super) fn status(snap: &Snapshot, r: &Rollout) -> RolloutStatus {
    let (routed, to_candidate) = r.routed();
    RolloutStatus {
        mode: r.mode,
        candidate: r.candidate.to_string(),
        version: snap
            .version(r.candidate)
            .map(|p| p.manifest().version.clone())
            .unwrap_or_default(),
        routed,
        to_candidate,
        shadow: (r.mode == RolloutMode::Shadow).then(|| r.shadow()),
    }
}

impl HotLoader {
    /// The head's version as a shadow or canary beside the serving one.
    pub(super) async fn roll_out(
        &self,
        key: &(String, String),
        cm: &ConfigMap,
        l: Loaded,
        mode: RolloutMode,
    ) {
        let name = l.plugin.manifest().name.clone();
        let Some(stable) = self.serving_or_restored(cm, &name) else {
            let why = format!(
                "plugin {name:?} has no serving version to roll {mode} out beside: push it without --shadow or --canary first"
            );
            return self.rejected(key, cm, Rejection::Rollout(why)).await;
        };
        let candidate = (l.plugin.digest(), l.plugin.manifest().version.clone());
        if let Err(why) = self.registry.start_rollout(l.plugin, mode) {
            return self.rejected(key, cm, Rejection::Rollout(why)).await;
        }
        drop(l.loading);
        let kept = {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            s.plugin = Some(name.clone());
            s.desired = Some(candidate.0);
            s.error = None;
            s.conflict = false;
            s.rollout = Some(HeadRollout::Start(mode));
            // `stored` stays the serving version's: archived below.
            s.stored.clone()
        };
        if let Some(old) = kept.filter(|o| o.digest == stable.digest()) {
            self.write_archive(key, &name, &old).await;
        }
        self.metrics.plugin_load(&name, "loaded", "rollout");
        let message = format!(
            "plugin {name} {} ({}) rolled out as {mode} beside {} ({})",
            candidate.1,
            candidate.0,
            stable.manifest().version,
            stable.digest()
        );
        tracing::info!(configmap = %format!("{}/{}", key.0, key.1), plugin = %name, "{message}");
        self.publish_event(cm, "Normal", "PluginRolloutStarted", &message)
            .await;
        self.write_status(key, &Default::default()).await;
    }

    /// `rollout: aborted`: the candidate goes (workflows already on it
    /// keep it), the serving version stays.
    pub(super) async fn keep_stable(&self, key: &(String, String), cm: &ConfigMap, l: Loaded) {
        let name = l.plugin.manifest().name.clone();
        drop(l.loading);
        self.serving_or_restored(cm, &name);
        let aborted = self.registry.abort_rollout(&name);
        {
            let mut sources = self.sources();
            let s = sources.entry(key.clone()).or_default();
            s.plugin = Some(name.clone());
            s.desired = Some(l.plugin.digest());
            s.error = None;
            s.rollout = Some(HeadRollout::Aborted);
        }
        if let Some(r) = aborted {
            let message = format!(
                "plugin {name}: the {} of {} was aborted",
                r.mode, r.candidate
            );
            tracing::info!(configmap = %format!("{}/{}", key.0, key.1), plugin = %name, "{message}");
            self.publish_event(cm, "Normal", "PluginRolloutAborted", &message)
                .await;
        }
        self.write_status(key, &Default::default()).await;
    }

    /// The breaker aborted a failing candidate: record it on the head
    /// (`rollout: aborted`, so a restart does not bring it back).
    pub(super) async fn candidate_tripped(&self, trip: Trip) {
        self.metrics.rollout_aborted(&trip.plugin);
        let Some(key) = self.source_of(&trip.plugin) else {
            return;
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let message = format!(
            "the circuit breaker aborted the roll-out of plugin {} {}: {} faults, the last: {}",
            trip.plugin, trip.from, trip.faults, trip.last_error
        );
        tracing::warn!(configmap = %format!("{}/{}", key.0, key.1), "{message}");
        if let Ok(cm) = api.get(&key.1).await {
            self.publish_event(&cm, "Warning", "PluginRolloutAborted", &message)
                .await;
        }
        let patch = json!({"data": {KEY_ROLLOUT: "aborted"}});
        if api
            .patch(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            self.metrics.api_write("configmap");
        }
    }

    /// The plugin's serving version; after a restart, the one its head's
    /// status names, from the archives loaded at start.
    fn serving_or_restored(&self, cm: &ConfigMap, name: &str) -> Option<Plugin> {
        let snap = self.registry.snapshot();
        if let Some(p) = snap.plugins().get(name) {
            return Some(p.clone());
        }
        let status: PluginStatus =
            serde_json::from_str(cm.annotations().get(ANNOTATION_STATUS)?).ok()?;
        let digest = Digest::parse(status.serving.as_deref()?)?;
        let stable = snap.version(digest)?;
        self.registry.publish(stable.clone());
        tracing::info!(plugin = name, %digest, "serving version restored from its archive");
        Some(stable)
    }

    /// Serving versions whose head holds another (a roll-out, or an aborted
    /// one): their archives stay.
    pub(super) fn rollout_stables(&self) -> BTreeSet<Digest> {
        let snap = self.registry.snapshot();
        self.sources()
            .values()
            .filter(|s| s.rollout.is_some())
            .filter_map(|s| snap.plugins().get(s.plugin.as_deref()?))
            .map(|p| p.digest())
            .collect()
    }
}

/// The head's name of plugin `plugin`'s ConfigMap, for the CLI's promote
/// and abort.
pub async fn find_head(api: &Api<ConfigMap>, plugin: &str) -> anyhow::Result<ConfigMap> {
    use kube::api::ListParams;
    let heads = api
        .list(&ListParams::default().labels(&format!("{}={plugin}", super::package::LABEL_PLUGIN)))
        .await?;
    match heads.items.len() {
        0 => anyhow::bail!(
            "no plugin ConfigMap labelled {}={plugin} here",
            super::package::LABEL_PLUGIN
        ),
        1 => Ok(heads.items.into_iter().next().expect("one")),
        n => anyhow::bail!(
            "{n} ConfigMaps are labelled {}={plugin}: name one",
            super::package::LABEL_PLUGIN
        ),
    }
}
