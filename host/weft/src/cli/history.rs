//! The execution history's flags, the same for `weft controller`, `weft
//! dev` and `weft run`, and `weft db` (flyteadmin's `migrate run`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::history::{Db, History, Retention, db};
use crate::metrics::Metrics;

/// Where execution history goes and how long it stays.
#[derive(Debug, Args, Clone)]
pub struct HistoryArgs {
    /// The history database: postgres://USER:PASSWORD@HOST:PORT/DB, or
    /// sqlite:PATH. `weft dev` and `weft run` default to
    /// sqlite:<data dir>/history.db; `weft controller` keeps no history
    /// without it. An older schema is migrated at start; a newer one, or
    /// a database that does not answer, leaves history degraded (said in
    /// the log, `weft_history_up` and the admin API) while workflows run.
    #[arg(long, value_name = "URL", env = "WEFT_HISTORY_DB")]
    pub history_db: Option<String>,
    /// Archived executions are removed this long after they were archived
    /// (default: kept).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub archive_ttl: Option<Duration>,
    /// At most this many archived executions are kept, the oldest removed
    /// first (default: no limit).
    #[arg(long, value_name = "N")]
    pub archive_max_rows: Option<u64>,
}

impl HistoryArgs {
    /// The history: `--history-db`, else `sqlite:<local_default>/history.db`
    /// (`weft dev`, `weft run`), else none. A URL Weft cannot speak to is
    /// an error; a server that is down is not (history waits for it).
    pub fn open(
        &self,
        metrics: Arc<Metrics>,
        local_default: Option<&Path>,
    ) -> anyhow::Result<Option<Arc<History>>> {
        let url = match (&self.history_db, local_default) {
            (Some(url), _) => url.clone(),
            (None, Some(dir)) => {
                let file = std::path::absolute(dir.join("history.db"))?;
                format!("sqlite:{}", file.display())
            }
            (None, None) => return Ok(None),
        };
        let db = Db::open(&url)?;
        tracing::info!(db = %db.shown, "execution history on");
        let retention = Retention {
            ttl: self.archive_ttl,
            max_rows: self.archive_max_rows,
        };
        Ok(Some(History::start(db, metrics, retention)))
    }
}

/// `weft db`: the history database's schema.
#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Apply the migrations this weft has and the database lacks (each in
    /// a transaction: one that fails leaves the schema before it). Refuses
    /// a schema newer than this weft's.
    Migrate {
        /// The database (postgres://... or sqlite:PATH).
        #[arg(long, value_name = "URL", env = "WEFT_HISTORY_DB")]
        history_db: String,
        /// Stop at this version (default: this weft's newest).
        #[arg(long, value_name = "VERSION")]
        to: Option<i64>,
    },
    /// Print the database's schema version and this weft's.
    Version {
        /// The database (postgres://... or sqlite:PATH).
        #[arg(long, value_name = "URL", env = "WEFT_HISTORY_DB")]
        history_db: String,
    },
}

/// Runs `weft db ...`.
pub fn run(cmd: DbCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        match cmd {
            DbCommand::Migrate { history_db, to } => {
                let db = Db::open(&history_db)?;
                let applied = db.migrate(to).await?;
                let version = db.version().await?;
                if applied.is_empty() {
                    println!("{}: schema version {version}, nothing to apply", db.shown);
                } else {
                    let names: Vec<String> = applied.iter().map(|v| v.to_string()).collect();
                    println!(
                        "{}: applied {}; schema version {version}",
                        db.shown,
                        names.join(", ")
                    );
                }
            }
            DbCommand::Version { history_db } => {
                let db = Db::open(&history_db)?;
                let version = db.version().await?;
                println!("database {version}, weft {}", db::known_version());
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
