//! The circuit breaker of plugin versions: counts sandbox faults (traps,
//! deadlines, memory, stack) per component digest in a sliding window.
//! When a version faults more than allowed, the registry rolls its plugin
//! back to the previous good version and tells its observers (the hot
//! loader records an Event and a metric).
//!
//! Plugin errors returned on purpose (a WIT `plugin-error`) are the task's
//! business and never count.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::engine::Digest;

/// When the breaker trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Faults of one version tolerated within `window`; one more trips it.
    /// Zero disables the breaker.
    pub max_faults: u32,
    /// The sliding window faults are counted in.
    pub window: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            max_faults: 5,
            window: Duration::from_secs(60),
        }
    }
}

/// One trip of the breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trip {
    /// The plugin.
    pub plugin: String,
    /// The version that faulted.
    pub from: Digest,
    /// The version it was rolled back to; `None` when there was none (the
    /// faulty version keeps serving: there is nothing better).
    pub to: Option<Digest>,
    /// Faults counted in the window.
    pub faults: u32,
    /// The last fault.
    pub last_error: String,
    /// The version was a roll-out candidate: its roll-out was aborted
    /// (the serving version was never touched).
    pub rollout_aborted: bool,
}

type Observer = Box<dyn Fn(&Trip) + Send + Sync>;

/// Fault counters of every version, and who to tell of a trip.
#[derive(Default)]
pub(crate) struct Breakers {
    config: Mutex<BreakerConfig>,
    faults: Mutex<HashMap<Digest, VecDeque<Instant>>>,
    trips: Mutex<BTreeMap<String, Trip>>,
    /// Versions tripped with nothing to roll back to, and when.
    open: Mutex<HashMap<Digest, Instant>>,
    observers: Mutex<Vec<Observer>>,
}

impl std::fmt::Debug for Breakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breakers")
            .field("config", &*lock(&self.config))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Breakers {
    pub(crate) fn configure(&self, config: BreakerConfig) {
        *lock(&self.config) = config;
    }

    pub(crate) fn observe(&self, observer: Observer) {
        lock(&self.observers).push(observer);
    }

    /// Counts one fault of `digest`; returns the count when it is over the
    /// limit (the counter restarts, so one burst trips once).
    pub(crate) fn fault(&self, digest: Digest) -> Option<u32> {
        let config = *lock(&self.config);
        if config.max_faults == 0 {
            return None;
        }
        let now = Instant::now();
        let mut faults = lock(&self.faults);
        let q = faults.entry(digest).or_default();
        q.push_back(now);
        while q
            .front()
            .is_some_and(|t| now.duration_since(*t) > config.window)
        {
            q.pop_front();
        }
        let n = u32::try_from(q.len()).unwrap_or(u32::MAX);
        if n > config.max_faults {
            q.clear();
            return Some(n);
        }
        None
    }

    pub(crate) fn trip(&self, trip: Trip) {
        tracing::warn!(
            plugin = %trip.plugin,
            from = %trip.from,
            to = ?trip.to.map(|d| d.to_string()),
            faults = trip.faults,
            "plugin circuit breaker tripped: {}",
            trip.last_error
        );
        if trip.to.is_none() {
            lock(&self.open).insert(trip.from, Instant::now());
        }
        for o in lock(&self.observers).iter() {
            o(&trip);
        }
        lock(&self.trips).insert(trip.plugin.clone(), trip);
    }

    /// Whether `digest` tripped with nothing to roll back to less than a
    /// window ago. After the window it is tried again (half-open): one more
    /// burst of faults opens it again.
    pub(crate) fn is_open(&self, digest: Digest) -> bool {
        let window = lock(&self.config).window;
        let mut open = lock(&self.open);
        match open.get(&digest) {
            Some(at) if at.elapsed() <= window => true,
            Some(_) => {
                open.remove(&digest);
                false
            }
            None => false,
        }
    }

    pub(crate) fn trips(&self) -> BTreeMap<String, Trip> {
        lock(&self.trips).clone()
    }
}

#[cfg(test)]
mod tests;
