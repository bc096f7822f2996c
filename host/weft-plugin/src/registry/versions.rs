//! A plugin's versions over time: publishing, roll-outs (shadow, canary,
//! promotion, abort), retained and pinned versions, withdrawal, pruning
//! and rollback.

use super::{Pinning, Registry};
use crate::rollout::{Rollout, RolloutMode};
use crate::{engine::Digest, plugin::Plugin};

impl Registry {
    /// Load `candidate` beside its plugin's serving version as a shadow or
    /// canary (replacing any earlier candidate). The plugin must be serving
    /// already: a roll-out compares with, or splits from, something.
    pub fn start_rollout(&self, candidate: Plugin, mode: RolloutMode) -> Result<(), String> {
        let name = candidate.manifest().name.clone();
        if matches!(candidate, Plugin::Middleware(_)) {
            return Err(format!(
                "plugin {name:?} is a middleware: roll-outs are for task plugins"
            ));
        }
        let digest = candidate.digest();
        self.update_versions(|plugins, versions| {
            let Some(current) = plugins.get(&name) else {
                return Err(format!(
                    "plugin {name:?} has no serving version to roll out beside: push it without a roll-out first"
                ));
            };
            if current.digest() == digest {
                return Err(format!("plugin {name:?} already serves {digest}"));
            }
            if versions.rollouts.get(&name).is_some_and(|r| r.candidate == digest && r.mode == mode) {
                return Ok(());
            }
            versions.retained.insert(digest, candidate);
            versions.rollouts.insert(name, Rollout::new(digest, mode));
            Ok(())
        })
    }

    /// End a plugin's roll-out without promoting it (the candidate stays
    /// loaded while workflows pin it). Returns what it was.
    pub fn abort_rollout(&self, name: &str) -> Option<Rollout> {
        self.snapshot().versions.rollouts.get(name)?;
        self.update_versions(|_, versions| versions.rollouts.remove(name))
    }

    /// Make a plugin's candidate its serving version. Returns its digest.
    pub fn promote(&self, name: &str) -> Option<Digest> {
        let snap = self.snapshot();
        let r = snap.versions.rollouts.get(name)?;
        let candidate = snap.version(r.candidate)?;
        self.abort_rollout(name);
        self.publish(candidate);
        Some(r.candidate)
    }

    /// Make `plugin` the current version of its name, atomically, keeping
    /// the version it replaces loaded (for workflows pinned to it and as the
    /// rollback target). Publishing the current digest again changes nothing.
    /// Returns the digest it replaced.
    pub fn publish(&self, plugin: Plugin) -> Option<Digest> {
        let name = plugin.manifest().name.clone();
        let digest = plugin.digest();
        self.update_versions(|plugins, versions| {
            versions.retained.remove(&digest);
            if let Some(h) = versions.history.get_mut(&name) {
                h.retain(|d| *d != digest);
            }
            let old = plugins.insert(name.clone(), plugin)?;
            let old_digest = old.digest();
            if old_digest == digest {
                return None;
            }
            versions.retained.insert(old_digest, old);
            versions.history.entry(name).or_default().push(old_digest);
            Some(old_digest)
        })
    }

    /// Keep a version loaded without serving it to new work: a version
    /// that running workflows pin, loaded again after a restart. Returns
    /// false when that digest is loaded already.
    pub fn retain(&self, plugin: Plugin) -> bool {
        let d = plugin.digest();
        self.update_versions(|plugins, versions| {
            if plugins.values().any(|p| p.digest() == d) || versions.retained.contains_key(&d) {
                return false;
            }
            versions.retained.insert(d, plugin);
            true
        })
    }

    /// Stop serving a plugin's task types to new work, atomically. Its
    /// versions stay loaded for pinned workflows until [`Registry::prune`]
    /// finds them unpinned. Returns the digest that was current.
    pub fn withdraw(&self, name: &str) -> Option<Digest> {
        self.update_versions(|plugins, versions| {
            let old = plugins.remove(name)?;
            let d = old.digest();
            versions.retained.insert(d, old);
            versions.history.remove(name);
            versions.claimed_at.remove(name);
            Some(d)
        })
    }

    /// Set a plugin's pinning policy.
    pub fn set_pinning(&self, name: &str, pinning: Pinning) {
        if self.snapshot().pinning(name) == pinning {
            return;
        }
        self.update_versions(|_, versions| {
            versions.policies.insert(name.to_string(), pinning);
        });
    }

    /// Unload retained versions that are neither pinned (`pinned(name,
    /// digest)` says so) nor the latest rollback target of a current plugin.
    /// Returns the unloaded versions.
    pub fn prune(&self, pinned: impl Fn(&str, Digest) -> bool) -> Vec<(String, Digest)> {
        let snap = self.snapshot();
        let drop: Vec<(String, Digest)> = snap
            .versions
            .retained
            .iter()
            .filter(|(d, p)| {
                let name = &p.manifest().name;
                let rollback =
                    snap.plugins.contains_key(name) && snap.history(name).last() == Some(*d);
                let candidate = snap.rollout(name).is_some_and(|r| r.candidate == **d);
                !rollback && !candidate && !pinned(name, **d)
            })
            .map(|(d, p)| (p.manifest().name.clone(), *d))
            .collect();
        if drop.is_empty() {
            return drop;
        }
        self.update_versions(|_, versions| {
            for (name, d) in &drop {
                versions.retained.remove(d);
                if let Some(h) = versions.history.get_mut(name) {
                    h.retain(|x| x != d);
                }
            }
        });
        drop
    }

    /// Return a plugin to its latest earlier good version, atomically; the
    /// version it replaces is unloaded (pinned workflows move off it too).
    /// Returns `(from, to)`, or `None` when there is nothing to return to.
    pub fn rollback(&self, name: &str) -> Option<(Digest, Digest)> {
        self.update_versions(|plugins, versions| {
            let history = versions.history.get_mut(name)?;
            let to = loop {
                let d = history.pop()?;
                if versions.retained.contains_key(&d) {
                    break d;
                }
            };
            let good = versions.retained.remove(&to)?;
            let bad = plugins.insert(name.to_string(), good)?;
            Some((bad.digest(), to))
        })
    }
}
