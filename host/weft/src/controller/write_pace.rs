//! How long the controller's status writes take, and how much longer a
//! status that may wait is held while they are slow (`--status-hold`,
//! stretched). A kube-apiserver that takes seconds to answer a status
//! patch is short of exactly that work, so each Workflow then writes its
//! progress less often; failures, retries and ends are still written at
//! once (the hold never applies to them). Measured on the real control
//! plane: the 100 children of a 10,000-node tree wrote ~29 statuses each
//! while kube-apiserver, CPU-bound on their validation, answered a status
//! patch in 2.5 s (p50; docs/benchmarks.md, "Weft vs Argo", workload (e)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A held status waits at least this many times the status writes'
/// recent latency: a write then takes at most a tenth of a Workflow's
/// time on the API server's side.
pub const HOLD_PER_LATENCY: u32 = 10;

/// The longest a stretched hold gets (a longer configured hold is kept).
pub const MAX_STRETCHED: Duration = Duration::from_secs(30);

/// The status writes' latency: a mean weighted ⅛ to each new write.
#[derive(Debug, Default)]
pub struct WritePace {
    mean_us: AtomicU64,
}

impl WritePace {
    /// Adds one status write's round trip (its request and answer).
    pub fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let old = self.mean_us.load(Ordering::Relaxed);
        // Concurrent writers may lose a sample to each other: a mean.
        let new = old - old / 8 + sample / 8;
        self.mean_us.store(new, Ordering::Relaxed);
    }

    /// The weighted mean latency.
    pub fn mean(&self) -> Duration {
        Duration::from_micros(self.mean_us.load(Ordering::Relaxed))
    }

    /// `hold`, stretched to [`HOLD_PER_LATENCY`] times the mean latency
    /// (at most [`MAX_STRETCHED`]), never shortened; a zero hold (every
    /// status written at once) stays zero.
    pub fn stretch(&self, hold: Duration) -> Duration {
        if hold.is_zero() {
            return hold;
        }
        hold.max((self.mean() * HOLD_PER_LATENCY).min(MAX_STRETCHED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(writes: usize, each: Duration) -> WritePace {
        let pace = WritePace::default();
        for _ in 0..writes {
            pace.record(each);
        }
        pace
    }

    #[test]
    fn fast_writes_keep_the_configured_hold() {
        let pace = after(100, Duration::from_millis(5));
        assert_eq!(pace.stretch(Duration::from_secs(2)), Duration::from_secs(2));
    }

    #[test]
    fn slow_writes_stretch_the_hold_to_ten_times_their_latency_up_to_thirty_seconds() {
        let pace = after(100, Duration::from_millis(800));
        let hold = pace.stretch(Duration::from_secs(2));
        assert!(
            hold > Duration::from_millis(7_900) && hold <= Duration::from_secs(8),
            "{hold:?}"
        );
        let pace = after(100, Duration::from_secs(10));
        assert_eq!(pace.stretch(Duration::from_secs(2)), MAX_STRETCHED);
    }

    #[test]
    fn the_mean_follows_the_latest_writes_back_down() {
        let pace = after(100, Duration::from_secs(3));
        for _ in 0..100 {
            pace.record(Duration::from_millis(2));
        }
        assert_eq!(pace.stretch(Duration::from_secs(2)), Duration::from_secs(2));
    }

    #[test]
    fn no_hold_stays_none_and_a_longer_one_is_kept() {
        let pace = after(100, Duration::from_secs(3));
        assert_eq!(pace.stretch(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            pace.stretch(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }
}
