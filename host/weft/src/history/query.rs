//! Queries over the archive: ListExecutions' filters, sorted by start
//! time (newest first) with a cursor, and one archived execution by uid
//! or by name. Every filter is a parameter; the SQL text is built only
//! from constants, so a filter value can never be SQL.

use std::time::Instant;

use sqlx::Row;
use sqlx::any::AnyArguments;
use sqlx::{Arguments, AssertSqlSafe};

use super::{DbError, History};

/// Milliseconds since the epoch of a status time (RFC 3339).
pub fn started_millis(at: Option<&str>) -> Option<i64> {
    super::export::millis(at)
}

/// Milliseconds since the epoch as RFC 3339 with milliseconds.
pub fn rfc3339_millis(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// One label requirement of a Kubernetes label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelTerm {
    /// `key=value` (or `key==value`).
    Equals(String, String),
    /// `key!=value`: the label is absent or different.
    NotEquals(String, String),
    /// `key`: the label is there.
    Exists(String),
    /// `!key`: it is not.
    Absent(String),
}

/// Parses `team=ml,env!=dev,tier,!legacy` (equality-based selectors;
/// set-based ones are refused, naming the term).
pub fn parse_selector(selector: &str) -> Result<Vec<LabelTerm>, String> {
    let mut terms = Vec::new();
    for raw in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let term = if let Some((k, v)) = raw.split_once("!=") {
            LabelTerm::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = raw.split_once("==").or_else(|| raw.split_once('=')) {
            LabelTerm::Equals(k.trim().into(), v.trim().into())
        } else if let Some(k) = raw.strip_prefix('!') {
            LabelTerm::Absent(k.trim().into())
        } else if raw.contains(' ') || raw.contains('(') {
            return Err(format!(
                "label selector term {raw:?}: only key=value, key!=value, key and !key are supported"
            ));
        } else {
            LabelTerm::Exists(raw.into())
        };
        terms.push(term);
    }
    Ok(terms)
}

/// What ListExecutions asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// One phase (`Succeeded`, ...).
    pub phase: Option<String>,
    /// Label requirements, all of them.
    pub labels: Vec<LabelTerm>,
    /// The WorkflowTemplate (`namespace/name`) it was launched from.
    pub template: Option<String>,
    /// Names starting with this.
    pub name_prefix: Option<String>,
    /// Started at or after (ms since the epoch).
    pub started_after: Option<i64>,
    /// Started before (ms since the epoch).
    pub started_before: Option<i64>,
}

/// Where a page starts: after this (start, uid), newest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    /// Its start (ms since the epoch).
    pub started: i64,
    /// Its uid (the tie-break).
    pub uid: String,
}

impl Cursor {
    /// The page token form: `<started>.<uid>`.
    pub fn token(&self) -> String {
        format!("{}.{}", self.started, self.uid)
    }

    /// A page token read back; `None` when it is not one.
    pub fn parse(token: &str) -> Option<Cursor> {
        let (started, uid) = token.split_once('.')?;
        Some(Cursor {
            started: started.parse().ok()?,
            uid: uid.to_string(),
        })
    }
}

/// An archived execution as a page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Archived {
    /// Its position in the sort order.
    pub key: Cursor,
    /// The archived Workflow object.
    pub object: serde_json::Value,
}

/// SQL text and its parameters, built together so that each `$n` is the
/// parameter bound n-th (SQLite numbers them by first appearance).
struct Query {
    sql: String,
    args: AnyArguments,
    n: usize,
}

impl Query {
    fn new(select: &str) -> Query {
        Query {
            sql: select.to_string(),
            args: AnyArguments::default(),
            n: 0,
        }
    }

    /// Appends ` AND <sql>` where each `?` is the next parameter.
    fn and(&mut self, sql: &str, values: Vec<Value>) {
        let mut out = String::from(" AND ");
        let mut values = values.into_iter();
        for ch in sql.chars() {
            if ch == '?' {
                self.n += 1;
                out.push_str(&format!("${}", self.n));
                match values.next() {
                    Some(Value::Text(t)) => self.args.add(t).expect("a text parameter"),
                    Some(Value::Int(i)) => self.args.add(i).expect("an integer parameter"),
                    None => unreachable!("a value for every ?"),
                }
            } else {
                out.push(ch);
            }
        }
        self.sql.push_str(&out);
    }
}

enum Value {
    Text(String),
    Int(i64),
}

/// `prefix%` for LIKE, with LIKE's own characters escaped (`\`).
fn like_prefix(prefix: &str) -> String {
    let mut out = String::new();
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

fn filtered(f: &Filter, after: Option<&Cursor>, limit: i64) -> Query {
    let mut q = Query::new("SELECT uid, started_at, workflow FROM executions WHERE 1 = 1");
    let text = |s: &String| Value::Text(s.clone());
    if let Some(ns) = &f.namespace {
        q.and("namespace = ?", vec![text(ns)]);
    }
    if let Some(p) = &f.phase {
        q.and("phase = ?", vec![text(p)]);
    }
    if let Some(t) = &f.template {
        q.and("template = ?", vec![text(t)]);
    }
    if let Some(p) = &f.name_prefix {
        q.and("name LIKE ? ESCAPE '\\'", vec![Value::Text(like_prefix(p))]);
    }
    if let Some(t) = f.started_after {
        q.and("started_at >= ?", vec![Value::Int(t)]);
    }
    if let Some(t) = f.started_before {
        q.and("started_at < ?", vec![Value::Int(t)]);
    }
    for term in &f.labels {
        let (sql, values) = match term {
            LabelTerm::Equals(k, v) => (
                "uid IN (SELECT uid FROM execution_labels WHERE key = ? AND value = ?)",
                vec![text(k), text(v)],
            ),
            LabelTerm::NotEquals(k, v) => (
                "uid NOT IN (SELECT uid FROM execution_labels WHERE key = ? AND value = ?)",
                vec![text(k), text(v)],
            ),
            LabelTerm::Exists(k) => (
                "uid IN (SELECT uid FROM execution_labels WHERE key = ?)",
                vec![text(k)],
            ),
            LabelTerm::Absent(k) => (
                "uid NOT IN (SELECT uid FROM execution_labels WHERE key = ?)",
                vec![text(k)],
            ),
        };
        q.and(sql, values);
    }
    if let Some(c) = after {
        // A row value, so the (started_at, uid) indexes seek to the cursor
        // (an OR of the two halves made PostgreSQL scan up to it: 180 ms
        // for a deep page of 1,000,000 rows).
        q.and(
            "(started_at, uid) < (?, ?)",
            vec![Value::Int(c.started), text(&c.uid)],
        );
    }
    q.sql.push_str(" ORDER BY started_at DESC, uid DESC");
    q.n += 1;
    q.sql.push_str(&format!(" LIMIT ${}", q.n));
    q.args.add(limit).expect("an integer parameter");
    q
}

impl History {
    /// Up to `limit` archived executions matching `filter`, newest start
    /// first, after `after`. An error when the database does not answer:
    /// never a partial list.
    pub async fn list(
        &self,
        filter: &Filter,
        after: Option<&Cursor>,
        limit: i64,
    ) -> Result<Vec<Archived>, DbError> {
        self.usable()?;
        let started = Instant::now();
        let q = filtered(filter, after, limit);
        let rows = sqlx::query_with(AssertSqlSafe(q.sql), q.args)
            .fetch_all(&self.db.pool)
            .await
            .map_err(|e| self.db.query_error(e))?;
        self.metrics.history.query("list", started.elapsed());
        rows.iter()
            .map(archived_row)
            .collect::<Result<_, sqlx::Error>>()
            .map_err(|e| self.db.query_error(e))
    }

    /// The archived execution `uid`, or the newest archived one named
    /// `namespace/name`.
    pub async fn get(
        &self,
        uid: Option<&str>,
        ns: &str,
        name: &str,
    ) -> Result<Option<Archived>, DbError> {
        self.usable()?;
        let started = Instant::now();
        let mut q = Query::new("SELECT uid, started_at, workflow FROM executions WHERE 1 = 1");
        match uid {
            Some(u) => q.and("uid = ?", vec![Value::Text(u.into())]),
            None => q.and(
                "namespace = ? AND name = ?",
                vec![Value::Text(ns.into()), Value::Text(name.into())],
            ),
        }
        q.sql.push_str(" ORDER BY archived_at DESC LIMIT 1");
        let row = sqlx::query_with(AssertSqlSafe(q.sql), q.args)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(|e| self.db.query_error(e))?;
        self.metrics.history.query("get", started.elapsed());
        row.as_ref()
            .map(archived_row)
            .transpose()
            .map_err(|e| self.db.query_error(e))
    }

    /// Removes an archived execution with its labels and events; whether
    /// there was one.
    pub async fn delete(&self, uid: &str) -> Result<bool, DbError> {
        self.usable()?;
        let removed = super::retention::remove(self, &[uid.to_string()])
            .await
            .map_err(|e| self.db.query_error(e))?;
        Ok(removed > 0)
    }

    /// The events of execution `uid`, in the order they happened.
    pub async fn events(&self, uid: &str) -> Result<Vec<EventRow>, DbError> {
        self.usable()?;
        let rows = sqlx::query(
            "SELECT kind, node, attempt, phase, occurred_at, reason, message, plugin, \
             plugin_digest, resource FROM events WHERE workflow_uid = $1 \
             ORDER BY occurred_at, kind, node, attempt",
        )
        .bind(uid.to_string())
        .fetch_all(&self.db.pool)
        .await
        .map_err(|e| self.db.query_error(e))?;
        let read = |r: &sqlx::any::AnyRow| -> Result<EventRow, sqlx::Error> {
            Ok(EventRow {
                kind: r.try_get("kind")?,
                node: r.try_get("node")?,
                attempt: r
                    .try_get::<i32, _>("attempt")
                    .map(i64::from)
                    .or_else(|_| r.try_get("attempt"))?,
                phase: r.try_get("phase")?,
                occurred_at: r.try_get("occurred_at")?,
                reason: r.try_get("reason")?,
                message: r.try_get("message")?,
                plugin: r.try_get("plugin")?,
                plugin_digest: r.try_get("plugin_digest")?,
                resource: r.try_get("resource")?,
            })
        };
        rows.iter()
            .map(read)
            .collect::<Result<_, _>>()
            .map_err(|e| self.db.query_error(e))
    }

    /// `Err` with why, while history is degraded.
    fn usable(&self) -> Result<(), DbError> {
        self.health().map_err(DbError::Unavailable)
    }
}

/// A row of `SELECT uid, started_at, workflow FROM executions`.
fn archived_row(r: &sqlx::any::AnyRow) -> Result<Archived, sqlx::Error> {
    let object: String = r.try_get("workflow")?;
    Ok(Archived {
        key: Cursor {
            started: r.try_get("started_at")?,
            uid: r.try_get("uid")?,
        },
        object: serde_json::from_str(&object).unwrap_or_default(),
    })
}

/// One event as GetExecution shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// workflow, node or task.
    pub kind: String,
    /// The node ('' for the workflow).
    pub node: String,
    /// The attempt (a workflow's run).
    pub attempt: i64,
    /// The phase it entered.
    pub phase: String,
    /// When (ms since the epoch).
    pub occurred_at: i64,
    /// Why, for machines.
    pub reason: Option<String>,
    /// Why, for people.
    pub message: Option<String>,
    /// The plugin that served the attempt.
    pub plugin: Option<String>,
    /// Its digest.
    pub plugin_digest: Option<String>,
    /// The child it ran as.
    pub resource: Option<String>,
}

#[cfg(test)]
mod tests;
