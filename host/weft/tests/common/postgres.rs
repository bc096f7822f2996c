//! A real PostgreSQL for a test file: Debian's server
//! (`tests/support/postgres.sh`), one cluster per test process on a free
//! loopback port, stopped by its watcher when the process ends. Tests
//! get a database each ([`database`]), so they run side by side.

use std::process::Command;
use std::sync::OnceLock;

/// A cluster: its directory and the URL of its `weft` database.
pub struct Postgres {
    pub dir: std::path::PathBuf,
    pub url: String,
}

static SERVER: OnceLock<Postgres> = OnceLock::new();

fn script(action: &str, dir: &std::path::Path) -> std::process::Output {
    Command::new("bash")
        .arg(super::root().join("tests/support/postgres.sh"))
        .arg(action)
        .arg(dir)
        .env("WEFT_PG_WATCH_PID", std::process::id().to_string())
        .env("WEFT_PG_REMOVE", "1")
        .output()
        .unwrap()
}

impl Postgres {
    /// A cluster of its own (a test that stops its server must not stop
    /// the one the file's other tests share).
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().unwrap().keep();
        let out = script("start", &dir);
        assert!(
            out.status.success(),
            "postgres.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Postgres { dir, url }
    }

    /// Stops the server (fast shutdown): clients see it go away.
    pub fn stop(&self) {
        let out = script("stop", &self.dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts it again, on the same port with the same data.
    pub fn restart(&self) {
        let out = script("start", &self.dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A fresh database `name` on this server; its URL.
    pub async fn database(&self, name: &str) -> String {
        let pool = pool(&self.url).await;
        let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&pool)
            .await
            .unwrap();
        let create = format!("CREATE DATABASE \"{name}\"");
        sqlx::query(sqlx::AssertSqlSafe(create))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let (prefix, _) = self.url.rsplit_once('/').unwrap();
        format!("{prefix}/{name}")
    }
}

/// The file's shared server, started on first use.
pub fn server() -> &'static Postgres {
    SERVER.get_or_init(Postgres::start)
}

/// A fresh database `name` on the shared server; its URL.
pub async fn database(name: &str) -> String {
    server().database(name).await
}

/// A pool on `url`, for tests to read rows.
pub async fn pool(url: &str) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .unwrap()
}
