//! The execution history's figures (issue 43): events written, retried
//! and waiting in the outbox, the archive's size, query latency, and
//! whether the database answers at all (`weft_history_up`), so that a
//! degraded history shows on a dashboard and not only in a log line.

use std::time::Duration;

use prometheus_client::metrics::{
    counter::Counter,
    family::Family,
    gauge::Gauge,
    histogram::{Histogram, exponential_buckets},
};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn query_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

/// The history's metric families (registered under `weft_history_`).
pub struct HistoryMetrics {
    written: Counter,
    retried: Counter,
    pending: Gauge,
    archived: Counter,
    archive_rows: Gauge,
    archive_bytes: Gauge,
    pruned: Counter,
    up: Gauge,
    queries: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for HistoryMetrics {
    /// A fresh set (the query histogram needs its buckets).
    fn default() -> HistoryMetrics {
        HistoryMetrics {
            written: Counter::default(),
            retried: Counter::default(),
            pending: Gauge::default(),
            archived: Counter::default(),
            archive_rows: Gauge::default(),
            archive_bytes: Gauge::default(),
            pruned: Counter::default(),
            up: Gauge::default(),
            queries: Family::new_with_constructor(query_buckets),
        }
    }
}

impl HistoryMetrics {
    /// Registers every family on Weft's (prefixed) registry.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "history_events_written",
            "History events the database has (each once, however often delivered)",
            self.written.clone(),
        );
        r.register(
            "history_events_retried",
            "History events whose write failed and waits for another try",
            self.retried.clone(),
        );
        r.register(
            "history_outbox_pending",
            "History events recorded in Workflows' status outboxes, not yet in the database",
            self.pending.clone(),
        );
        r.register(
            "history_executions_archived",
            "Finished Workflows written to the archive",
            self.archived.clone(),
        );
        r.register(
            "history_archive_rows",
            "Executions in the archive (at the retention job's last count)",
            self.archive_rows.clone(),
        );
        r.register(
            "history_archive_bytes",
            "Bytes of archived Workflow objects (at the retention job's last count)",
            self.archive_bytes.clone(),
        );
        r.register(
            "history_executions_pruned",
            "Archived executions removed by retention (--archive-ttl, --archive-max-rows)",
            self.pruned.clone(),
        );
        r.register(
            "history_up",
            "1 when the history database answers and its schema is current; 0: history is degraded",
            self.up.clone(),
        );
        r.register(
            "history_query_duration_seconds",
            "History queries' latency, by query",
            self.queries.clone(),
        );
    }

    /// `n` events written.
    pub fn written(&self, n: usize) {
        self.written.inc_by(n as u64);
    }

    /// `n` events to try again.
    pub fn retried(&self, n: usize) {
        self.retried.inc_by(n as u64);
    }

    /// Events waiting now.
    pub fn pending(&self, n: usize) {
        self.pending.set(n as i64);
    }

    /// One execution archived.
    pub fn archived(&self) {
        self.archived.inc();
    }

    /// The archive's size after the retention job ran.
    pub fn archive_size(&self, rows: i64, bytes: i64, pruned: u64) {
        self.archive_rows.set(rows);
        self.archive_bytes.set(bytes);
        self.pruned.inc_by(pruned);
    }

    /// Whether the database is usable.
    pub fn up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// One query of kind `query` took `took`.
    pub fn query(&self, query: &str, took: Duration) {
        let labels = vec![("query".to_string(), query.to_string())];
        self.queries
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}
