//! The controller's workers (`--concurrent-reconciles`), handed out in two
//! lanes ([`crate::lanes`]): a Workflow this controller has not started
//! passes the running ones waiting for a worker.
//!
//! kube-runtime's own limit hands workers out first come, first served.
//! With 32 workers and 100 requests a second, the peers bench's audit and
//! metrics showed all 32 busy writing the final statuses of the first
//! Workflows (each waiting for a client token) while ~700 new ones waited
//! behind them with no pod yet. So kube-runtime runs unlimited, and each
//! reconcile takes one of these first: at most N work at once, as before.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::lanes::{Lane, Queues};

/// N workers and the reconciles waiting for one.
pub struct Workers {
    state: Mutex<State>,
}

struct State {
    free: usize,
    waiting: Queues<Worker>,
}

/// One worker, held for one reconcile; dropping it hands it on.
pub struct Worker {
    workers: Arc<Workers>,
}

impl Workers {
    /// `n` workers.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Workers {
            state: Mutex::new(State {
                free: n,
                waiting: Queues::default(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a worker in `lane`.
    pub async fn enter(self: &Arc<Self>, lane: Lane) -> Worker {
        loop {
            let rx = {
                let mut s = self.lock();
                if s.free > 0 && s.waiting.is_empty() {
                    s.free -= 1;
                    return Worker {
                        workers: self.clone(),
                    };
                }
                let (tx, rx) = oneshot::channel();
                s.waiting.push(lane, tx);
                rx
            };
            // A waiter is only dropped unanswered if its Worker was lost
            // on the way; ask again rather than wait forever.
            if let Ok(w) = rx.await {
                return w;
            }
        }
    }

    /// Workers not held.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.lock().free
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let workers = self.workers.clone();
        let mut s = workers.lock();
        let next = Worker {
            workers: workers.clone(),
        };
        if let Err(unused) = s.waiting.hand_out(next) {
            // No one waits: the worker is free again (forgotten, not
            // dropped, so that its drop does not hand it out once more).
            std::mem::forget(unused);
            s.free += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn new_workflows_pass_running_ones_and_no_more_than_n_work() {
        let workers = Workers::new(2);
        let a = workers.enter(Lane::Rest).await;
        let b = workers.enter(Lane::Rest).await;
        assert_eq!(workers.free(), 0);
        let mut running = Box::pin(workers.enter(Lane::Rest));
        assert!((&mut running).now_or_never().is_none(), "two at most");
        let mut new = Box::pin(workers.enter(Lane::Start));
        assert!((&mut new).now_or_never().is_none());
        drop(a);
        let got = (&mut new).now_or_never().expect("the new one came first");
        assert!((&mut running).now_or_never().is_none());
        drop(b);
        let r = (&mut running).now_or_never().expect("then the running one");
        drop((got, r));
        assert_eq!(workers.free(), 2, "every worker came back");
    }

    #[tokio::test]
    async fn a_reconcile_that_stopped_waiting_loses_no_worker() {
        let workers = Workers::new(1);
        let a = workers.enter(Lane::Rest).await;
        let mut gave_up = Box::pin(workers.enter(Lane::Start));
        assert!((&mut gave_up).now_or_never().is_none());
        drop(gave_up);
        drop(a);
        assert_eq!(workers.free(), 1);
        let _again = workers.enter(Lane::Start).await;
        assert_eq!(workers.free(), 0);
    }
}
