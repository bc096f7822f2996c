//! Synchronization (issue 44): mutexes, semaphores and the controller's
//! parallelism limits, kept in `Lock` objects (`lock.rs`).
//!
//! Reads come from a watch cache of the Locks, so a round asks "do I hold
//! it?" without a request. Writes are queued per lock and made by one
//! task per lock at a time, every queued change in one update: a
//! semaphore with a thousand waiters costs one write per hand-over batch
//! rather than one per waiter, and this process never conflicts with
//! itself. Other replicas and shards conflict through `resourceVersion`,
//! and the loser reads the lock again and retries. Every write promotes
//! waiters while there is room (`LockSpec::settle`), so a release hands
//! the lock over in the same write, and the new holders are woken from
//! that write's answer: waiting for the watch to bring the same version
//! back added its delay to every hand-over. Reads take the newer of the
//! watch cache and this process's last write (by `resourceVersion`), so
//! a holder woken that way finds itself holding; the watch wakes only
//! holders of versions newer than those already seen (other replicas'
//! writes, and every write after a restart). A claimant may instead wait
//! for the write that carries its ask ([`Locks::ask`]'s answer): a
//! workflow's first gate does, so an uncontended lock starts it in the
//! same reconcile, and a contended one's first status already says its
//! place in line; such a claimant is told, not woken.
//!
//! Several locks are taken in one order (the controller's parallelism
//! first, then kind, then name; `limits.rs`) and a claimant
//! waits on one lock at a time, holding those before it: two workflows
//! that name the same two mutexes cannot deadlock.

pub mod limits;
mod line;
pub mod lock;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use weft_dag::schedule::LockState;
use weft_dag::spec::sync::{Limit, LockRef};

pub use limits::{Limits, Parallelism};
use line::{Op, Taken, change, keep, take};
pub use lock::{Claim, Lock, LockSpec, object_name};

/// The holders last woken of each lock (namespace, name): the version
/// they were read from, and their (uid, node).
type SeenHolders = HashMap<(String, String), (Option<u64>, HashSet<(String, Option<String>)>)>;

/// A lock's key: (namespace, name).
type Key = (String, String);

/// A claimant: (uid, node).
type Who = (String, Option<String>);

/// Answers when the write carrying an ask was made (or given up): the
/// claimant then reads its state ([`Locks::state`]) itself.
pub type Written = tokio::sync::oneshot::Receiver<()>;

/// A claimant waiting for the write that carries its ask: told through
/// `tx` instead of woken; woken after all when nobody listens any more.
struct Told {
    who: Who,
    workflow: String,
    namespace: String,
    tx: tokio::sync::oneshot::Sender<()>,
}

/// Puts a Workflow (namespace, name) in the controller's queue.
pub type Wake = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Who asks: a workflow (its own claim) or one of its nodes.
#[derive(Debug, Clone)]
pub struct Claimant<'a> {
    /// The Workflow's name.
    pub workflow: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// The node, for a node's claim.
    pub node: Option<&'a str>,
    /// `spec.priority`.
    pub priority: i32,
    /// Arrival (RFC 3339).
    pub since: String,
}

#[derive(Default)]
struct Pending {
    ops: Vec<Op>,
    told: Vec<Told>,
    busy: bool,
}

/// The Locks of the namespaces the controller watches.
pub struct Locks {
    client: Client,
    store: Store<Lock>,
    /// Whether the watch's first list is in. Not `Store::wait_until_ready`:
    /// its oneshot wakes only the last of several waiters (`crate::live`).
    ready: tokio::sync::watch::Sender<bool>,
    pending: Mutex<HashMap<Key, Pending>>,
    /// The last version of each lock this process wrote.
    written: Mutex<HashMap<Key, Arc<Lock>>>,
    /// Who was woken as a holder, of which version.
    seen: Mutex<SeenHolders>,
    /// Claimants whose ask is being written and who wait for its answer
    /// (`Told`): the watch bringing that write back before its answer
    /// must not wake them too, or a workflow started by its gate is
    /// reconciled again at once, before its pod is in the cache, and
    /// applies the pod a second time.
    asking: Mutex<HashSet<Who>>,
    /// Waiters this process keeps out of each lock's object, in order
    /// (`LockSpec::spill`): the line behind the object's.
    kept: Mutex<HashMap<Key, Vec<Claim>>>,
    wake: Wake,
    watch: Mutex<Option<tokio::task::AbortHandle>>,
    /// Counts each Lock written (`weft_api_writes_total{kind="lock"}`).
    metrics: Arc<crate::metrics::Metrics>,
}

impl Drop for Locks {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Lock object: (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Held(pub String, pub String);

impl Held {
    /// The Lock `r` names, for a workflow in `ns`.
    pub fn of_ref(ns: &str, r: &LockRef) -> Held {
        Held(home(ns, r).to_string(), object_name(r.kind, &r.name))
    }

    fn of(lock: &Lock) -> Held {
        Held(lock.namespace().unwrap_or_default(), lock.name_any())
    }
}

fn key_of(lock: &Lock) -> Key {
    (lock.namespace().unwrap_or_default(), lock.name_any())
}

/// A Lock's `resourceVersion` as a number (etcd's revision, which both
/// kube-apiserver and the dev cluster give), to tell the newer of two
/// versions; `None` when it is not one.
fn version(lock: &Lock) -> Option<u64> {
    lock.metadata.resource_version.as_deref()?.parse().ok()
}

/// The newer of two versions of a lock (the first when they cannot be
/// told apart).
fn newer(a: Option<Arc<Lock>>, b: Option<Arc<Lock>>) -> Option<Arc<Lock>> {
    match (a, b) {
        (Some(a), Some(b)) => match (version(&a), version(&b)) {
            (Some(va), Some(vb)) if vb > va => Some(b),
            _ => Some(a),
        },
        (a, b) => a.or(b),
    }
}

/// The namespace of the Lock `r` names, for a workflow in `ns`.
fn home<'a>(ns: &'a str, r: &'a LockRef) -> &'a str {
    r.namespace.as_deref().unwrap_or(ns)
}

/// Locks taken in one order, whatever the order written: the
/// controller's parallelism first (a workflow holds no mutex while it
/// waits for a slot), then by kind and name.
fn ordered(refs: &[LockRef]) -> Vec<&LockRef> {
    let mut v: Vec<&LockRef> = refs.iter().collect();
    v.sort_by_key(|r| (r.kind != "parallelism", r.kind, &r.name));
    v
}

impl Locks {
    /// Watches the Locks of `namespace` (all when `None`); `wake` is
    /// called for every claim that became a holder.
    pub fn start(
        client: Client,
        namespace: Option<&str>,
        wake: Wake,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Locks> {
        let api: Api<Lock> = match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        let locks = Arc::new(Locks {
            client,
            store,
            ready: tokio::sync::watch::Sender::new(false),
            pending: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            seen: Mutex::new(SeenHolders::new()),
            asking: Mutex::new(HashSet::new()),
            kept: Mutex::new(HashMap::new()),
            wake,
            watch: Mutex::new(None),
            metrics,
        });
        let me = Arc::downgrade(&locks);
        let watch = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                let Some(locks) = me.upgrade() else { return };
                match ev {
                    Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => {
                        let asking = locks.asking().clone();
                        locks.wake_new_holders(&l, &asking);
                        locks.refill(&l);
                    }
                    Ok(watcher::Event::Delete(l)) => locks.deleted(&l),
                    Ok(watcher::Event::InitDone) => {
                        locks.ready.send_replace(true);
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => tracing::warn!("watching Locks: {e}"),
                }
            }
        });
        *locks.watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(watch.abort_handle());
        locks
    }

    /// Stops the watch (the controller is shutting down).
    pub fn stop(&self) {
        if let Some(w) = self.watch.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.abort();
        }
    }

    /// The newest version of a lock known here: the watch cache's, or
    /// this process's last write when the watch has not brought it yet.
    fn get(&self, ns: &str, r: &LockRef) -> Option<Arc<Lock>> {
        let key = (home(ns, r).to_string(), object_name(r.kind, &r.name));
        let cached = self
            .store
            .get(&reflector::ObjectRef::new(&key.1).within(&key.0));
        let mine = self.written().get(&key).cloned();
        newer(cached, mine)
    }

    /// Every Lock known here, each in its newest version (as [`get`]).
    ///
    /// [`get`]: Self::get
    fn latest(&self) -> Vec<Arc<Lock>> {
        let mut all: HashMap<Key, Arc<Lock>> = self
            .store
            .state()
            .into_iter()
            .map(|l| (key_of(&l), l))
            .collect();
        for (key, mine) in self.written().iter() {
            let cached = all.remove(key);
            if let Some(l) = newer(cached, Some(mine.clone())) {
                all.insert(key.clone(), l);
            }
        }
        all.into_values().collect()
    }

    /// A Lock deleted (by a user): what this process wrote of it is no
    /// longer newer than the watch cache.
    fn deleted(&self, lock: &Lock) {
        let key = key_of(lock);
        self.written().remove(&key);
        self.seen().remove(&key);
    }

    fn asking(&self) -> std::sync::MutexGuard<'_, HashSet<Who>> {
        self.asking.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, SeenHolders> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Claim>>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The holders and waiters of `lock`, those kept out of the object
    /// too, that `keep` picks (cloned: a long line is not copied to be
    /// searched; every reconcile of a locked workflow searches it).
    fn entries(&self, lock: &Lock, keep: impl Fn(&Claim) -> bool) -> Vec<Claim> {
        let kept = self.kept();
        let beyond = kept.get(&key_of(lock)).into_iter().flatten();
        let listed = lock.spec.holders.iter().chain(&lock.spec.waiters);
        listed.chain(beyond).filter(|c| keep(c)).cloned().collect()
    }

    /// Wakes the claims of `lock` that became holders since the version
    /// last seen, but those in `told` (they wait for this write's answer);
    /// a version older than that one (the watch bringing back what this
    /// process already wrote and woke) wakes no one.
    fn wake_new_holders(&self, lock: &Lock, told: &HashSet<Who>) {
        let (ns, name) = key_of(lock);
        let v = version(lock);
        let now: HashSet<Who> = lock
            .spec
            .holders
            .iter()
            .map(|c| (c.uid.clone(), c.node.clone()))
            .collect();
        let before = {
            let mut seen = self.seen();
            let entry = seen.entry((ns.clone(), name)).or_default();
            if let (Some(v), Some(last)) = (v, entry.0)
                && v <= last
            {
                return;
            }
            std::mem::replace(entry, (v, now)).1
        };
        for c in &lock.spec.holders {
            let who = (c.uid.clone(), c.node.clone());
            if !before.contains(&who) && !told.contains(&who) {
                (self.wake)(c.namespace.as_deref().unwrap_or(&ns), &c.workflow);
            }
        }
    }

    /// Whether the claimant holds every lock; else what it waits for.
    pub fn state(&self, ns: &str, uid: &str, node: Option<&str>, refs: &[LockRef]) -> LockState {
        for r in ordered(refs) {
            let held = self.get(ns, r);
            if held.as_ref().is_some_and(|l| l.spec.holds(uid, node)) {
                continue;
            }
            let message = match held {
                Some(l) => {
                    let kept = self.kept();
                    let beyond = kept.get(&key_of(&l)).map(Vec::as_slice).unwrap_or_default();
                    l.spec.describe_wait(&r.display(), uid, node, beyond)
                }
                None => format!("waiting for {}", r.display()),
            };
            return LockState::Waiting {
                kind: r.kind,
                message,
            };
        }
        LockState::Held
    }

    /// The claimant's entry as a holder of `r`, if it holds it.
    pub fn holding(&self, ns: &str, uid: &str, node: Option<&str>, r: &LockRef) -> Option<Claim> {
        let lock = self.get(ns, r)?;
        lock.spec.holders.iter().find(|c| c.is(uid, node)).cloned()
    }

    /// The first lock (in order) the claimant does not hold, if any.
    pub fn first_missing(
        &self,
        ns: &str,
        uid: &str,
        node: Option<&str>,
        refs: &[LockRef],
    ) -> Option<LockRef> {
        ordered(refs)
            .into_iter()
            .find(|r| !self.get(ns, r).is_some_and(|l| l.spec.holds(uid, node)))
            .cloned()
    }

    /// Queues the claimant for the first lock it does not hold yet; the
    /// answer, when it was queued, comes once the write carrying the ask
    /// is made. Dropped, the claimant is woken as a new holder instead.
    pub fn ask(self: &Arc<Self>, ns: &str, c: &Claimant<'_>, refs: &[LockRef]) -> Option<Written> {
        let r = self.first_missing(ns, c.uid, c.node, refs)?;
        let waits = self
            .get(ns, &r)
            .is_some_and(|l| !self.entries(&l, |w| w.is(c.uid, c.node)).is_empty());
        if waits {
            return None;
        }
        let (home, name) = (home(ns, &r).to_string(), object_name(r.kind, &r.name));
        let claim = Claim {
            workflow: c.workflow.to_string(),
            namespace: Some(ns.to_string()).filter(|n| *n != home),
            uid: c.uid.to_string(),
            node: c.node.map(str::to_string),
            priority: c.priority,
            since: c.since.clone(),
            asked: weft_dag::status::timestamp_millis(SystemTime::now()),
            held_since: None,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let who = (claim.uid.clone(), claim.node.clone());
        self.asking().insert(who.clone());
        let told = Told {
            who,
            workflow: claim.workflow.clone(),
            namespace: ns.to_string(),
            tx,
        };
        self.queue(&home, &name, Op::Ask(Box::new((claim, r))), Some(told));
        Some(rx)
    }

    /// Releases the workflow's entries that `keep` does not name (node,
    /// [`Held`] lock): what it finished with.
    pub fn keep_only(self: &Arc<Self>, uid: &str, keep: &HashSet<(Option<String>, Held)>) {
        for lock in self.of_workflow(uid) {
            let held = Held::of(&lock);
            let drop: HashSet<Option<String>> = self
                .entries(&lock, |c| c.uid == uid)
                .into_iter()
                .filter(|c| !keep.contains(&(c.node.clone(), held.clone())))
                .map(|c| c.node)
                .collect();
            for node in drop {
                let (uid, all) = (uid.to_string(), false);
                self.submit(&held.0, &held.1, Op::Release { uid, node, all });
            }
        }
    }

    /// Returns once the watch has listed the Locks.
    pub async fn listed(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Releases everything the workflow holds or waits for (it finished
    /// or was deleted). Cheap when it has nothing. Before the watch has
    /// listed the Locks (a controller just started) it waits for that,
    /// or a workflow that finished meanwhile would keep its lock.
    pub fn forget(self: &Arc<Self>, uid: &str) {
        if !*self.ready.borrow() {
            let (me, uid) = (self.clone(), uid.to_string());
            let mut ready = self.ready.subscribe();
            tokio::spawn(async move {
                if ready.wait_for(|r| *r).await.is_ok() {
                    me.forget(&uid);
                }
            });
            return;
        }
        for lock in self.of_workflow(uid) {
            let op = Op::Release {
                uid: uid.to_string(),
                node: None,
                all: true,
            };
            let held = Held::of(&lock);
            self.submit(&held.0, &held.1, op);
        }
    }

    /// Every Lock with an entry of the workflow, kept out of the object
    /// or not (uids are unique in the cluster; the controller-wide limit
    /// lives outside its namespace).
    pub fn of_workflow(&self, uid: &str) -> Vec<Arc<Lock>> {
        self.latest()
            .into_iter()
            .filter(|l| !self.entries(l, |c| c.uid == uid).is_empty())
            .collect()
    }

    /// Entries of Workflows that no longer run (`alive` says which uids
    /// do), released: a Workflow deleted while no controller ran, or one
    /// whose release was lost.
    pub fn sweep(self: &Arc<Self>, alive: &dyn Fn(&str) -> bool) {
        for lock in self.latest() {
            let ns = lock.namespace().unwrap_or_default();
            let gone: HashSet<String> = self
                .entries(&lock, |c| !alive(&c.uid))
                .into_iter()
                .map(|c| c.uid)
                .collect();
            for uid in gone {
                tracing::info!(lock = %lock.name_any(), namespace = %ns, %uid, "releasing the lock of a Workflow that is gone");
                self.forget(&uid);
            }
        }
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Lock>>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(self: &Arc<Self>, ns: &str, name: &str, op: Op) {
        self.queue(ns, name, op, None);
    }

    /// Queues `op` for the lock's writer (started when none runs).
    fn queue(self: &Arc<Self>, ns: &str, name: &str, op: Op, told: Option<Told>) {
        let key = (ns.to_string(), name.to_string());
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let p = pending.entry(key.clone()).or_default();
        p.ops.push(op);
        p.told.extend(told);
        if !p.busy {
            p.busy = true;
            tokio::spawn(self.clone().drain(key));
        }
    }

    /// Writes a lock's queued changes until none are left.
    async fn drain(self: Arc<Self>, key: Key) {
        let mut failures = 0u32;
        loop {
            let (ops, told) = {
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                let p = pending.entry(key.clone()).or_default();
                if p.ops.is_empty() {
                    pending.remove(&key);
                    return;
                }
                (std::mem::take(&mut p.ops), std::mem::take(&mut p.told))
            };
            // A failed write drops `told`: its claimants, answered, find
            // themselves waiting, and a later write wakes them as usual.
            match self.write(&key.0, &key.1, &ops).await {
                Ok(stored) => {
                    failures = 0;
                    self.answer(stored.as_deref(), told);
                }
                Err(e) => {
                    {
                        let mut asking = self.asking();
                        for t in &told {
                            asking.remove(&t.who);
                        }
                    }
                    failures += 1;
                    tracing::warn!(lock = %key.1, namespace = %key.0, failures, "cannot update the Lock: {e:#}");
                    if failures < 30 {
                        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                        let p = pending.entry(key.clone()).or_default();
                        let newer = std::mem::replace(&mut p.ops, ops);
                        p.ops.extend(newer);
                    }
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(failures.min(10))))
                        .await;
                }
            }
        }
    }

    /// After a write (`stored`: the version it made, if it changed the
    /// lock): new holders are woken but those told here, and a claimant
    /// told who stopped listening (a node's ask drops its answer) is woken
    /// after all if this write made it a holder: only then, or every
    /// node's ask would cost its workflow a reconcile.
    fn answer(&self, stored: Option<&Lock>, told: Vec<Told>) {
        let listening: HashSet<Who> = told
            .iter()
            .filter(|t| !t.tx.is_closed())
            .map(|t| t.who.clone())
            .collect();
        if let Some(lock) = stored {
            self.wake_new_holders(lock, &listening);
        }
        for t in told {
            self.asking().remove(&t.who);
            let holds = stored.is_some_and(|l| l.spec.holds(&t.who.0, t.who.1.as_deref()));
            if t.tx.send(()).is_err() && holds {
                (self.wake)(&t.namespace, &t.workflow);
            }
        }
    }

    /// One update of a lock with `ops` (created when missing), retried
    /// on conflict with a fresh read; the version stored, if it changed.
    async fn write(&self, ns: &str, name: &str, ops: &[Op]) -> anyhow::Result<Option<Arc<Lock>>> {
        let api: Api<Lock> = Api::namespaced(self.client.clone(), ns);
        let limit = self.limit(ns, ops).await;
        // What this process last wrote is newer than the watch cache,
        // which lags behind that write: start from it (a conflict, when
        // another replica wrote since, reads the lock again).
        let key = (ns.to_string(), name.to_string());
        let mine = self.written().get(&key).cloned();
        let mut cached = newer(
            self.store.get(&reflector::ObjectRef::new(name).within(ns)),
            mine,
        );
        for _ in 0..20 {
            let current = match cached.take() {
                Some(l) => Some((*l).clone()),
                None => api.get_opt(name).await?,
            };
            let exists = current.is_some();
            let mut lock = current.unwrap_or_else(|| Lock::new(name, LockSpec::default()));
            let before = lock.spec.clone();
            let mut taken = self.take_line(&key, &lock.spec, limit, ops);
            lock.spec.rejoin(std::mem::take(&mut taken.head));
            change(&mut lock.spec, &taken.ops, limit);
            let now = weft_dag::status::timestamp_millis(SystemTime::now());
            lock.spec.settle(&now);
            let out = lock.spec.spill();
            lock.spec.beyond += taken.tail as u32;
            if exists && lock.spec == before {
                self.keep_line(key, &taken, out);
                return Ok(None);
            }
            lock.metadata.managed_fields = None;
            let result = match exists {
                true => api.replace(name, &PostParams::default(), &lock).await,
                false => api.create(&PostParams::default(), &lock).await,
            };
            match result {
                Ok(stored) => {
                    self.metrics.api_write("lock");
                    let stored = Arc::new(stored);
                    self.written().insert(key.clone(), stored.clone());
                    self.keep_line(key, &taken, out);
                    return Ok(Some(stored));
                }
                // Changed or deleted meanwhile: read it again.
                Err(kube::Error::Api(e)) if e.code == 409 || (e.code == 404 && exists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        anyhow::bail!("20 conflicting updates in a row")
    }

    /// Another controller (a shard) wrote the lock and its listed line
    /// ran short while this one keeps waiters out of it: they move in,
    /// or they would wait for this controller's next write of the lock,
    /// which its waiting workflows alone never make.
    fn refill(self: &Arc<Self>, lock: &Lock) {
        let short = lock.spec.waiters.len() < lock.spec.line_cap();
        let key = key_of(lock);
        if short && self.kept().get(&key).is_some_and(|k| !k.is_empty()) {
            self.submit(&key.0, &key.1, Op::Refill);
        }
    }

    /// What a write of `spec` with `ops` takes of the line kept out of
    /// it ([`take`]).
    fn take_line(&self, key: &Key, spec: &LockSpec, limit: Option<u32>, ops: &[Op]) -> Taken {
        let kept = self.kept();
        take(
            kept.get(key).map(Vec::as_slice).unwrap_or_default(),
            spec,
            limit,
            ops,
        )
    }

    /// Records the line kept out of a lock after a write ([`keep`]; only
    /// this lock's writer changes it, one write at a time).
    fn keep_line(&self, key: Key, taken: &Taken, out: Vec<Claim>) {
        let mut kept = self.kept();
        let line = keep(kept.remove(&key).unwrap_or_default(), taken, out);
        if !line.is_empty() {
            kept.insert(key, line);
        }
    }

    /// The limit the queued asks give (the last one's), read from its
    /// ConfigMap when it names one; `None` when no ask gives one.
    async fn limit(&self, ns: &str, ops: &[Op]) -> Option<u32> {
        let r = ops.iter().rev().find_map(|op| match op {
            Op::Ask(ask) => Some(&ask.1),
            Op::Release { .. } | Op::Refill => None,
        })?;
        match &r.limit {
            Limit::Fixed(n) => Some(*n),
            Limit::ConfigMap(key) => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
                let cm = api.get_opt(&key.name).await.ok().flatten();
                let value = cm
                    .and_then(|c| c.data)
                    .and_then(|d| d.get(&key.key).cloned());
                match value.as_deref().map(|v| v.trim().parse::<u32>()) {
                    Some(Ok(n)) => Some(n),
                    other => {
                        tracing::warn!(semaphore = %r.name, configmap = %key.name, key = %key.key, "no usable limit ({other:?}); the semaphore keeps its limit (1 when new)");
                        None
                    }
                }
            }
        }
    }
}
