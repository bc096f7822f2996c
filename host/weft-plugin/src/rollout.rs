//! Progressive roll-out of a new plugin version before it serves: as a
//! *shadow* (it gets copies of real calls off the critical path and its
//! answers are compared with the serving version's) or as a *canary* (a
//! fixed share of new workflows run on it). The registry keeps at most one
//! candidate per plugin; promoting publishes it, aborting drops it (the
//! workflows already on it keep it, like any pinned version).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::engine::Digest;

/// How a candidate meets traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutMode {
    /// Copies of the serving version's calls; nothing it answers is used.
    Shadow,
    /// This percentage (1-100) of new workflows run on it.
    Canary {
        /// The share of new workflows, in percent.
        percent: u8,
    },
}

impl std::fmt::Display for RolloutMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RolloutMode::Shadow => write!(f, "shadow"),
            RolloutMode::Canary { percent } => write!(f, "canary {percent}%"),
        }
    }
}

/// Most differences kept as samples per candidate.
pub const MAX_SAMPLES: usize = 5;

/// What a shadow candidate did, compared with the serving version.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowStats {
    /// Calls copied to the candidate.
    pub calls: u64,
    /// Calls whose answer differed from the serving version's.
    pub diffs: u64,
    /// Calls the candidate failed (trap, deadline, plugin error) while the
    /// serving version answered.
    pub errors: u64,
    /// The latest differences, newest last (at most [`MAX_SAMPLES`]).
    pub samples: VecDeque<String>,
}

/// A candidate version of one plugin and what happened to it so far.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// The candidate's digest (loaded in the registry, not serving).
    pub candidate: Digest,
    /// How it meets traffic.
    pub mode: RolloutMode,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Each new workflow's choice, by uid: a workflow asks again for every
    /// node until its status records the version, and must get one answer.
    assigned: BTreeMap<String, bool>,
    /// How many workflows went to the candidate.
    to_candidate: u64,
    shadow: ShadowStats,
}

impl Rollout {
    /// A new roll-out of `candidate`.
    pub fn new(candidate: Digest, mode: RolloutMode) -> Self {
        Rollout {
            candidate,
            mode,
            state: Arc::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the workflow `uid` runs on the candidate. A canary of p%
    /// takes the k-th new workflow when ⌊k·p/100⌋ grows: exactly p of every
    /// 100 in arrival order (hashing uids would give p only on average, ±√n).
    /// Its first answer for a workflow is final.
    pub fn takes(&self, uid: &str) -> bool {
        let RolloutMode::Canary { percent } = self.mode else {
            return false;
        };
        let mut s = self.state();
        if let Some(t) = s.assigned.get(uid) {
            return *t;
        }
        let k = s.assigned.len() as u64;
        let p = u64::from(percent.min(100));
        let take = (k + 1) * p / 100 > k * p / 100;
        s.assigned.insert(uid.to_string(), take);
        s.to_candidate += u64::from(take);
        take
    }

    /// (new workflows routed, of which to the candidate).
    pub fn routed(&self) -> (u64, u64) {
        let s = self.state();
        (s.assigned.len() as u64, s.to_candidate)
    }

    /// Records one shadow call: `diff` describes how the answers differ
    /// (None: the same), `failed` whether the candidate failed.
    pub fn record_shadow(&self, diff: Option<String>, failed: bool) {
        let mut s = self.state();
        s.shadow.calls += 1;
        s.shadow.errors += u64::from(failed);
        if let Some(d) = diff {
            s.shadow.diffs += 1;
            if s.shadow.samples.len() == MAX_SAMPLES {
                s.shadow.samples.pop_front();
            }
            s.shadow.samples.push_back(d);
        }
    }

    /// The shadow comparison so far.
    pub fn shadow(&self) -> ShadowStats {
        self.state().shadow.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canary_takes_exactly_its_share_and_answers_each_workflow_once() {
        for percent in [1u8, 25, 33, 50, 99, 100] {
            let r = Rollout::new(Digest::of(b"x"), RolloutMode::Canary { percent });
            let taken = (0..100).filter(|i| r.takes(&format!("uid-{i}"))).count();
            assert_eq!(taken, percent as usize, "{percent}%");
            // Asking again changes nothing.
            let again = (0..100).filter(|i| r.takes(&format!("uid-{i}"))).count();
            assert_eq!(again, taken);
            assert_eq!(r.routed(), (100, percent as u64));
        }
        let shadow = Rollout::new(Digest::of(b"x"), RolloutMode::Shadow);
        assert!(!shadow.takes("uid"));
    }

    #[test]
    fn shadow_samples_are_bounded() {
        let r = Rollout::new(Digest::of(b"x"), RolloutMode::Shadow);
        for i in 0..10 {
            r.record_shadow(Some(format!("d{i}")), false);
        }
        r.record_shadow(None, true);
        let s = r.shadow();
        assert_eq!((s.calls, s.diffs, s.errors), (11, 10, 1));
        assert_eq!(s.samples, ["d5", "d6", "d7", "d8", "d9"]);
    }
}
