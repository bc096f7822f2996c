//! The changes queued for a Lock (`Op`) and how one write applies them
//! (`change`), with the line this process keeps out of the object: what a
//! write takes of it (`take`) and what it keeps after (`keep`). Pure:
//! `super` reads, writes and wakes.

use std::collections::HashSet;

use weft_dag::spec::sync::LockRef;

use super::lock::{self, Claim, LockSpec};

/// A change to one lock, queued for its writer.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// Queue this claim (with the lock's kind and limit, should it not
    /// exist yet or its limit have changed).
    Ask(Box<(Claim, LockRef)>),
    /// Drop a claimant's entries (`all`: every entry of the workflow).
    Release {
        uid: String,
        node: Option<String>,
        all: bool,
    },
    /// Nothing but a write: the line kept here moves into the object,
    /// which another controller's writes emptied.
    Refill,
}

/// What a write of `spec` with `ops` takes of `line`, the waiters kept
/// out of the object: the head (cloned; all a write can move into the
/// object: the limit's worth promoted, [`lock::LINE_CAP`] listed, and one
/// more for each release), how many of the rest stay, and the ops
/// without asks of claimants in that rest (a reconcile may ask again
/// before its first ask is written). The rest is read, not copied: a line
/// of a thousand was cloned and sorted again on every write.
pub(super) fn take(line: &[Claim], spec: &LockSpec, limit: Option<u32>, ops: &[Op]) -> Taken {
    let releases = ops
        .iter()
        .filter(|o| matches!(o, Op::Release { .. }))
        .count();
    let limit = spec.limit.max(limit.unwrap_or(0)) as usize;
    let n = (limit + lock::LINE_CAP + releases).min(line.len());
    let (head, rest) = line.split_at(n);
    let asked: HashSet<(&str, Option<&str>)> = ops.iter().filter_map(Op::asker).collect();
    let (mut tail, mut known, releases) = (0, HashSet::new(), Releases::of(ops));
    for c in rest.iter().filter(|c| !releases.drops(c)) {
        tail += 1;
        let who = (c.uid.as_str(), c.node.as_deref());
        if asked.contains(&who) {
            known.insert(who);
        }
    }
    let fresh = |o: &&Op| o.asker().is_none_or(|who| !known.contains(&who));
    Taken {
        head: head.to_vec(),
        taken: n,
        tail,
        ops: ops.iter().filter(fresh).cloned().collect(),
    }
}

/// The line kept out of a lock after a write: what the write spilled
/// (`out`) merged with the rest of `old` it did not take, less what it
/// released.
pub(super) fn keep(old: Vec<Claim>, taken: &Taken, out: Vec<Claim>) -> Vec<Claim> {
    let releases = Releases::of(&taken.ops);
    let rest = old
        .into_iter()
        .skip(taken.taken)
        .filter(|c| !releases.drops(c));
    lock::merge_lines(out, rest)
}

/// What one write takes of the line kept out of a lock ([`take`]).
pub(super) struct Taken {
    /// The line's first claims, cloned (the write moves them into the
    /// object).
    pub(super) head: Vec<Claim>,
    /// How many claims of the line the head was.
    pub(super) taken: usize,
    /// How many of the rest stay in line.
    pub(super) tail: usize,
    /// The write's changes.
    pub(super) ops: Vec<Op>,
}

impl Op {
    /// The claimant an ask is for.
    fn asker(&self) -> Option<(&str, Option<&str>)> {
        match self {
            Op::Ask(ask) => Some((ask.0.uid.as_str(), ask.0.node.as_deref())),
            Op::Release { .. } | Op::Refill => None,
        }
    }
}

/// The releases among a write's ops, found by uid first: one lookup per
/// claim of a long line rather than a comparison per release.
struct Releases<'a> {
    uids: HashSet<&'a str>,
    ops: &'a [Op],
}

impl<'a> Releases<'a> {
    fn of(ops: &'a [Op]) -> Self {
        let uids = ops.iter().filter_map(|op| match op {
            Op::Release { uid, .. } => Some(uid.as_str()),
            Op::Ask(_) | Op::Refill => None,
        });
        Releases {
            uids: uids.collect(),
            ops,
        }
    }

    /// Whether one of the releases drops the entry `c`.
    fn drops(&self, c: &Claim) -> bool {
        self.uids.contains(c.uid.as_str())
            && self.ops.iter().any(|op| match op {
                Op::Release { uid, node, all } => c.released_by(uid, node.as_deref(), *all),
                Op::Ask(_) | Op::Refill => false,
            })
    }
}

/// Applies queued changes to a lock (its kind and limit from the asks).
pub(super) fn change(spec: &mut LockSpec, ops: &[Op], limit: Option<u32>) {
    for op in ops {
        match op {
            Op::Ask(ask) => {
                spec.kind = ask.1.kind.to_string();
                spec.ask(ask.0.clone());
            }
            Op::Release { uid, node, all } => {
                spec.release(uid, node.as_deref(), *all);
            }
            Op::Refill => {}
        }
    }
    if let Some(n) = limit {
        spec.limit = n;
    }
    if spec.limit == 0 {
        spec.limit = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_dag::spec::sync::Limit;

    fn claim(i: u32, node: Option<&str>, priority: i32) -> Claim {
        Claim {
            workflow: format!("w{i}"),
            uid: format!("uid-{i}"),
            node: node.map(str::to_string),
            priority,
            // Arrivals share seconds; `asked` orders them within one.
            since: format!("t{:04}", i / 3),
            asked: format!("a{i:04}"),
            ..Default::default()
        }
    }

    fn ask(c: Claim) -> Op {
        let r = LockRef {
            kind: "semaphore",
            name: "s".into(),
            limit: Limit::Fixed(3),
            namespace: None,
        };
        Op::Ask(Box::new((c, r)))
    }

    /// Every waiter in the object (the old write's way: the whole kept
    /// line rejoins, is sorted and spilled again).
    fn write_whole(spec: &mut LockSpec, kept: &mut Vec<Claim>, ops: &[Op], now: &str) {
        spec.rejoin(kept.clone());
        change(spec, ops, Some(3));
        spec.settle(now);
        *kept = spec.spill();
    }

    /// The write as `Locks::write` makes it: the head taken, the rest
    /// merged back.
    fn write_head(spec: &mut LockSpec, kept: &mut Vec<Claim>, ops: &[Op], now: &str) {
        let mut taken = take(kept, spec, Some(3), ops);
        spec.rejoin(std::mem::take(&mut taken.head));
        change(spec, &taken.ops, Some(3));
        spec.settle(now);
        let out = spec.spill();
        spec.beyond += taken.tail as u32;
        *kept = keep(std::mem::take(kept), &taken, out);
    }

    #[test]
    fn taking_the_head_of_the_kept_line_writes_what_rejoining_all_of_it_wrote() {
        let (mut whole, mut head) = (LockSpec::default(), LockSpec::default());
        let (mut kept_whole, mut kept_head) = (Vec::new(), Vec::new());
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut asked = 0u32;
        for round in 0..400 {
            let mut ops = Vec::new();
            for _ in 0..next(6) {
                asked += 1;
                let node = (next(4) == 0).then_some("n");
                ops.push(ask(claim(asked, node, next(3) as i32)));
            }
            // Someone asks again before the first ask was written.
            if asked > 0 && next(3) == 0 {
                ops.push(ask(claim(next(asked as u64) as u32 + 1, None, 0)));
            }
            // Holders end; waiters in the object or far back go away.
            let everyone: Vec<Claim> = head
                .holders
                .iter()
                .chain(&head.waiters)
                .chain(&kept_head)
                .cloned()
                .collect();
            for _ in 0..next(4) {
                let pool = if next(2) == 0 {
                    &head.holders
                } else {
                    &everyone
                };
                if pool.is_empty() {
                    continue;
                }
                let c = &pool[next(pool.len() as u64) as usize];
                ops.push(Op::Release {
                    uid: c.uid.clone(),
                    node: c.node.clone(),
                    all: next(3) == 0,
                });
            }
            let now = format!("now{round}");
            write_whole(&mut whole, &mut kept_whole, &ops, &now);
            write_head(&mut head, &mut kept_head, &ops, &now);
            assert_eq!(head, whole, "round {round}: the object");
            assert_eq!(kept_head, kept_whole, "round {round}: the kept line");
        }
        assert!(asked > 500, "the line grew long: {asked} asked");
    }

    #[test]
    fn merging_two_lines_keeps_the_line_order() {
        let a = vec![claim(1, None, 2), claim(4, None, 0), claim(9, None, 0)];
        let b = vec![claim(2, None, 1), claim(3, None, 0), claim(12, None, 0)];
        let merged: Vec<String> = lock::merge_lines(a, b).iter().map(Claim::who).collect();
        assert_eq!(merged, ["w1", "w2", "w3", "w4", "w9", "w12"]);
    }
}
