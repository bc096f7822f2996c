//! The work queue's bookkeeping, as client-go's workqueue counts it:
//! kube-runtime's scheduler keeps its queue private, so this follows every
//! way in (a Workflow's watch event, a child waking its owner, a periodic
//! resync, a requeue after a wait or a failure) and the way out (a
//! reconcile starting). Like the real queue it holds each Workflow once:
//! a trigger for one already waiting is merged into it, and does not count
//! as an add.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::metrics::standard::WORKFLOW_CONTROLLER as NAME;

/// When a waiting Workflow became (or becomes, after a delay) ready, and
/// whether that was a delayed requeue (counted as an add only once due,
/// as client-go's `AddAfter` does).
#[derive(Debug, Clone, Copy)]
struct Waiting {
    ready: Instant,
    delayed: bool,
}

/// The Workflow controller's queue, keyed `namespace/name`.
pub struct WorkQueue {
    metrics: Arc<Metrics>,
    waiting: Mutex<HashMap<String, Waiting>>,
    /// When `workqueue_depth` was last counted: counting scans every
    /// waiting Workflow, and doing it on every add and take held 4-6 % of
    /// a busy controller's CPU with 1,000 Workflows waiting (the CPU
    /// profiles of `cargo bench --bench controller`), so the hot path
    /// counts at most every [`DEPTH_EVERY`], and [`WorkQueue::refresh`]
    /// (every 2 s) catches up.
    counted: Mutex<Option<Instant>>,
}

/// How often the hot path counts the depth at most.
const DEPTH_EVERY: Duration = Duration::from_millis(100);

impl WorkQueue {
    /// An empty queue reporting to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        WorkQueue {
            metrics,
            waiting: Mutex::default(),
            counted: Mutex::default(),
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `key` should be reconciled now.
    pub fn add(&self, key: &str) {
        let now = Instant::now();
        let mut w = self.waiting();
        match w.get_mut(key) {
            // A delayed requeue brought forward by an event.
            Some(e) if e.ready > now => {
                *e = Waiting {
                    ready: now,
                    delayed: false,
                }
            }
            Some(_) => return,
            None => {
                w.insert(
                    key.to_string(),
                    Waiting {
                        ready: now,
                        delayed: false,
                    },
                );
            }
        }
        self.metrics.standard.queue_add(NAME);
        self.publish_depth_soon(&w, now);
    }

    /// `key` asked to be reconciled again after `after`; `failed` when
    /// that is a retry of a failed reconcile.
    pub fn add_after(&self, key: &str, after: Duration, failed: bool) {
        if failed {
            self.metrics.standard.queue_retry(NAME);
        }
        let ready = Instant::now() + after;
        self.waiting().entry(key.to_string()).or_insert(Waiting {
            ready,
            delayed: true,
        });
    }

    /// A worker took `key`: how long it had been ready.
    pub fn taken(&self, key: &str) {
        let now = Instant::now();
        let mut w = self.waiting();
        if let Some(e) = w.remove(key) {
            if e.delayed {
                self.metrics.standard.queue_add(NAME);
            }
            let waited = now.saturating_duration_since(e.ready);
            self.metrics.standard.queue_taken(NAME, waited);
        }
        self.publish_depth_soon(&w, now);
    }

    /// Forgets a deleted Workflow.
    pub fn forget(&self, key: &str) {
        let mut w = self.waiting();
        w.remove(key);
        self.publish_depth_soon(&w, Instant::now());
    }

    /// Refreshes `workqueue_depth` (delayed requeues fall due unseen).
    pub fn refresh(&self) {
        let w = self.waiting();
        self.publish_depth(&w, Instant::now());
    }

    fn publish_depth(&self, w: &HashMap<String, Waiting>, now: Instant) {
        *self.counted.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        self.metrics.standard.set_queue_depth(NAME, ready(w, now));
    }

    /// [`Self::publish_depth`] unless it ran less than [`DEPTH_EVERY`] ago.
    fn publish_depth_soon(&self, w: &HashMap<String, Waiting>, now: Instant) {
        let last = *self.counted.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| now.saturating_duration_since(t) >= DEPTH_EVERY) {
            self.publish_depth(w, now);
        }
    }

    /// How many Workflows are ready and not yet taken.
    pub fn depth(&self) -> usize {
        ready(&self.waiting(), Instant::now())
    }
}

/// The waiting items due by `now`.
fn ready(w: &HashMap<String, Waiting>, now: Instant) -> usize {
    w.values().filter(|e| e.ready <= now).count()
}

#[cfg(test)]
mod tests;
