//! The registry's immutable snapshot: which plugin version serves each
//! task type and middleware slot, decided once when a snapshot is built
//! (enabled lists, defaults, claims between plugins), then read lock-free.

use std::{collections::BTreeMap, sync::Arc};

use super::{Error, Pinning, RegistryConfig, UNARY_MIDDLEWARE};
use crate::rollout::{Rollout, RolloutMode};
use crate::{
    engine::Digest,
    manifest::{Manifest, World},
    plugin::{MiddlewarePlugin, Plugin, TaskPlugin},
    webapi::WebApiPlugin,
};

/// Loaded versions beyond the current ones: what pinned workflows and
/// rollbacks need. Cloned with each snapshot (it only holds `Arc`s).
#[derive(Debug, Default, Clone)]
pub(super) struct Versions {
    /// Loaded versions that are not current, by digest.
    pub(super) retained: BTreeMap<Digest, Plugin>,
    /// Earlier good versions per plugin name, oldest first (rollback targets).
    pub(super) history: BTreeMap<String, Vec<Digest>>,
    /// Pinning policy per plugin name (absent: [`Pinning::Pinned`]).
    pub(super) policies: BTreeMap<String, Pinning>,
    /// When each plugin name first claimed its task types (e.g. its
    /// ConfigMap's creation time, Unix milliseconds); absent: loaded at
    /// start, which counts as first.
    pub(super) claimed_at: BTreeMap<String, i64>,
    /// The candidate version of a plugin being rolled out (shadow or
    /// canary), by plugin name; the candidate itself is in `retained`.
    pub(super) rollouts: BTreeMap<String, Rollout>,
}

/// A task type that several enabled plugins claim, and which one owns it.
/// Ownership is decided the same way on every replica and after every
/// restart: the operator's `defaultForTaskTypes`, else the higher manifest
/// `priority`, else the plugin that claimed it first, else the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The task type.
    pub task_type: String,
    /// The plugin that serves it.
    pub winner: String,
    /// The plugins that claim it and do not serve it.
    pub losers: Vec<String>,
    /// Why the winner won, for messages.
    pub why: String,
}

/// One claimant of a task type, ranked.
#[derive(Debug, Clone)]
pub(super) struct Claim {
    pub(super) name: String,
    pub(super) priority: i32,
    pub(super) since: i64,
}

/// Picks the owner of `task_type` among `claims` (non-empty); `Err` when
/// the operator named a default that does not claim it.
pub(super) fn decide(
    task_type: &str,
    claims: &[Claim],
    config: &RegistryConfig,
) -> Result<(usize, String), Error> {
    if let Some(chosen) = config.default_for_task_types.get(task_type) {
        return match claims.iter().position(|c| &c.name == chosen) {
            Some(i) => Ok((i, "the operator's defaultForTaskTypes".into())),
            None => Err(Error::BadDefault {
                task_type: task_type.into(),
                plugin: chosen.clone(),
            }),
        };
    }
    let (i, best) = claims
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.key().cmp(&b.1.key()))
        .expect("at least one claim");
    let why = if claims
        .iter()
        .any(|c| c.name != best.name && c.priority < best.priority)
    {
        format!("higher priority {}", best.priority)
    } else if claims
        .iter()
        .any(|c| c.name != best.name && c.since > best.since)
    {
        "it was loaded first".to_string()
    } else {
        "same priority and load time: first by name".to_string()
    };
    Ok((i, why))
}

/// One consistent view of the registry.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub(super) plugins: BTreeMap<String, Plugin>,
    pub(super) versions: Versions,
    pub(super) task_types: BTreeMap<String, Arc<TaskPlugin>>,
    /// Task types served by web-API plugins (none a k8s-task plugin serves).
    pub(super) webapi: BTreeMap<String, Arc<WebApiPlugin>>,
    pub(super) conflicts: BTreeMap<String, Conflict>,
    pub(super) config: RegistryConfig,
    pub(super) slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>>,
    pub(super) problems: Vec<Error>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "task type {:?} is claimed by {} and {}; {} serves it ({})",
            self.task_type,
            self.winner,
            self.losers.join(", "),
            self.winner,
            self.why
        )
    }
}

impl Claim {
    /// Ordering key: the best claim is the smallest.
    pub(super) fn key(&self) -> (std::cmp::Reverse<i32>, i64, &str) {
        (std::cmp::Reverse(self.priority), self.since, &self.name)
    }
}

impl Versions {
    pub(super) fn claim(&self, m: &Manifest) -> Claim {
        Claim {
            name: m.name.clone(),
            priority: m.priority,
            since: self.claimed_at.get(&m.name).copied().unwrap_or(i64::MIN),
        }
    }
}

impl Snapshot {
    pub(super) fn build(
        plugins: BTreeMap<String, Plugin>,
        versions: Versions,
        config: &RegistryConfig,
    ) -> Snapshot {
        let enabled = |name: &str| config.enabled.as_ref().is_none_or(|e| e.contains(name));
        let mut claims: BTreeMap<String, Vec<Arc<TaskPlugin>>> = BTreeMap::new();
        let mut slots: BTreeMap<String, Vec<Arc<MiddlewarePlugin>>> = BTreeMap::new();
        let mut webapi: BTreeMap<String, Arc<WebApiPlugin>> = BTreeMap::new();
        for (name, p) in &plugins {
            if !enabled(name) {
                continue;
            }
            match p {
                Plugin::Task(t) => {
                    for tt in &t.manifest().task_types {
                        claims.entry(tt.clone()).or_default().push(t.clone());
                    }
                }
                Plugin::Middleware(m) => {
                    slots
                        .entry(UNARY_MIDDLEWARE.into())
                        .or_default()
                        .push(m.clone());
                }
                Plugin::WebApi(w) => {
                    // The highest priority serves, then the first by name.
                    for tt in &w.manifest().task_types {
                        let e = webapi.entry(tt.clone()).or_insert_with(|| w.clone());
                        if w.manifest().priority > e.manifest().priority {
                            *e = w.clone();
                        }
                    }
                }
            }
        }
        for (slot, list) in &mut slots {
            let order = config.middleware_order.get(slot);
            let rank = |n: &str| {
                order
                    .and_then(|o| o.iter().position(|x| x == n))
                    .unwrap_or(usize::MAX)
            };
            list.sort_by(|a, b| {
                rank(a.name())
                    .cmp(&rank(b.name()))
                    .then(a.name().cmp(b.name()))
            });
        }
        let mut task_types = BTreeMap::new();
        let mut conflicts = BTreeMap::new();
        let mut problems = Vec::new();
        for (tt, list) in claims {
            let ranked: Vec<Claim> = list.iter().map(|p| versions.claim(p.manifest())).collect();
            match decide(&tt, &ranked, config) {
                Ok((i, why)) => {
                    if list.len() > 1 {
                        let losers = ranked
                            .iter()
                            .filter(|c| c.name != ranked[i].name)
                            .map(|c| c.name.clone())
                            .collect();
                        conflicts.insert(
                            tt.clone(),
                            Conflict {
                                task_type: tt.clone(),
                                winner: ranked[i].name.clone(),
                                losers,
                                why,
                            },
                        );
                    }
                    task_types.insert(tt, list[i].clone());
                }
                Err(e) => problems.push(e),
            }
        }
        for (tt, plugin) in &config.default_for_task_types {
            if !task_types.contains_key(tt)
                && !problems
                    .iter()
                    .any(|p| matches!(p, Error::BadDefault { task_type, .. } if task_type == tt))
            {
                problems.push(Error::BadDefault {
                    task_type: tt.clone(),
                    plugin: plugin.clone(),
                });
            }
        }
        // A k8s-task plugin claiming the same type serves it.
        webapi.retain(|tt, _| !task_types.contains_key(tt));
        Snapshot {
            plugins,
            versions,
            task_types,
            webapi,
            conflicts,
            config: config.clone(),
            slots,
            problems,
        }
    }

    /// The task type a plugin with `manifest`, claiming since `since`, would
    /// not own if it were published now (`None`: it would own all of its
    /// task types). A name that already claims keeps its claim time (an
    /// upgrade is not a newcomer); a newcomer that never served passes
    /// `i64::MAX`, so it loses any tie to a plugin that serves. A new
    /// version that would lose a task type is rejected by the hot loader,
    /// so an upgrade never takes work away silently.
    pub fn would_lose(&self, manifest: &Manifest, since: i64) -> Option<Conflict> {
        let enabled = |name: &str| {
            self.config
                .enabled
                .as_ref()
                .is_none_or(|e| e.contains(name))
        };
        if manifest.world != World::K8sTaskPlugin || !enabled(&manifest.name) {
            return None;
        }
        let mut me = self.versions.claim(manifest);
        me.since = self
            .versions
            .claimed_at
            .get(&manifest.name)
            .copied()
            .unwrap_or(since);
        for tt in &manifest.task_types {
            let mut ranked = vec![me.clone()];
            for (name, p) in &self.plugins {
                if *name == manifest.name || !enabled(name) {
                    continue;
                }
                if let Plugin::Task(t) = p
                    && t.manifest().task_types.contains(tt)
                {
                    ranked.push(self.versions.claim(t.manifest()));
                }
            }
            if ranked.len() == 1 {
                continue;
            }
            if let Ok((i, why)) = decide(tt, &ranked, &self.config)
                && i != 0
            {
                return Some(Conflict {
                    task_type: tt.clone(),
                    winner: ranked[i].name.clone(),
                    losers: vec![manifest.name.clone()],
                    why,
                });
            }
        }
        None
    }

    /// Task types several plugins claim, with their owner.
    pub fn conflicts(&self) -> &BTreeMap<String, Conflict> {
        &self.conflicts
    }

    /// The plugin that serves a task type.
    pub fn task_plugin(&self, task_type: &str) -> Result<Arc<TaskPlugin>, Error> {
        if let Some(p) = self.task_types.get(task_type) {
            return Ok(p.clone());
        }
        let known: Vec<&str> = self.task_types.keys().map(String::as_str).collect();
        Err(Error::UnknownTaskType {
            task_type: task_type.into(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        })
    }

    /// The plugin that serves a task type for a workflow that already used
    /// the versions `pins` (most specific first: the node's own version,
    /// then the workflow's). A pinned version still loaded wins unless its
    /// plugin is set to [`Pinning::Latest`]; otherwise the current one serves.
    /// A pinned version serves even after its ConfigMap was deleted, so a
    /// running workflow finishes on what it started with.
    pub fn task_plugin_pinned(
        &self,
        task_type: &str,
        pins: &[Digest],
    ) -> Result<Arc<TaskPlugin>, Error> {
        for digest in pins {
            let Some(Plugin::Task(p)) = self.version(*digest) else {
                continue;
            };
            if self.pinning(p.name()) == Pinning::Pinned
                && p.manifest().task_types.iter().any(|t| t == task_type)
            {
                return Ok(p);
            }
        }
        self.task_plugin(task_type)
    }

    /// [`Snapshot::task_plugin_pinned`] for the workflow `uid`: a new
    /// workflow (no pin for the plugin) runs on a canary candidate when the
    /// roll-out takes it (see [`Rollout::takes`]).
    pub fn task_plugin_for(
        &self,
        task_type: &str,
        pins: &[Digest],
        uid: &str,
    ) -> Result<Arc<TaskPlugin>, Error> {
        let current = self.task_plugin_pinned(task_type, pins)?;
        let Some(r) = self.versions.rollouts.get(current.name()) else {
            return Ok(current);
        };
        if pins.contains(&current.digest()) || !r.takes(uid) {
            return Ok(current);
        }
        match self.version(r.candidate) {
            Some(Plugin::Task(c)) if c.manifest().task_types.iter().any(|t| t == task_type) => {
                Ok(c)
            }
            _ => Ok(current),
        }
    }

    /// The roll-out of a plugin, if one is under way.
    pub fn rollout(&self, name: &str) -> Option<&Rollout> {
        self.versions.rollouts.get(name)
    }

    /// The shadow candidate of a plugin, if it has one.
    pub fn shadow(&self, name: &str) -> Option<(Arc<TaskPlugin>, &Rollout)> {
        let r = self
            .rollout(name)
            .filter(|r| r.mode == RolloutMode::Shadow)?;
        match self.version(r.candidate)? {
            Plugin::Task(t) => Some((t, r)),
            _ => None,
        }
    }

    /// A loaded version by digest, current or retained.
    pub fn version(&self, digest: Digest) -> Option<Plugin> {
        self.versions.retained.get(&digest).cloned().or_else(|| {
            self.plugins
                .values()
                .find(|p| p.digest() == digest)
                .cloned()
        })
    }

    /// Every loaded version that is not current, by digest.
    pub fn retained(&self) -> &BTreeMap<Digest, Plugin> {
        &self.versions.retained
    }

    /// The earlier good versions of a plugin a rollback may return to, oldest first.
    pub fn history(&self, name: &str) -> &[Digest] {
        self.versions
            .history
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The pinning policy of a plugin.
    pub fn pinning(&self, name: &str) -> Pinning {
        self.versions
            .policies
            .get(name)
            .copied()
            .unwrap_or_default()
    }

    /// The middleware chain of a slot, in order (empty when none is registered).
    pub fn middleware(&self, slot: &str) -> &[Arc<MiddlewarePlugin>] {
        self.slots.get(slot).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every loaded plugin by name, enabled or not.
    pub fn plugins(&self) -> &BTreeMap<String, Plugin> {
        &self.plugins
    }

    /// Served task types, by either kind of task plugin.
    pub fn task_types(&self) -> impl Iterator<Item = &str> {
        self.task_types
            .keys()
            .chain(self.webapi.keys())
            .map(String::as_str)
    }

    /// The web-API plugin that serves a task type, preferring a version in
    /// `pins` that still serves it (a running workflow keeps its version).
    pub fn webapi_plugin_for(&self, task_type: &str, pins: &[Digest]) -> Option<Arc<WebApiPlugin>> {
        for digest in pins {
            if let Some(Plugin::WebApi(p)) = self.version(*digest)
                && p.manifest().task_types.iter().any(|t| t == task_type)
            {
                return Some(p);
            }
        }
        self.webapi.get(task_type).cloned()
    }

    /// Configuration problems (defaults pointing at plugins that do not serve).
    pub fn problems(&self) -> &[Error] {
        &self.problems
    }
}
