//! When a failed reconcile runs again, as controller-runtime's default
//! rate limiter decides it: per object, 5 ms doubling up to 1,000 s
//! (`ItemExponentialFailureRateLimiter`), and overall a token bucket of 10
//! retries a second with a burst of 100 (`BucketRateLimiter`); a failed
//! Workflow waits the longer of the two. A success forgets its failures,
//! so the next failure starts again at 5 ms. Only failures are delayed:
//! a Workflow that reconciles fine is never held back by one that fails.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// controller-runtime's defaults.
const BASE: Duration = Duration::from_millis(5);
const MAX: Duration = Duration::from_secs(1000);
const RATE: f64 = 10.0;
const BURST: f64 = 100.0;

/// Failures per object and the overall bucket.
#[derive(Debug)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            failures: Mutex::default(),
            bucket: Mutex::new(Bucket {
                tokens: BURST,
                at: Instant::now(),
            }),
        }
    }
}

impl Backoff {
    /// `key` failed again: how long until it is retried.
    pub fn failed(&self, key: &str) -> Duration {
        let n = {
            let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            let n = f.entry(key.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let exp = BASE
            .checked_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
            .map_or(MAX, |d| d.min(MAX));
        exp.max(self.take_token(Instant::now()))
    }

    /// `key` reconciled fine: its next failure starts from the bottom.
    pub fn succeeded(&self, key: &str) {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        f.remove(key);
    }

    /// How many times in a row `key` has failed.
    pub fn failures(&self, key: &str) -> u32 {
        let f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        f.get(key).copied().unwrap_or(0)
    }

    /// Takes a token (going into debt when there is none): the wait until
    /// that token would have been there.
    fn take_token(&self, now: Instant) -> Duration {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let refill = now.saturating_duration_since(b.at).as_secs_f64() * RATE;
        b.tokens = (b.tokens + refill).min(BURST) - 1.0;
        b.at = now;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / RATE)
        }
    }
}

#[cfg(test)]
mod tests;
