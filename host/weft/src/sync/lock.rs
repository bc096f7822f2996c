//! The `Lock` kind: one mutex, semaphore or parallelism limit of a
//! namespace, with its holders and waiters in the object itself, so a
//! lock survives controller restarts, is shared by shards and replicas
//! (every change is one optimistic-concurrency update through the API
//! server) and `kubectl get locks` shows who holds what. Argo keeps this
//! state in the controller's memory and rebuilds it from workflow
//! statuses after a restart, where its users report locks lost or held
//! forever; here the object is the truth.
//!
//! The line in the object is kept short: at most [`LINE_CAP`] (16)
//! waiters are listed, and the rest are held by
//! the controller that wrote the object last (`spill`), which puts them
//! back in line as it empties (`rejoin`); `beyond` says how many. A
//! thousand workflows on a semaphore of 50 made every hand-over rewrite
//! (and every watcher decode) a 150 KB object of 950 waiters; each waiting
//! Workflow's own status already says what it waits for and its place,
//! so nothing a user reads is lost, and after a restart every waiting
//! Workflow asks again as the controller first reconciles it.
//!
//! Only the type and pure changes to it live here; `super` reads and
//! writes the objects.

use std::collections::HashSet;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A lock of a namespace (`mutex.<name>`, `semaphore.<name>`,
/// `parallelism.controller`, `parallelism.namespace`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "weft.dev",
    version = "v1alpha1",
    kind = "Lock",
    plural = "locks",
    namespaced,
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.kind"}"#,
    printcolumn = r#"{"name":"Limit","type":"integer","jsonPath":".spec.limit"}"#,
    printcolumn = r#"{"name":"Holders","type":"string","jsonPath":".spec.holders[*].workflow"}"#,
    printcolumn = r#"{"name":"Waiting","type":"string","jsonPath":".spec.waiters[*].workflow","priority":1}"#,
    printcolumn = r#"{"name":"Beyond","type":"integer","jsonPath":".spec.beyond","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LockSpec {
    /// `mutex`, `semaphore` or `parallelism`.
    pub kind: String,
    /// How many may hold it at once.
    pub limit: u32,
    /// Who holds it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<Claim>,
    /// Who waits for it, first first: higher priority, then earlier
    /// arrival; at most 16 of them (`LINE_CAP`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiters: Vec<Claim>,
    /// How many more wait behind `waiters`, held by the controller that
    /// last wrote the lock (their Workflows' statuses say so).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub beyond: u32,
}

/// The most waiters a Lock object lists; the rest are kept out of it.
/// Every hand-over rewrites the object, and its watchers decode it: at a
/// semaphore of 50 a line listed up to the limit made the object 100
/// claims instead of 66. More listed would only help another controller
/// (a shard) promote without this one, and that controller refills the
/// object when it runs short (`Locks::refill`).
pub const LINE_CAP: usize = 16;

/// One holder or waiter: a workflow, or one node of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The Workflow's name.
    pub workflow: String,
    /// The Workflow's namespace, when the lock lives in another (the
    /// controller-wide limit lives in the controller's): where to wake it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its uid (a later Workflow of the same name is someone else).
    pub uid: String,
    /// The node, for a node's claim; none for the workflow's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The workflow's `spec.priority`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// Arrival (RFC 3339): the Workflow's creation for its own claims,
    /// the first ask for a node's. Equal priorities go in this order, so
    /// none starves.
    pub since: String,
    /// When it was first asked for (RFC 3339, milliseconds): the order of
    /// arrivals within the same second (a creation time has seconds
    /// only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub asked: String,
    /// When it became a holder (RFC 3339, milliseconds): hand-over
    /// latency is measured from the previous holder's release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl Claim {
    /// Whether this entry is the claimant `(uid, node)`.
    pub fn is(&self, uid: &str, node: Option<&str>) -> bool {
        self.uid == uid && self.node.as_deref() == node
    }

    /// Whether a release of `(uid, node)` (`all`: every entry of the
    /// workflow) drops this entry.
    pub fn released_by(&self, uid: &str, node: Option<&str>, all: bool) -> bool {
        self.uid == uid && (all || self.node.as_deref() == node)
    }

    /// `wf` or `wf/node`, as messages and `weft sync list` name it.
    pub fn who(&self) -> String {
        match &self.node {
            Some(n) => format!("{}/{n}", self.workflow),
            None => self.workflow.clone(),
        }
    }
}

/// The line's order: higher priority, then earlier arrival (then the
/// order asked, uid and node, so that every controller sorts alike).
pub fn line_order(a: &Claim, b: &Claim) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| a.since.cmp(&b.since))
        .then_with(|| a.asked.cmp(&b.asked))
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| a.node.cmp(&b.node))
}

/// Two lines, each in [`line_order`], merged into one (linear: the kept
/// line of a long wait is merged, not sorted again, on every write).
pub fn merge_lines(a: Vec<Claim>, b: impl IntoIterator<Item = Claim>) -> Vec<Claim> {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    let mut out = Vec::with_capacity(a.len() + b.size_hint().0);
    loop {
        let first_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => line_order(x, y).is_le(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if first_a { a.next() } else { b.next() });
    }
}

/// The object name of a lock: `<kind>.<name>`.
pub fn object_name(kind: &str, name: &str) -> String {
    format!("{kind}.{name}")
}

impl LockSpec {
    /// Whether the claimant holds it.
    pub fn holds(&self, uid: &str, node: Option<&str>) -> bool {
        self.holders.iter().any(|c| c.is(uid, node))
    }

    /// Queues the claimant (a no-op when it holds or waits already).
    /// Whether anything changed.
    pub fn ask(&mut self, claim: Claim) -> bool {
        let (uid, node) = (claim.uid.clone(), claim.node.clone());
        let known = |c: &Claim| c.is(&uid, node.as_deref());
        if self.holders.iter().any(known) || self.waiters.iter().any(known) {
            return false;
        }
        self.waiters.push(claim);
        true
    }

    /// Drops the claimant's entries (`node: None` with `all`: every
    /// entry of the workflow). Whether anything changed.
    pub fn release(&mut self, uid: &str, node: Option<&str>, all: bool) -> bool {
        let before = self.holders.len() + self.waiters.len();
        let keep = |c: &Claim| !c.released_by(uid, node, all);
        self.holders.retain(keep);
        self.waiters.retain(keep);
        before != self.holders.len() + self.waiters.len()
    }

    /// How many waiters the object lists at most.
    pub fn line_cap(&self) -> usize {
        LINE_CAP
    }

    /// Puts waiters kept out of the object back in line (those not in it
    /// already, as a holder or a waiter). Linear: it runs on every write
    /// of a lock with a long line.
    pub fn rejoin(&mut self, kept: Vec<Claim>) {
        let fresh: Vec<bool> = {
            let known: HashSet<(&str, Option<&str>)> = self
                .holders
                .iter()
                .chain(&self.waiters)
                .map(|c| (c.uid.as_str(), c.node.as_deref()))
                .collect();
            let is_new = |c: &Claim| !known.contains(&(c.uid.as_str(), c.node.as_deref()));
            kept.iter().map(is_new).collect()
        };
        let new = kept
            .into_iter()
            .zip(fresh)
            .filter_map(|(c, f)| f.then_some(c));
        self.waiters.extend(new);
    }

    /// Takes the waiters beyond [`Self::line_cap`] out of the object, in
    /// order, and records how many (`beyond`).
    pub fn spill(&mut self) -> Vec<Claim> {
        self.order();
        let cap = self.line_cap().min(self.waiters.len());
        let out = self.waiters.split_off(cap);
        self.beyond = out.len() as u32;
        out
    }

    /// Sorts the waiters in [`line_order`].
    fn order(&mut self) {
        self.waiters.sort_by(line_order);
    }

    /// Orders the waiters and promotes the first ones while there is
    /// room; the claims promoted. A lowered limit removes no holder: the
    /// lock fills again only once they are under it.
    pub fn settle(&mut self, now: &str) -> Vec<Claim> {
        self.order();
        let room = (self.limit as usize).saturating_sub(self.holders.len());
        let n = room.min(self.waiters.len());
        let mut promoted: Vec<Claim> = self.waiters.drain(..n).collect();
        for c in &mut promoted {
            c.held_since = Some(now.to_string());
        }
        self.holders.extend(promoted.iter().cloned());
        promoted
    }

    /// What a waiter reads: the lock, who holds it and its place in line
    /// (in the object, else among `kept`, the waiters beyond it).
    pub fn describe_wait(
        &self,
        display: &str,
        uid: &str,
        node: Option<&str>,
        kept: &[Claim],
    ) -> String {
        let mut holders: Vec<String> = self.holders.iter().take(3).map(Claim::who).collect();
        if self.holders.len() > 3 {
            holders.push(format!("and {} more", self.holders.len() - 3));
        }
        let beyond = || {
            let i = kept.iter().position(|c| c.is(uid, node))?;
            Some(self.waiters.len() + i)
        };
        let place = self
            .waiters
            .iter()
            .position(|c| c.is(uid, node))
            .or_else(beyond);
        let held = match self.holders.len() {
            0 => "free".to_string(),
            n => format!("held by {} ({n}/{})", holders.join(", "), self.limit),
        };
        match place {
            Some(i) => format!("waiting for {display}, {held}; number {} in line", i + 1),
            None => format!("waiting for {display}, {held}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(wf: &str, node: Option<&str>, priority: i32, since: &str) -> Claim {
        Claim {
            workflow: wf.into(),
            uid: format!("uid-{wf}"),
            node: node.map(str::to_string),
            priority,
            since: since.into(),
            ..Default::default()
        }
    }

    fn lock(limit: u32) -> LockSpec {
        LockSpec {
            kind: "semaphore".into(),
            limit,
            ..Default::default()
        }
    }

    #[test]
    fn waiters_are_promoted_by_priority_then_arrival_up_to_the_limit() {
        let mut l = lock(2);
        assert!(l.ask(claim("late", None, 0, "2026-01-01T00:00:03Z")));
        assert!(l.ask(claim("early", None, 0, "2026-01-01T00:00:01Z")));
        assert!(l.ask(claim("urgent", None, 5, "2026-01-01T00:00:09Z")));
        assert!(
            !l.ask(claim("early", None, 0, "2026-01-01T00:00:01Z")),
            "asked twice"
        );
        let promoted: Vec<String> = l.settle("t1").iter().map(Claim::who).collect();
        assert_eq!(promoted, ["urgent", "early"]);
        assert!(l.holds("uid-urgent", None) && !l.holds("uid-late", None));
        assert_eq!(l.holders[0].held_since.as_deref(), Some("t1"));
        assert!(l.settle("t2").is_empty(), "full");
        let wait = l.describe_wait("semaphore/s", "uid-late", None, &[]);
        assert_eq!(
            wait,
            "waiting for semaphore/s, held by urgent, early (2/2); number 1 in line"
        );
        assert!(l.release("uid-early", None, false));
        assert_eq!(l.settle("t3")[0].who(), "late");
        assert!(!l.release("uid-early", None, false), "released twice");
    }

    #[test]
    fn a_long_line_keeps_its_head_in_the_object_and_the_rest_rejoins_in_order() {
        let mut l = lock(2);
        for i in 0..40 {
            // The later ones have a higher priority: they go first.
            l.ask(claim(
                &format!("w{i:02}"),
                None,
                i / 20,
                &format!("t{i:02}"),
            ));
        }
        l.settle("now");
        let kept = l.spill();
        assert_eq!(
            l.holders.iter().map(Claim::who).collect::<Vec<_>>(),
            ["w20", "w21"]
        );
        assert_eq!((l.waiters.len(), kept.len(), l.beyond), (LINE_CAP, 22, 22));
        assert_eq!(l.waiters[0].who(), "w22");
        assert_eq!(kept[0].who(), "w38", "the rest in order: {kept:?}");
        assert_eq!(kept[2].who(), "w00");
        let wait = l.describe_wait("semaphore/s", "uid-w01", None, &kept);
        assert!(wait.ends_with("number 20 in line"), "{wait}");

        // Two releases: the next two of the line hold it, and what was
        // kept out rejoins behind those in the object (asking twice for
        // one already in line changes nothing).
        l.release("uid-w20", None, false);
        l.release("uid-w21", None, false);
        l.rejoin(kept.clone());
        l.rejoin(kept);
        l.settle("later");
        let kept = l.spill();
        assert_eq!(
            l.holders.iter().map(Claim::who).collect::<Vec<_>>(),
            ["w22", "w23"]
        );
        assert_eq!(l.waiters.last().unwrap().who(), "w39");
        assert_eq!((kept.len(), l.beyond), (20, 20));
        let mut all = l.clone();
        all.rejoin(kept);
        assert_eq!(all.spill().len(), 20, "rejoining is idempotent");
    }

    #[test]
    fn arrivals_in_the_same_second_go_in_the_order_asked() {
        let mut l = lock(1);
        let mut second = claim("b-created-second", None, 0, "2026-01-01T00:00:01Z");
        second.asked = "2026-01-01T00:00:01.900Z".into();
        let mut first = claim("z-created-first", None, 0, "2026-01-01T00:00:01Z");
        first.asked = "2026-01-01T00:00:01.200Z".into();
        l.ask(second);
        l.ask(first);
        assert_eq!(l.settle("now")[0].who(), "z-created-first");
    }

    #[test]
    fn a_node_claim_is_its_own_and_a_workflow_release_drops_them_all() {
        let mut l = lock(3);
        l.ask(claim("w", Some("a"), 0, "t"));
        l.ask(claim("w", Some("b"), 0, "t"));
        l.ask(claim("w", None, 0, "t"));
        l.ask(claim("v", Some("a"), 0, "t"));
        l.settle("now");
        assert!(l.holds("uid-w", Some("a")) && !l.holds("uid-w", Some("c")));
        assert_eq!(l.waiters.len(), 1);
        assert!(l.release("uid-w", Some("a"), false));
        assert!(!l.holds("uid-w", Some("b")), "promoted only by settle");
        l.settle("later");
        assert!(l.holds("uid-w", Some("b")));
        assert!(l.release("uid-w", None, true));
        assert!(l.holders.iter().chain(&l.waiters).all(|c| c.uid != "uid-w"));
        assert_eq!(l.waiters.len() + l.holders.len(), 1);
    }

    #[test]
    fn a_lowered_limit_keeps_its_holders_and_promotes_no_one() {
        let mut l = lock(2);
        l.ask(claim("a", None, 0, "1"));
        l.ask(claim("b", None, 0, "2"));
        l.ask(claim("c", None, 0, "3"));
        l.settle("now");
        l.limit = 1;
        assert!(l.settle("now").is_empty());
        assert_eq!(l.holders.len(), 2);
        l.release("uid-a", None, false);
        assert!(l.settle("now").is_empty(), "still at the limit");
        l.release("uid-b", None, false);
        assert_eq!(l.settle("now")[0].who(), "c");
    }
}
