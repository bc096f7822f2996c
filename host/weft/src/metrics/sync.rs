//! Synchronization's figures (issue 44): how long a lock takes to reach
//! its next holder (the write that released it promoted the waiter; this
//! is from that write to the new holder's start: the watch, the queue
//! and the reconcile), and how often claimants had to wait, by lock kind.

use prometheus_client::metrics::{counter::Counter, family::Family, histogram::Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// Fine around 100 ms, the goal of issue 44's benchmark.
fn handover_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// The families registered under `weft_lock_`.
pub struct SyncMetrics {
    handover: Family<Labels, Histogram, fn() -> Histogram>,
    waits: Family<Labels, Counter>,
}

impl Default for SyncMetrics {
    fn default() -> SyncMetrics {
        SyncMetrics {
            handover: Family::new_with_constructor(handover_buckets),
            waits: Family::default(),
        }
    }
}

impl SyncMetrics {
    /// Registers every family on Weft's (prefixed) registry.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "lock_handover_seconds",
            "From the write that made a waiter a lock's holder to that holder's start, by lock kind",
            self.handover.clone(),
        );
        r.register(
            "lock_waits",
            "Workflows and nodes that found a lock taken and waited, by lock kind",
            self.waits.clone(),
        );
    }

    /// A waiter of a `kind` lock started `secs` after it was promoted.
    pub fn handover(&self, kind: &str, secs: f64) {
        self.handover
            .get_or_create(&vec![("kind".into(), kind.into())])
            .observe(secs);
    }

    /// A claimant began to wait for a `kind` lock.
    pub fn waited(&self, kind: &str) {
        self.waits
            .get_or_create(&vec![("kind".into(), kind.into())])
            .inc();
    }
}
