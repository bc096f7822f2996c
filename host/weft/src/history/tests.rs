//! The history over SQLite, in process: the schema's life (migrations,
//! a failed one, a newer one) and the exporter's idempotence. The same
//! code over a real PostgreSQL is `tests/history.rs`'s.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sqlx::Row;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use weft_dag::history::{EventKind, HistoryEvent};
use weft_dag::{WorkflowPhase, WorkflowStatus};

use super::db::{Db, DbError, MIGRATOR, Schema, known_version};
use super::{History, Retention};
use crate::api::Workflow;
use crate::metrics::Metrics;

fn sqlite(dir: &tempfile::TempDir) -> Db {
    Db::open(&format!("sqlite:{}/h/history.db", dir.path().display())).unwrap()
}

#[tokio::test]
async fn migrate_from_empty_then_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite(&dir);
    assert_eq!(db.check().await.unwrap(), Schema::Older(0));
    assert_eq!(db.migrate(None).await.unwrap(), vec![1, 2]);
    assert_eq!(db.version().await.unwrap(), known_version());
    assert!(db.migrate(None).await.unwrap().is_empty());
    assert_eq!(db.check().await.unwrap(), Schema::Current);
}

#[tokio::test]
async fn a_database_of_version_one_is_upgraded_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite(&dir);
    assert_eq!(db.migrate(Some(1)).await.unwrap(), vec![1]);
    sqlx::query(
        "INSERT INTO executions (uid, namespace, name, phase, created_at, started_at, \
         archived_at, labels, workflow) VALUES ('u1', 'ns', 'old', 'Failed', 1, 2, 3, '{}', '{}')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(db.migrate(None).await.unwrap(), vec![2]);
    let row = sqlx::query("SELECT name, size_bytes FROM executions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>("name"), "old");
    assert_eq!(row.get::<i64, _>("size_bytes"), 0);
}

#[tokio::test]
async fn a_failing_migration_leaves_the_schema_before_it_usable() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite(&dir);
    db.migrate(None).await.unwrap();
    let mut migrations: Vec<Migration> = MIGRATOR.iter().cloned().collect();
    migrations.push(Migration::new(
        3,
        Cow::Borrowed("broken"),
        MigrationType::Simple,
        sqlx::SqlStr::from_static(
            "ALTER TABLE executions ADD COLUMN extra TEXT; SELECT * FROM no_such_table;",
        ),
        false,
    ));
    let next = Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    };
    let err = next.run(&db.pool).await.unwrap_err();
    assert!(err.to_string().contains("no_such_table"), "{err}");
    assert_eq!(db.version().await.unwrap(), 2);
    // The half of migration 3 that ran was rolled back with it.
    let columns = sqlx::query("SELECT * FROM executions LIMIT 0")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert!(columns.is_empty());
    let extra = sqlx::query("SELECT extra FROM executions")
        .fetch_all(&db.pool)
        .await;
    assert!(extra.is_err(), "no column extra");
    sqlx::query("INSERT INTO execution_labels (uid, key, value) VALUES ('u', 'k', 'v')")
        .execute(&db.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_newer_schema_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite(&dir);
    db.migrate(None).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99, 'newer', true, x'00', 1)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let err = db.check().await.unwrap_err();
    assert!(matches!(
        err,
        DbError::Newer {
            found: 99,
            known: 2,
            ..
        }
    ));
    assert!(
        err.to_string().contains("newer than this weft's 2"),
        "{err}"
    );
    assert!(db.migrate(None).await.is_err());
}

#[tokio::test]
async fn passwords_are_hidden_and_unknown_schemes_refused() {
    let db = Db::open("postgres://weft:s3cret@127.0.0.1:1/weft").unwrap();
    assert_eq!(db.shown, "postgres://weft:***@127.0.0.1:1/weft");
    let err = Db::open("mysql://x@y/z").unwrap_err().to_string();
    assert!(err.contains("not a postgres:// or sqlite: URL"), "{err}");
}

fn workflow(uid: &str) -> Workflow {
    let mut wf = Workflow::new("wf", Default::default());
    wf.metadata.namespace = Some("ns".into());
    wf.metadata.uid = Some(uid.into());
    wf
}

fn event(node: &str, phase: &str) -> HistoryEvent {
    HistoryEvent {
        kind: EventKind::Node,
        node: node.into(),
        attempt: 1,
        phase: phase.into(),
        at: "2026-11-29T00:00:00Z".into(),
        reason: None,
        message: None,
        plugin: None,
        resource: None,
        log_links: Vec::new(),
    }
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let start = SystemTime::now();
    while !done().await {
        let waited = start.elapsed().unwrap_or_default();
        assert!(waited < Duration::from_secs(20), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_recorded_twice_are_one_row_then_pruned_and_archived() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::start(
        sqlite(&dir),
        Arc::new(Metrics::default()),
        Retention::default(),
    );
    let wf = workflow("u1");
    let mut status = WorkflowStatus {
        phase: WorkflowPhase::Running,
        outbox: vec![event("a", "Running"), event("a", "Succeeded")],
        ..Default::default()
    };
    h.record(&wf, &status);
    h.record(&wf, &status);
    until("written", async || h.pending() == 0).await;
    h.record(&wf, &status);
    assert_eq!(h.pending(), 0, "what the database has is not sent again");
    let count = |sql: &'static str| {
        let pool = h.db().pool.clone();
        async move {
            let row = sqlx::query(sql).fetch_one(&pool).await.unwrap();
            row.get::<i64, _>(0)
        }
    };
    assert_eq!(count("SELECT COUNT(*) FROM events").await, 2);

    // A later round's events: the acknowledged ones leave the outbox.
    status.outbox.push(event("b", "Running"));
    h.prune("u1", &mut status, true);
    assert_eq!(status.outbox, vec![event("b", "Running")]);

    status.phase = WorkflowPhase::Succeeded;
    assert!(h.holds(&wf, &status).is_some(), "not archived yet");
    until("archived", async || h.holds(&wf, &status).is_none()).await;
    assert_eq!(count("SELECT COUNT(*) FROM events").await, 3);
    assert_eq!(count("SELECT COUNT(*) FROM executions").await, 1);
    assert!(h.health().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_removes_what_is_past_its_ttl_and_over_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        ttl: Some(Duration::from_secs(3600)),
        max_rows: Some(2),
    };
    let h = History::start(sqlite(&dir), Arc::new(Metrics::default()), retention);
    until("up", async || h.health().is_ok()).await;
    let now = super::export::now_millis();
    for (uid, archived) in [
        ("old", now - 7_200_000),
        ("a", now - 3),
        ("b", now - 2),
        ("c", now - 1),
    ] {
        sqlx::query(
            "INSERT INTO executions (uid, namespace, name, phase, created_at, started_at, \
             archived_at, labels, workflow, size_bytes) VALUES ($1, 'ns', $2, 'Succeeded', 0, 0, $3, '{}', '{}', 10)",
        )
        .bind(uid)
        .bind(uid)
        .bind(archived)
        .execute(&h.db().pool)
        .await
        .unwrap();
        sqlx::query("INSERT INTO events (workflow_uid, kind, node, attempt, phase, namespace, workflow, occurred_at, recorded_at) VALUES ($1, 'workflow', '', 1, 'Running', 'ns', $2, 0, 0)")
            .bind(uid)
            .bind(uid)
            .execute(&h.db().pool)
            .await
            .unwrap();
    }
    let (rows, bytes, pruned) = super::retention::once(&h).await.unwrap();
    assert_eq!((rows, bytes, pruned), (2, 20, 2));
    let left = sqlx::query("SELECT uid FROM executions ORDER BY uid")
        .fetch_all(&h.db().pool)
        .await
        .unwrap();
    let left: Vec<String> = left.iter().map(|r| r.get("uid")).collect();
    assert_eq!(left, ["b", "c"]);
    let events = sqlx::query("SELECT COUNT(*) FROM events")
        .fetch_one(&h.db().pool)
        .await
        .unwrap();
    assert_eq!(events.get::<i64, _>(0), 2, "their events went with them");
}
