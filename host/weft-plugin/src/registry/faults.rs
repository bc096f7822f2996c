//! The circuit breaker's side of the registry: sandbox faults counted
//! per version, and the rollback a trip causes reported to observers.

use std::collections::BTreeMap;

use super::Registry;
use crate::breaker::{BreakerConfig, Trip};
use crate::{
    engine::Digest,
    plugin::{CallError, MiddlewarePlugin, TaskPlugin},
};

impl Registry {
    /// Configure the circuit breaker (see [`crate::breaker`]).
    pub fn set_breaker(&self, config: BreakerConfig) {
        self.breaker.configure(config);
    }

    /// Be told of every trip of the breaker (called on the calling thread, keep it short).
    pub fn on_trip(&self, observer: impl Fn(&Trip) + Send + Sync + 'static) {
        self.breaker.observe(Box::new(observer));
    }

    /// The breaker's state of each plugin that tripped, by name.
    pub fn trips(&self) -> BTreeMap<String, Trip> {
        self.breaker.trips()
    }

    /// Record the outcome of one call of a task plugin version. Sandbox
    /// faults ([`CallError::is_fault`]) count against that version; past the
    /// configured number in the window, the plugin is rolled back to its
    /// previous good version (when it still is the current one).
    pub fn record_call(&self, plugin: &TaskPlugin, error: Option<&CallError>) {
        self.record(plugin.name(), plugin.digest(), error);
    }

    /// [`Registry::record_call`] for a middleware: a version that keeps
    /// faulting is rolled back the same way. When it has no earlier version,
    /// its circuit opens for the breaker's window ([`Registry::circuit_open`]):
    /// the chain then applies the plugin's failStrategy without calling it,
    /// so a broken policy costs no deadline per request.
    pub fn record_middleware_call(&self, plugin: &MiddlewarePlugin, error: Option<&CallError>) {
        self.record(plugin.name(), plugin.digest(), error);
    }

    /// Whether the breaker tripped this version within its window and had
    /// nothing to roll back to.
    pub fn circuit_open(&self, digest: Digest) -> bool {
        self.breaker.is_open(digest)
    }

    pub(super) fn record(&self, name: &str, digest: Digest, error: Option<&CallError>) {
        let Some(e) = error else { return };
        if !e.is_fault() {
            return;
        }
        let Some(faults) = self.breaker.fault(digest) else {
            return;
        };
        if self
            .snapshot()
            .rollout(name)
            .is_some_and(|r| r.candidate == digest)
        {
            // A failing candidate: the serving version never stopped
            // serving; only the roll-out ends.
            self.abort_rollout(name);
            self.breaker.trip(Trip {
                plugin: name.to_string(),
                from: digest,
                to: None,
                faults,
                last_error: e.to_string(),
                rollout_aborted: true,
            });
            return;
        }
        let is_current = self
            .snapshot()
            .plugins
            .get(name)
            .is_some_and(|p| p.digest() == digest);
        if !is_current {
            return;
        }
        let to = match self.rollback(name) {
            Some((from, to)) if from == digest => Some(to),
            Some((from, to)) => {
                // Raced with a swap: the bad version was no longer current.
                tracing::warn!(plugin = name, %from, %to, "breaker rolled back a newer version");
                Some(to)
            }
            None => None,
        };
        self.breaker.trip(Trip {
            plugin: name.to_string(),
            from: digest,
            to,
            faults,
            last_error: e.to_string(),
            rollout_aborted: false,
        });
    }
}
