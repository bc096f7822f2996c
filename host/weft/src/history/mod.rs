//! Execution history (issue 43): every workflow, node and task-attempt
//! event in a database, and the archive of finished Workflows, as
//! flyteadmin and Argo's workflow archive keep them.
//!
//! The route is one way and never makes execution wait:
//! the round makes the events (`weft_dag::history`), the controller writes
//! them into the Workflow's status outbox with the transition itself
//! (`controller/reconcile.rs`), then hands the written status to
//! [`History::record`]. The exporter (`export.rs`) copies pending events to
//! the database in batches, idempotently (each event's id is its key), and
//! the next status write drops the ones the database has
//! ([`History::prune`]). A database that is down delays the copy; the
//! outbox keeps the events across a controller crash. A finished
//! Workflow is archived ([`History::archive`]) once its events are in, and
//! TTL deletion waits for that ([`History::holds`]).
//!
//! Modules: `db.rs` (the pool, migrations, the schema check), `export.rs`
//! (the exporter: events and archive rows), `retention.rs` (the background
//! job of `--archive-ttl` and `--archive-max-rows`).

pub mod db;
mod export;
pub mod query;
mod retention;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use tokio::sync::Notify;
use weft_dag::WorkflowStatus;
use weft_dag::history::{EventId, EventKind, HistoryEvent};

use crate::api::Workflow;
use crate::metrics::Metrics;
pub use db::{Db, DbError};

/// How long archived executions are kept.
#[derive(Debug, Clone, Copy, Default)]
pub struct Retention {
    /// Removed this long after they were archived (`--archive-ttl`).
    pub ttl: Option<Duration>,
    /// At most this many, the oldest removed first (`--archive-max-rows`).
    pub max_rows: Option<u64>,
}

/// One event on its way to the database.
#[derive(Debug, Clone)]
struct Pending {
    ns: String,
    name: String,
    event: HistoryEvent,
    /// A succeeded node's outputs (or their store reference), as JSON.
    outputs: Option<String>,
}

/// A finished Workflow waiting to be archived.
#[derive(Debug, Clone)]
struct Archive {
    ns: String,
    name: String,
    /// The Workflow object as JSON, `managedFields` left out.
    object: serde_json::Value,
}

/// What the exporter holds in memory (bounded by the live Workflows plus
/// what waits for the database).
#[derive(Default)]
struct State {
    pending: BTreeMap<(String, EventId), Pending>,
    acked: HashMap<String, HashSet<EventId>>,
    archives: HashMap<String, Archive>,
    archived: HashSet<String>,
}

/// The history of one controller (or `weft dev`): the database, what waits
/// for it, and whether it answers.
pub struct History {
    db: Db,
    state: Mutex<State>,
    wake: Notify,
    metrics: Arc<Metrics>,
    /// `None`: up; else why history is degraded.
    degraded: Mutex<Option<String>>,
    retention: Retention,
}

impl History {
    /// The history over `db`, degraded until the exporter has checked (and,
    /// when older, migrated) the schema; starts the exporter and the
    /// retention job on the current runtime.
    pub fn start(db: Db, metrics: Arc<Metrics>, retention: Retention) -> Arc<History> {
        let h = Arc::new(History {
            db,
            state: Mutex::default(),
            wake: Notify::new(),
            metrics,
            degraded: Mutex::new(Some("not connected yet".into())),
            retention,
        });
        h.metrics.history.up(false);
        tokio::spawn(export::run(h.clone()));
        tokio::spawn(retention::run(h.clone()));
        h
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// `Err(why)` while history is degraded (the database unreachable or
    /// its schema refused): for readiness details and the admin API.
    pub fn health(&self) -> Result<(), String> {
        match &*self.degraded.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    fn set_health(&self, why: Option<String>) {
        let mut d = self.degraded.lock().unwrap_or_else(|e| e.into_inner());
        match (&*d, &why) {
            (Some(_), None) => tracing::info!(db = %self.db.shown, "history database up"),
            (old, Some(w)) if old.as_ref() != Some(w) => tracing::warn!("history degraded: {w}"),
            _ => {}
        }
        self.metrics.history.up(why.is_none());
        *d = why;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the events of a status the API server now has (its outbox)
    /// that the database may lack; called after every status write and
    /// for each Workflow a restarted controller sees.
    pub fn record(&self, wf: &Workflow, status: &WorkflowStatus) {
        if status.outbox.is_empty() {
            return;
        }
        let uid = wf.uid().unwrap_or_default();
        let (ns, name) = (wf.namespace().unwrap_or_default(), wf.name_any());
        let mut guard = self.state();
        // Both maps at once, without copying the acknowledged set on
        // every status write.
        let st = &mut *guard;
        let acked = st.acked.get(&uid);
        for e in &status.outbox {
            let id = e.id();
            if acked.is_some_and(|a| a.contains(&id)) {
                continue;
            }
            let key = (uid.clone(), id);
            st.pending.entry(key).or_insert_with(|| Pending {
                ns: ns.clone(),
                name: name.clone(),
                outputs: outputs_of(status, e),
                event: e.clone(),
            });
        }
        self.metrics.history.pending(st.pending.len());
        drop(guard);
        self.wake.notify_one();
    }

    /// Drops from `status`'s outbox the events the database has. Only
    /// when the round recorded new events: the status is written then
    /// anyway, so dropping costs no write of its own.
    pub fn prune(&self, uid: &str, status: &mut WorkflowStatus, recorded: bool) {
        if !recorded {
            return;
        }
        let st = self.state();
        if let Some(acked) = st.acked.get(uid) {
            status.outbox.retain(|e| !acked.contains(&e.id()));
        }
    }

    /// Archives a finished Workflow once its events are in (idempotent).
    pub fn archive(&self, wf: &Workflow, status: &WorkflowStatus) {
        let uid = wf.uid().unwrap_or_default();
        let mut st = self.state();
        if st.archived.contains(&uid) {
            return;
        }
        let mut object = serde_json::to_value(wf).unwrap_or_default();
        object["status"] = serde_json::to_value(status).unwrap_or_default();
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        let a = Archive {
            ns: wf.namespace().unwrap_or_default(),
            name: wf.name_any(),
            object,
        };
        st.archives.insert(uid, a);
        drop(st);
        self.wake.notify_one();
    }

    /// How long TTL deletion of a finished Workflow must wait: `None` once
    /// the archive has it. Hands it to the exporter first (after a
    /// restart this is where a finished Workflow's events are found).
    pub fn holds(&self, wf: &Workflow, status: &WorkflowStatus) -> Option<Duration> {
        self.record(wf, status);
        self.archive(wf, status);
        let uid = wf.uid().unwrap_or_default();
        let archived = self.state().archived.contains(&uid);
        (!archived).then_some(Duration::from_secs(2))
    }

    /// Forgets what is kept for a deleted Workflow (events still waiting
    /// for the database stay until written).
    pub fn forget(&self, uid: &str) {
        let mut st = self.state();
        st.acked.remove(uid);
        st.archived.remove(uid);
    }

    /// Events waiting for the database.
    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }
}

/// The outputs a node event carries: a succeeded node's, inline or by
/// reference.
fn outputs_of(status: &WorkflowStatus, e: &HistoryEvent) -> Option<String> {
    if e.kind != EventKind::Node || e.phase != "Succeeded" {
        return None;
    }
    let node = status.nodes.get(&e.node)?;
    if let Some(r) = &node.outputs_ref {
        return serde_json::to_string(r).ok();
    }
    node.outputs
        .as_ref()
        .and_then(|o| serde_json::to_string(o).ok())
}

#[cfg(test)]
mod tests;
