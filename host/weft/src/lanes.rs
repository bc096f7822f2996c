//! Two waiting lanes for one scarce thing: work that starts something
//! goes first, four times in five while both lanes wait, so the rest
//! still moves at a fifth of the rate and never starves.
//!
//! Two scarce things use it. The Kubernetes client's tokens
//! (`kubeclient`): a create passes the status writes queued before it.
//! The controller's workers (`controller::workers`): a Workflow not yet
//! started passes the running ones waiting for a worker. First come, first
//! served in both (client-go's and controller-runtime's way), a burst of
//! new Workflows waited for its first pods behind the status writes of the
//! ones already running: at 100 requests a second and 32 workers, the last
//! of a thousand waited ~20 s.

use std::collections::VecDeque;

use tokio::sync::oneshot;

/// Which lane a waiter is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Work that starts something: a create, a Workflow's first round.
    Start,
    /// Everything else.
    Rest,
}

/// While both lanes wait, `START_SHARE` go to [`Lane::Start`] for each one
/// that goes to [`Lane::Rest`].
pub const START_SHARE: u32 = 4;

/// The waiters of both lanes, in arrival order within each; each is
/// handed a `T` (a token, a worker's permit).
pub struct Queues<T> {
    lanes: [VecDeque<oneshot::Sender<T>>; 2],
    /// Start hand-outs since the last Rest one while Rest waited.
    credit: u32,
}

impl<T> Default for Queues<T> {
    fn default() -> Self {
        Queues {
            lanes: [VecDeque::new(), VecDeque::new()],
            credit: 0,
        }
    }
}

impl<T> Queues<T> {
    /// Whether no one waits.
    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(VecDeque::is_empty)
    }

    /// A new waiter in `lane`.
    pub fn push(&mut self, lane: Lane, waiter: oneshot::Sender<T>) {
        self.lanes[lane as usize].push_back(waiter);
    }

    /// The lane the next hand-out goes to (some lane is not empty).
    fn next_lane(&mut self) -> Lane {
        let [start, rest] = &self.lanes;
        if start.is_empty() {
            self.credit = 0;
            return Lane::Rest;
        }
        if rest.is_empty() {
            return Lane::Start;
        }
        if self.credit < START_SHARE {
            self.credit += 1;
            Lane::Start
        } else {
            self.credit = 0;
            Lane::Rest
        }
    }

    /// Gives `item` to the next waiter still waiting (one whose caller
    /// gave up is skipped); `Err(item)` when no one took it.
    pub fn hand_out(&mut self, mut item: T) -> Result<(), T> {
        while !self.is_empty() {
            let lane = self.next_lane();
            let Some(waiter) = self.lanes[lane as usize].pop_front() else {
                continue;
            };
            match waiter.send(item) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
        }
        Err(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_of_five_go_to_start_while_both_wait() {
        let mut q = Queues::default();
        let mut got = Vec::new();
        for i in 0..10 {
            for (lane, name) in [(Lane::Start, "start"), (Lane::Rest, "rest")] {
                let (s, r) = oneshot::channel();
                q.push(lane, s);
                got.push((name, i, r));
            }
        }
        let mut order = Vec::new();
        for n in 0..20 {
            assert!(q.hand_out(n).is_ok());
            for (lane, i, r) in &mut got {
                if r.try_recv().is_ok() {
                    order.push(format!("{lane}{i}"));
                }
            }
        }
        assert_eq!(q.hand_out(20), Err(20), "every waiter had its turn");
        assert_eq!(
            order[..10],
            [
                "start0", "start1", "start2", "start3", "rest0", "start4", "start5", "start6",
                "start7", "rest1"
            ]
        );
        assert_eq!(order.len(), 20);
    }

    #[test]
    fn a_waiter_that_gave_up_passes_its_turn_on() {
        let mut q = Queues::default();
        let (gone, r) = oneshot::channel::<u8>();
        drop(r);
        let (next, mut r2) = oneshot::channel();
        q.push(Lane::Start, gone);
        q.push(Lane::Rest, next);
        assert_eq!(q.hand_out(7), Ok(()));
        assert_eq!(r2.try_recv(), Ok(7));
        assert_eq!(q.hand_out(8), Err(8));
    }
}
