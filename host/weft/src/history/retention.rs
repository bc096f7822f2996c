//! Retention: the background job that keeps the archive bounded
//! (`--archive-ttl`, `--archive-max-rows`), then counts what is left for
//! `weft_history_archive_rows` and `_bytes`. An execution goes with its
//! labels and events. With several controllers on one database each runs
//! it; the deletes are idempotent.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;

use super::History;
use super::export::{now_millis, placeholders};

/// At most this many executions removed per statement.
const CHUNK: i64 = 500;

/// How often the job runs: a quarter of the TTL, between 1 s and a minute.
fn interval(h: &History) -> Duration {
    let quarter = h.retention.ttl.map_or(Duration::from_secs(60), |t| t / 4);
    quarter.clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// The job, for the life of the process.
pub(super) async fn run(h: Arc<History>) {
    loop {
        tokio::time::sleep(interval(&h)).await;
        if h.health().is_err() {
            continue;
        }
        match once(&h).await {
            Ok((rows, bytes, pruned)) => h.metrics.history.archive_size(rows, bytes, pruned),
            Err(e) => tracing::warn!("history retention: {e}"),
        }
    }
}

/// Removes what is past its TTL or over the budget; returns the rows and
/// bytes left and how many were removed.
pub(super) async fn once(h: &History) -> Result<(i64, i64, u64), sqlx::Error> {
    let mut pruned = 0;
    if let Some(ttl) = h.retention.ttl {
        let before = now_millis() - ttl.as_millis() as i64;
        loop {
            let uids = select(
                h,
                "SELECT uid FROM executions WHERE archived_at < $1 ORDER BY archived_at, uid LIMIT $2",
                before,
                CHUNK,
            )
            .await?;
            pruned += remove(h, &uids).await?;
            if (uids.len() as i64) < CHUNK {
                break;
            }
        }
    }
    if let Some(max) = h.retention.max_rows {
        loop {
            let uids = select(
                h,
                "SELECT uid FROM executions ORDER BY archived_at DESC, uid DESC LIMIT $1 OFFSET $2",
                CHUNK,
                max as i64,
            )
            .await?;
            pruned += remove(h, &uids).await?;
            if uids.is_empty() {
                break;
            }
        }
    }
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) AS b FROM executions",
    )
    .fetch_one(&h.db.pool)
    .await?;
    Ok((row.try_get("n")?, row.try_get("b")?, pruned))
}

/// The uids `sql` selects, its two parameters bound in order (SQLite
/// numbers `$n` by first appearance, so they appear in order too).
async fn select(
    h: &History,
    sql: &'static str,
    a: i64,
    b: i64,
) -> Result<Vec<String>, sqlx::Error> {
    let rows = sqlx::query(sql)
        .bind(a)
        .bind(b)
        .fetch_all(&h.db.pool)
        .await?;
    rows.iter().map(|r| r.try_get::<String, _>("uid")).collect()
}

/// Removes these executions, their labels and their events, in one
/// transaction.
pub(super) async fn remove(h: &History, uids: &[String]) -> Result<u64, sqlx::Error> {
    if uids.is_empty() {
        return Ok(0);
    }
    let list = placeholders(1, uids.len());
    let mut tx = h.db.pool.begin().await?;
    for (table, column) in [
        ("events", "workflow_uid"),
        ("execution_labels", "uid"),
        ("executions", "uid"),
    ] {
        let sql = format!("DELETE FROM {table} WHERE {column} IN {list}");
        // Built from constants and placeholders only.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for u in uids {
            q = q.bind(u.clone());
        }
        q.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(uids.len() as u64)
}
