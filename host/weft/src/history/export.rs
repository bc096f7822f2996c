//! The exporter: copies pending events to the database in batches, then
//! archives finished Workflows whose events are all in. Idempotent
//! throughout (`ON CONFLICT`), so a batch written twice (a crash, a
//! timeout after the commit) is one set of rows. A failed batch stays
//! pending and is tried again with back-off; nothing in the controller
//! waits for it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::any::AnyArguments;
use sqlx::{Any, Arguments, Transaction};
use weft_dag::history::{EventId, HistoryEvent};

use super::{Archive, History, Pending};

/// At most this many events per transaction (16 values each, far below
/// both servers' limits on parameters).
const BATCH: usize = 1000;

/// How long the exporter lets events gather after the first wakes it,
/// unless a whole batch is there sooner: a transaction per status write
/// cost the controller a quarter of its throughput on a shared 2-core
/// machine (docs/benchmarks.md); events wait at most this much longer.
const LINGER: Duration = Duration::from_millis(100);

/// The exporter's loop, for the life of the process.
pub(super) async fn run(h: Arc<History>) {
    let mut backoff = Duration::from_millis(250);
    loop {
        if h.health().is_err() {
            match h.db.ready().await {
                Ok(()) => h.set_health(None),
                Err(e) => {
                    h.set_health(Some(e.to_string()));
                    sleep_or_wake(&h, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        if h.pending() < BATCH {
            tokio::time::sleep(LINGER).await;
        }
        let (batch, archives) = take(&h);
        if batch.is_empty() && archives.is_empty() {
            sleep_or_wake(&h, Duration::from_secs(1)).await;
            continue;
        }
        match write(&h, &batch, &archives).await {
            Ok(inserted) => {
                h.metrics.history.written(inserted);
                acknowledge(&h, batch, archives);
                backoff = Duration::from_millis(250);
            }
            Err(e) => {
                h.metrics.history.retried(batch.len());
                h.set_health(Some(e.to_string()));
                sleep_or_wake(&h, backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn sleep_or_wake(h: &History, d: Duration) {
    let _ = tokio::time::timeout(d, h.wake.notified()).await;
}

type Batch = Vec<((String, EventId), Pending)>;

/// Up to [`BATCH`] pending events (left pending until written), and the
/// archives whose Workflow has no event pending.
fn take(h: &History) -> (Batch, Vec<(String, Archive)>) {
    let st = h.state();
    let batch: Batch = st
        .pending
        .iter()
        .take(BATCH)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let waiting: std::collections::HashSet<&String> = st.pending.keys().map(|(u, _)| u).collect();
    let archives = st
        .archives
        .iter()
        .filter(|(uid, _)| !waiting.contains(uid))
        .map(|(uid, a)| (uid.clone(), a.clone()))
        .collect();
    (batch, archives)
}

fn acknowledge(h: &History, batch: Batch, archives: Vec<(String, Archive)>) {
    let mut st = h.state();
    for (key, _) in batch {
        st.pending.remove(&key);
        let (uid, id) = key;
        st.acked.entry(uid).or_default().insert(id);
    }
    for (uid, _) in archives {
        st.archives.remove(&uid);
        st.archived.insert(uid);
        h.metrics.history.archived();
    }
    h.metrics.history.pending(st.pending.len());
}

/// One transaction: the events, then the archives. Returns how many
/// event rows were new.
async fn write(
    h: &History,
    batch: &Batch,
    archives: &[(String, Archive)],
) -> Result<usize, super::DbError> {
    let err = |e| h.db.query_error(e);
    let mut tx = h.db.pool.begin().await.map_err(err)?;
    let mut inserted = 0;
    if !batch.is_empty() {
        inserted = insert_events(&mut tx, batch).await.map_err(err)?;
    }
    for (uid, a) in archives {
        upsert_archive(&mut tx, uid, a).await.map_err(err)?;
    }
    tx.commit().await.map_err(err)?;
    Ok(inserted)
}

/// Milliseconds since the epoch of an RFC 3339 time (0 when unreadable).
pub(super) fn millis(at: Option<&str>) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(at?).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_millis() as i64)
}

pub(super) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `($1, ..., $n), ($n+1, ...)`: `rows` groups of `cols` placeholders.
pub(super) fn placeholders(rows: usize, cols: usize) -> String {
    let group = |r: usize| {
        let ps: Vec<String> = (1..=cols).map(|c| format!("${}", r * cols + c)).collect();
        format!("({})", ps.join(", "))
    };
    (0..rows).map(group).collect::<Vec<_>>().join(", ")
}

const EVENT_COLUMNS: &str = "workflow_uid, kind, node, attempt, phase, namespace, workflow, \
     occurred_at, recorded_at, reason, message, plugin, plugin_digest, resource, outputs, log_links";

async fn insert_events(tx: &mut Transaction<'_, Any>, batch: &Batch) -> Result<usize, sqlx::Error> {
    let sql = format!(
        "INSERT INTO events ({EVENT_COLUMNS}) VALUES {} ON CONFLICT DO NOTHING",
        placeholders(batch.len(), 16)
    );
    let mut args = AnyArguments::default();
    let recorded = now_millis();
    for ((uid, _), p) in batch {
        bind_event(&mut args, uid, p, recorded).map_err(sqlx::Error::Encode)?;
    }
    // Built from constants and placeholders only.
    let sql = sqlx::AssertSqlSafe(sql);
    let done = sqlx::query_with(sql, args).execute(&mut **tx).await?;
    Ok(done.rows_affected() as usize)
}

type BindResult = Result<(), sqlx::error::BoxDynError>;

fn bind_event(args: &mut AnyArguments, uid: &str, p: &Pending, recorded: i64) -> BindResult {
    let e: &HistoryEvent = &p.event;
    let resource = e
        .resource
        .as_ref()
        .map(|r| format!("{}/{}/{}", r.api_version, r.kind, r.name));
    let links = (!e.log_links.is_empty())
        .then(|| serde_json::to_string(&e.log_links).ok())
        .flatten();
    args.add(uid.to_string())?;
    args.add(e.kind.as_str().to_string())?;
    args.add(e.node.clone())?;
    args.add(i64::from(e.attempt))?;
    args.add(e.phase.clone())?;
    args.add(p.ns.clone())?;
    args.add(p.name.clone())?;
    args.add(millis(Some(&e.at)).unwrap_or(recorded))?;
    args.add(recorded)?;
    args.add(e.reason.clone())?;
    args.add(e.message.clone())?;
    args.add(e.plugin.as_ref().map(|p| p.name.clone()))?;
    args.add(e.plugin.as_ref().map(|p| p.digest.clone()))?;
    args.add(resource)?;
    args.add(p.outputs.clone())?;
    args.add(links)
}

/// The columns ListExecutions reads, from the archived object.
struct Row {
    phase: String,
    template: Option<String>,
    created: i64,
    started: i64,
    finished: Option<i64>,
    message: Option<String>,
    labels: BTreeMap<String, String>,
    object: String,
}

fn row(a: &Archive) -> Row {
    let o = &a.object;
    let (meta, status) = (&o["metadata"], &o["status"]);
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let created = millis(meta["creationTimestamp"].as_str()).unwrap_or_else(now_millis);
    let labels = meta["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    Row {
        phase: text(&status["phase"]).unwrap_or_else(|| "Pending".into()),
        template: text(&status["template"]["name"]).map(|t| format!("{}/{t}", a.ns)),
        created,
        started: millis(status["startedAt"].as_str()).unwrap_or(created),
        finished: millis(status["finishedAt"].as_str()),
        message: text(&status["message"]),
        labels,
        object: o.to_string(),
    }
}

async fn upsert_archive(
    tx: &mut Transaction<'_, Any>,
    uid: &str,
    a: &Archive,
) -> Result<(), sqlx::Error> {
    let r = row(a);
    let labels = serde_json::to_string(&r.labels).unwrap_or_else(|_| "{}".into());
    sqlx::query(
        "INSERT INTO executions (uid, namespace, name, phase, template, created_at, started_at, \
         finished_at, archived_at, message, labels, workflow, size_bytes) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (uid) DO UPDATE SET phase = excluded.phase, template = excluded.template, \
         started_at = excluded.started_at, finished_at = excluded.finished_at, \
         archived_at = excluded.archived_at, message = excluded.message, \
         labels = excluded.labels, workflow = excluded.workflow, size_bytes = excluded.size_bytes",
    )
    .bind(uid.to_string())
    .bind(a.ns.clone())
    .bind(a.name.clone())
    .bind(r.phase)
    .bind(r.template)
    .bind(r.created)
    .bind(r.started)
    .bind(r.finished)
    .bind(now_millis())
    .bind(r.message)
    .bind(labels)
    .bind(r.object.clone())
    .bind(r.object.len() as i64)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM execution_labels WHERE uid = $1")
        .bind(uid.to_string())
        .execute(&mut **tx)
        .await?;
    for (k, v) in r.labels {
        sqlx::query("INSERT INTO execution_labels (uid, key, value) VALUES ($1, $2, $3)")
            .bind(uid.to_string())
            .bind(k)
            .bind(v)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}
