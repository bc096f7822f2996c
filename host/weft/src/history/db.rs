//! The history database: one pool over sqlx's Any driver, so PostgreSQL
//! (clusters) and SQLite (`weft dev`, `weft run`) share one set of
//! migrations (`host/weft/migrations`) and one set of queries.
//!
//! The schema is checked before anything is written: one newer than this
//! binary (migrated by a newer Weft) is refused with a message that says
//! so, since writing rows a newer schema does not expect could lose data.
//! Each migration runs in a transaction (PostgreSQL and SQLite both
//! have transactional DDL), so one that fails leaves the previous schema
//! as it was, usable.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migrate, Migrator};

/// The schema this binary knows, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// sqlx's bookkeeping table (its default name).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// Which server a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `postgres://` or `postgresql://`.
    Postgres,
    /// `sqlite:` (a file; created when missing).
    Sqlite,
}

/// What went wrong with the database, in words a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL names no server Weft speaks to.
    #[error("--history-db {0:?}: not a postgres:// or sqlite: URL")]
    Url(String),
    /// The server did not answer or refused.
    #[error("the history database {url} is unreachable: {source}")]
    Unreachable {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        source: sqlx::Error,
    },
    /// The schema is newer than this binary.
    #[error(
        "the history database {url} has schema version {found}, newer than this weft's {known}: \
         a newer Weft migrated it; run that version, or point --history-db at another database"
    )]
    Newer {
        /// The URL, its password hidden.
        url: String,
        /// The newest version applied.
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// The schema is older than this binary and nobody migrated it.
    #[error(
        "the history database {url} has schema version {found}, older than this weft's {known}: \
         run `weft db migrate --history-db ...`"
    )]
    Older {
        /// The URL, its password hidden.
        url: String,
        /// The newest version applied (0: none).
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// A migration failed (the schema stays at the version before it).
    #[error("migrating the history database {url}: {source}")]
    Migrate {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        source: sqlx::migrate::MigrateError,
    },
    /// History is degraded (the database down, its schema refused).
    #[error("execution history is unavailable: {0}")]
    Unavailable(String),
    /// A query failed.
    #[error("the history database {url}: {source}")]
    Query {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        source: sqlx::Error,
    },
}

/// The pool and what it is connected to.
#[derive(Clone, Debug)]
pub struct Db {
    /// The connections (opened lazily: a database that is down at start
    /// delays history, never the controller).
    pub pool: AnyPool,
    /// Which server.
    pub backend: Backend,
    /// The URL with its password hidden, for messages.
    pub shown: String,
}

impl Db {
    /// A lazy pool for `url`; nothing is connected yet. A SQLite file and
    /// its directory are created on first use.
    pub fn open(url: &str) -> Result<Db, DbError> {
        sqlx::any::install_default_drivers();
        let backend = backend_of(url).ok_or_else(|| DbError::Url(redact(url)))?;
        let url = match backend {
            Backend::Sqlite => sqlite_url(url),
            Backend::Postgres => url.to_string(),
        };
        let shown = redact(&url);
        // SQLite takes one writer at a time: one connection, no
        // "database is locked" between two of ours.
        let max = if backend == Backend::Sqlite { 1 } else { 8 };
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy(&url)
            .map_err(|source| DbError::Unreachable {
                url: shown.clone(),
                source,
            })?;
        Ok(Db {
            pool,
            backend,
            shown,
        })
    }

    /// The newest schema version applied (0: an empty database).
    pub async fn version(&self) -> Result<i64, DbError> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.unreachable(e))?;
        let migrate = |source| DbError::Migrate {
            url: self.shown.clone(),
            source,
        };
        conn.ensure_migrations_table(MIGRATIONS_TABLE)
            .await
            .map_err(migrate)?;
        let applied = conn
            .list_applied_migrations(MIGRATIONS_TABLE)
            .await
            .map_err(migrate)?;
        Ok(applied.iter().map(|m| m.version).max().unwrap_or(0))
    }

    /// Refuses a schema newer than this binary's; says whether it is older.
    pub async fn check(&self) -> Result<Schema, DbError> {
        let (found, known) = (self.version().await?, known_version());
        if found > known {
            return Err(DbError::Newer {
                url: self.shown.clone(),
                found,
                known,
            });
        }
        Ok(if found < known {
            Schema::Older(found)
        } else {
            Schema::Current
        })
    }

    /// Applies the migrations this binary has and the database lacks (all
    /// of them, or up to `to`); returns the versions applied. Refuses a
    /// newer schema first.
    pub async fn migrate(&self, to: Option<i64>) -> Result<Vec<i64>, DbError> {
        let before = match self.check().await? {
            Schema::Current if to.is_none() => return Ok(Vec::new()),
            Schema::Current => known_version(),
            Schema::Older(v) => v,
        };
        let target = to.unwrap_or_else(known_version);
        let result = MIGRATOR.run_to(target, &self.pool).await;
        result.map_err(|source| DbError::Migrate {
            url: self.shown.clone(),
            source,
        })?;
        Ok(MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| *v > before && *v <= target)
            .collect())
    }

    /// Checks the schema and, when it is older, migrates it (what `weft
    /// controller` does at start, as Argo's controller does).
    pub async fn ready(&self) -> Result<(), DbError> {
        if let Schema::Older(_) = self.check().await? {
            self.migrate(None).await?;
        }
        Ok(())
    }

    /// A query's error, naming the database.
    pub fn query_error(&self, source: sqlx::Error) -> DbError {
        DbError::Query {
            url: self.shown.clone(),
            source,
        }
    }

    fn unreachable(&self, source: sqlx::Error) -> DbError {
        DbError::Unreachable {
            url: self.shown.clone(),
            source,
        }
    }
}

/// How the database's schema compares with this binary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// The same version.
    Current,
    /// Older (the version found; 0: empty).
    Older(i64),
}

/// The newest version this binary's migrations reach.
pub fn known_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

fn backend_of(url: &str) -> Option<Backend> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Some(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Some(Backend::Sqlite)
    } else {
        None
    }
}

/// A SQLite URL that creates its file (`mode=rwc`) and its directory.
fn sqlite_url(url: &str) -> String {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let file = path.split('?').next().unwrap_or_default();
    if let Some(dir) = std::path::Path::new(file).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if path.contains("mode=") || file == ":memory:" {
        format!("sqlite://{path}")
    } else if path.contains('?') {
        format!("sqlite://{path}&mode=rwc")
    } else {
        format!("sqlite://{path}?mode=rwc")
    }
}

/// The URL with its password replaced by `***`.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}
