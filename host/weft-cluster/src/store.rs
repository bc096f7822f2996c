//! The object store: an in-memory index of every object, a single monotonic
//! revision counter (the `resourceVersion`), a bounded history of changes for
//! watches, and a redb file underneath.
//!
//! Writes are serialised by one mutex so revisions are handed out in order and
//! a read-modify-write (update, patch, apply) never races another writer. The
//! disk write happens on a dedicated thread that groups whatever commits are
//! queued into one redb transaction (group commit): a client is answered, and
//! watchers are told, only after the transaction holding its change is durable,
//! so killing the process loses no acknowledged write and no watcher sees a
//! change that a restart would forget.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use crate::error::{Error, Result};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// What happened to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => EventKind::Added,
            "MODIFIED" => EventKind::Modified,
            "DELETED" => EventKind::Deleted,
            _ => return None,
        })
    }
}

/// One committed change. `prev` lets a watch with a label selector turn a
/// change that moves an object out of (or into) its selection into the
/// DELETED (or ADDED) event a real API server sends.
#[derive(Debug)]
pub(crate) struct WatchEvent {
    pub(crate) rev: u64,
    pub(crate) kind: EventKind,
    /// `group/resource`, e.g. `/pods` or `apps/deployments`.
    pub(crate) gr: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) object: Arc<Value>,
    pub(crate) prev: Option<Arc<Value>>,
}

/// Objects of one resource, keyed by (namespace, name); cluster-scoped objects
/// use an empty namespace. A BTreeMap keeps lists sorted, which is what makes
/// `limit`/`continue` stable.
pub(crate) type Bucket = BTreeMap<(String, String), Arc<Value>>;

/// Mutable state behind the write lock.
pub(crate) struct State {
    rev: u64,
    objects: HashMap<String, Bucket>,
    pending: Vec<Arc<WatchEvent>>,
}

/// One change as the history keeps it: its stored record (what the
/// database's event table holds), not the parsed object. A parsed
/// `serde_json::Value` takes several times its JSON size, so history kept
/// as parsed events grew to gigabytes under a byte limit counted in JSON
/// (a 100,000-node run's pods and status patches); kept serialized, the
/// limit is what it holds. Only a watch that resumes from the past parses
/// it again.
#[derive(Clone)]
pub(crate) struct Past {
    rev: u64,
    /// The resource and namespace, so a watch skips others' changes
    /// without parsing them.
    gr: Arc<str>,
    namespace: Arc<str>,
    record: Arc<[u8]>,
}

impl Past {
    /// Whether the change is to `gr`, in `namespace` when one is given.
    pub(crate) fn is_for(&self, gr: &str, namespace: Option<&str>) -> bool {
        *self.gr == *gr && namespace.is_none_or(|n| *self.namespace == *n)
    }

    /// The change as a watch event (without the previous version, which
    /// only live label-selector watches use); `None` for a damaged record.
    pub(crate) fn event(&self) -> Option<WatchEvent> {
        parse_record(self.rev, &self.record)
    }
}

/// The watch side: history for resuming watches and a broadcast for live ones.
pub(crate) struct Hub {
    /// Each change, serialized.
    history: VecDeque<Past>,
    /// Sum of the record sizes in `history`.
    bytes: usize,
    /// Every event with a revision at or below this one has been dropped from
    /// history; resuming from an older revision is answered with 410 Gone.
    compacted: u64,
    tx: broadcast::Sender<Arc<WatchEvent>>,
}

/// How many events the live fan-out holds for its slowest watcher. Each
/// holds a whole object and its previous version, so with large objects
/// (a 20,000-node Workflow's status patches) a deep buffer behind one slow
/// watch held gigabytes; a watch that falls further behind is closed and
/// resumes from the history, which is bounded in bytes (as kube-apiserver
/// closes watches its watch cache cannot keep up with).
const LIVE_EVENTS: usize = 1_024;

/// redb's page cache. Every object is also held in memory, parsed, and the
/// database is read only when the cluster starts, so its cache serves
/// writes alone; redb's default of 1 GiB held ~450 MB in a 20,000-node run.
const DB_CACHE: usize = 64 * 1024 * 1024;

/// What a watch gets when it subscribes: the changes it missed, and a
/// receiver for the rest.
pub(crate) struct Subscription {
    /// Serialized: a watch parses each change as it sends it, so a watch
    /// resuming far back does not hold its whole backlog parsed at once.
    pub(crate) backlog: Vec<Past>,
    pub(crate) rx: broadcast::Receiver<Arc<WatchEvent>>,
}

/// A commit's events and who to tell when they are durable.
type Pending = (Vec<Arc<WatchEvent>>, oneshot::Sender<Result<(), String>>);

enum WriterMsg {
    Commit(Vec<Arc<WatchEvent>>, oneshot::Sender<Result<(), String>>),
    Close(oneshot::Sender<()>),
}

/// The store shared by the server, the garbage collector and the runner.
pub(crate) struct Store {
    state: Mutex<State>,
    hub: Arc<Mutex<Hub>>,
    writer: std::sync::mpsc::Sender<WriterMsg>,
}

fn db_key(gr: &str, ns: &str, name: &str) -> String {
    format!("{gr}\u{0}{ns}\u{0}{name}")
}

fn split_key(key: &str) -> Option<(String, String, String)> {
    let mut it = key.splitn(3, '\u{0}');
    Some((
        it.next()?.to_string(),
        it.next()?.to_string(),
        it.next()?.to_string(),
    ))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent data (all mutations are
    // single inserts), so poisoning is not a reason to stop serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// Opens (or creates) the database in `dir` and loads everything into
    /// memory. `history_limit` bounds how many changes are kept for resuming
    /// watches.
    pub(crate) fn open(dir: &Path, limits: HistoryLimits) -> Result<Arc<Store>> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io(dir.to_path_buf(), e))?;
        let path = dir.join("cluster.redb");
        let db = Database::builder()
            .set_cache_size(DB_CACHE)
            .create(&path)
            .map_err(|e| Error::Storage(e.to_string()))?;
        let (objects, rev, compacted, history) = load(&db)?;
        let (tx, _) = broadcast::channel(LIVE_EVENTS);
        let bytes = history.iter().map(|p| p.record.len()).sum();
        let hub = Arc::new(Mutex::new(Hub {
            history,
            bytes,
            compacted,
            tx,
        }));
        let (wtx, wrx) = std::sync::mpsc::channel();
        let writer_hub = hub.clone();
        std::thread::Builder::new()
            .name("weft-cluster-store".into())
            .spawn(move || writer_loop(db, wrx, writer_hub, limits))
            .map_err(|e| Error::Io(path.clone(), e))?;
        Ok(Arc::new(Store {
            state: Mutex::new(State {
                rev,
                objects,
                pending: Vec::new(),
            }),
            hub,
            writer: wtx,
        }))
    }

    /// Starts a write transaction: holds the write lock until committed.
    pub(crate) fn begin(&self) -> Txn<'_> {
        Txn {
            store: self,
            state: lock(&self.state),
        }
    }

    /// Current revision (the newest resourceVersion handed out).
    pub(crate) fn revision(&self) -> u64 {
        lock(&self.state).rev
    }

    /// Reads one object.
    pub(crate) fn get(&self, gr: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        lock(&self.state)
            .objects
            .get(gr)
            .and_then(|b| b.get(&(ns.to_string(), name.to_string())).cloned())
    }

    /// Lists a resource (optionally one namespace) with the revision the list
    /// is consistent with.
    pub(crate) fn list(&self, gr: &str, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let st = lock(&self.state);
        (list_in(&st, gr, ns), st.rev)
    }

    /// Subscribes to changes after `rev`; `Err(compacted)` when the history
    /// no longer reaches back that far.
    pub(crate) fn subscribe_from(&self, rev: u64) -> Result<Subscription, u64> {
        let hub = lock(&self.hub);
        if rev < hub.compacted {
            return Err(hub.compacted);
        }
        let backlog = hub
            .history
            .iter()
            .filter(|p| p.rev > rev)
            .cloned()
            .collect();
        Ok(Subscription {
            backlog,
            rx: hub.tx.subscribe(),
        })
    }

    /// Subscribes to live changes only.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        lock(&self.hub).tx.subscribe()
    }

    /// The oldest revision a watch can resume from.
    pub(crate) fn compacted(&self) -> u64 {
        lock(&self.hub).compacted
    }

    /// Flushes and closes the database file so another instance can open it.
    pub(crate) async fn close(&self) {
        let (tx, rx) = oneshot::channel();
        if self.writer.send(WriterMsg::Close(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Every object of every resource; used by the garbage collector.
    pub(crate) fn snapshot(&self) -> Vec<(String, Arc<Value>)> {
        let st = lock(&self.state);
        st.objects
            .iter()
            .flat_map(|(gr, b)| b.values().map(move |o| (gr.clone(), o.clone())))
            .collect()
    }
}

fn list_in(st: &State, gr: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
    let Some(bucket) = st.objects.get(gr) else {
        return Vec::new();
    };
    match ns {
        None => bucket.values().cloned().collect(),
        Some(ns) => bucket
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, v)| v.clone())
            .collect(),
    }
}

/// A write transaction. Every mutation must be validated before calling
/// [`Txn::put`] or [`Txn::delete`]: there is no rollback.
pub(crate) struct Txn<'a> {
    store: &'a Store,
    state: MutexGuard<'a, State>,
}

impl Txn<'_> {
    pub(crate) fn get(&self, gr: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.state
            .objects
            .get(gr)
            .and_then(|b| b.get(&(ns.to_string(), name.to_string())).cloned())
    }

    pub(crate) fn list(&self, gr: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
        list_in(&self.state, gr, ns)
    }

    /// Stores `obj` under a new revision, which is written into its
    /// `metadata.resourceVersion`; returns the stored object.
    pub(crate) fn put(&mut self, gr: &str, ns: &str, name: &str, mut obj: Value) -> Arc<Value> {
        self.state.rev += 1;
        let rev = self.state.rev;
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
        }
        let obj = Arc::new(obj);
        let prev = self
            .state
            .objects
            .entry(gr.to_string())
            .or_default()
            .insert((ns.to_string(), name.to_string()), obj.clone());
        let kind = if prev.is_some() {
            EventKind::Modified
        } else {
            EventKind::Added
        };
        self.state.pending.push(Arc::new(WatchEvent {
            rev,
            kind,
            gr: gr.to_string(),
            namespace: ns.to_string(),
            name: name.to_string(),
            object: obj.clone(),
            prev,
        }));
        obj
    }

    /// Removes an object; the DELETED event carries its last state stamped
    /// with the deletion's revision, as a real API server does.
    pub(crate) fn delete(&mut self, gr: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.delete_as(gr, ns, name, None)
    }

    /// Removes an object, reporting `last` as its final state (an update
    /// that removed the last finalizer deletes with the updated content).
    pub(crate) fn delete_as(
        &mut self,
        gr: &str,
        ns: &str,
        name: &str,
        last: Option<Value>,
    ) -> Option<Arc<Value>> {
        let prev = self
            .state
            .objects
            .get_mut(gr)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.state.rev += 1;
        let rev = self.state.rev;
        let mut last = last.unwrap_or_else(|| (*prev).clone());
        if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
        }
        let last = Arc::new(last);
        self.state.pending.push(Arc::new(WatchEvent {
            rev,
            kind: EventKind::Deleted,
            gr: gr.to_string(),
            namespace: ns.to_string(),
            name: name.to_string(),
            object: last.clone(),
            prev: Some(prev),
        }));
        Some(last)
    }

    /// Hands the changes to the writer thread and releases the lock. The
    /// returned future resolves once they are durable.
    pub(crate) fn commit(mut self) -> impl std::future::Future<Output = Result<()>> + use<> {
        let events = std::mem::take(&mut self.state.pending);
        let rx = if events.is_empty() {
            None
        } else {
            let (tx, rx) = oneshot::channel();
            // Sent while still holding the lock: the writer sees commits in
            // revision order.
            let sent = self.store.writer.send(WriterMsg::Commit(events, tx));
            sent.ok().map(|_| rx)
        };
        drop(self);
        async move {
            match rx {
                None => Ok(()),
                Some(rx) => match rx.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(Error::Storage(e)),
                    Err(_) => Err(Error::Storage("the store is closed".into())),
                },
            }
        }
    }
}

type Loaded = (HashMap<String, Bucket>, u64, u64, VecDeque<Past>);

/// How much history is kept for watches to resume from: whichever limit is
/// reached first. The byte limit keeps large, often-patched objects (a big
/// Workflow status) from holding gigabytes of old versions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HistoryLimits {
    pub(crate) events: usize,
    pub(crate) bytes: usize,
}

fn load(db: &Database) -> Result<Loaded> {
    let st = |e: &dyn std::fmt::Display| Error::Storage(e.to_string());
    // Make sure the tables exist so a read transaction can open them.
    let w = db.begin_write().map_err(|e| st(&e))?;
    {
        w.open_table(OBJECTS).map_err(|e| st(&e))?;
        w.open_table(EVENTS).map_err(|e| st(&e))?;
        w.open_table(META).map_err(|e| st(&e))?;
    }
    w.commit().map_err(|e| st(&e))?;

    let r = db.begin_read().map_err(|e| st(&e))?;
    let meta = r.open_table(META).map_err(|e| st(&e))?;
    let rev = meta
        .get("rev")
        .map_err(|e| st(&e))?
        .map(|v| v.value())
        .unwrap_or(0);
    let compacted = meta
        .get("compacted")
        .map_err(|e| st(&e))?
        .map(|v| v.value())
        .unwrap_or(0);
    let mut objects: HashMap<String, Bucket> = HashMap::new();
    for item in r
        .open_table(OBJECTS)
        .map_err(|e| st(&e))?
        .iter()
        .map_err(|e| st(&e))?
    {
        let (k, v) = item.map_err(|e| st(&e))?;
        let Some((gr, ns, name)) = split_key(k.value()) else {
            continue;
        };
        let obj: Value = serde_json::from_slice(v.value()).map_err(|e| st(&e))?;
        objects
            .entry(gr)
            .or_default()
            .insert((ns, name), Arc::new(obj));
    }
    let mut history = VecDeque::new();
    for item in r
        .open_table(EVENTS)
        .map_err(|e| st(&e))?
        .iter()
        .map_err(|e| st(&e))?
    {
        let (k, v) = item.map_err(|e| st(&e))?;
        let Some(ev) = parse_record(k.value(), v.value()) else {
            continue;
        };
        history.push_back(Past {
            rev: ev.rev,
            gr: ev.gr.into(),
            namespace: ev.namespace.into(),
            record: Arc::from(v.value()),
        });
    }
    Ok((objects, rev, compacted, history))
}

/// A stored event record (`{"t": kind, "k": key, "o": object}`) as a
/// watch event; `None` when it is not one.
fn parse_record(rev: u64, bytes: &[u8]) -> Option<WatchEvent> {
    let mut rec: Value = serde_json::from_slice(bytes).ok()?;
    let get = |f: &str| rec.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    let kind = EventKind::parse(&get("t"))?;
    let (gr, namespace, name) = split_key(&get("k"))?;
    Some(WatchEvent {
        rev,
        kind,
        gr,
        namespace,
        name,
        object: Arc::new(rec.get_mut("o").map(Value::take).unwrap_or(Value::Null)),
        prev: None,
    })
}

fn writer_loop(
    db: Database,
    rx: std::sync::mpsc::Receiver<WriterMsg>,
    hub: Arc<Mutex<Hub>>,
    limits: HistoryLimits,
) {
    let mut closing = None;
    while closing.is_none() {
        let Ok(first) = rx.recv() else { break };
        let mut batch = Vec::new();
        match first {
            WriterMsg::Commit(ev, ack) => batch.push((ev, ack)),
            WriterMsg::Close(done) => closing = Some(done),
        }
        // Group commit: take whatever else is already queued.
        while closing.is_none() && batch.len() < 1024 {
            match rx.try_recv() {
                Ok(WriterMsg::Commit(ev, ack)) => batch.push((ev, ack)),
                Ok(WriterMsg::Close(done)) => closing = Some(done),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let records: Result<Vec<Record>, String> = batch
            .iter()
            .flat_map(|(evs, _)| evs.iter())
            .map(record)
            .collect();
        let result = records.and_then(|records| {
            let trim = {
                let h = lock(&hub);
                let mut count = h.history.len() + records.len();
                let mut bytes = h.bytes + records.iter().map(|(_, _, r)| r.len()).sum::<usize>();
                let mut trim = 0;
                for past in h.history.iter() {
                    if count <= limits.events.max(1) && bytes <= limits.bytes {
                        break;
                    }
                    count -= 1;
                    bytes -= past.record.len();
                    trim += 1;
                }
                trim
            };
            write_batch(&db, &batch, &records, &hub, trim)?;
            Ok((trim, records))
        });
        let mut h = lock(&hub);
        if let Ok((trim, records)) = &result {
            for _ in 0..*trim {
                if let Some(old) = h.history.pop_front() {
                    h.compacted = h.compacted.max(old.rev);
                    h.bytes -= old.record.len();
                }
            }
            let events = batch.iter().flat_map(|(evs, _)| evs.iter());
            for (ev, (_, _, rec)) in events.zip(records) {
                h.bytes += rec.len();
                h.history.push_back(Past {
                    rev: ev.rev,
                    gr: ev.gr.as_str().into(),
                    namespace: ev.namespace.as_str().into(),
                    record: Arc::from(rec.as_slice()),
                });
                // No receivers is fine.
                let _ = h.tx.send(ev.clone());
            }
        }
        drop(h);
        let result = result.map(|_| ());
        for (_, ack) in batch {
            let _ = ack.send(result.clone());
        }
    }
    drop(db);
    if let Some(done) = closing {
        let _ = done.send(());
    }
}

/// The stored forms of one change: its key, the object, the history record.
type Record = (String, Vec<u8>, Vec<u8>);

/// Builds a change's [`Record`].
fn record(ev: &Arc<WatchEvent>) -> Result<Record, String> {
    let key = db_key(&ev.gr, &ev.namespace, &ev.name);
    let body = serde_json::to_vec(&*ev.object).map_err(|e| e.to_string())?;
    let rec = serde_json::json!({"t": ev.kind.as_str(), "k": key});
    let mut rec = serde_json::to_vec(&rec).map_err(|e| e.to_string())?;
    rec.pop(); // the closing brace
    rec.extend_from_slice(b",\"o\":");
    rec.extend_from_slice(&body);
    rec.push(b'}');
    Ok((key, body, rec))
}

fn write_batch(
    db: &Database,
    batch: &[Pending],
    records: &[Record],
    hub: &Mutex<Hub>,
    trim: usize,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let w = db.begin_write().map_err(|x| e(&x))?;
    {
        let mut objects = w.open_table(OBJECTS).map_err(|x| e(&x))?;
        let mut events = w.open_table(EVENTS).map_err(|x| e(&x))?;
        let mut meta = w.open_table(META).map_err(|x| e(&x))?;
        let mut last = 0;
        let evs = batch.iter().flat_map(|(evs, _)| evs.iter());
        for (ev, (key, body, rec)) in evs.zip(records) {
            if ev.kind == EventKind::Deleted {
                objects.remove(key.as_str()).map_err(|x| e(&x))?;
            } else {
                objects
                    .insert(key.as_str(), body.as_slice())
                    .map_err(|x| e(&x))?;
            }
            events.insert(ev.rev, rec.as_slice()).map_err(|x| e(&x))?;
            last = ev.rev;
        }
        meta.insert("rev", last).map_err(|x| e(&x))?;
        if trim > 0 {
            let h = lock(hub);
            let mut compacted = h.compacted;
            for old in h.history.iter().take(trim) {
                events.remove(old.rev).map_err(|x| e(&x))?;
                compacted = compacted.max(old.rev);
            }
            meta.insert("compacted", compacted).map_err(|x| e(&x))?;
        }
    }
    w.commit().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests;
