//! Execution history (issue 43), on a real PostgreSQL (Debian's server,
//! started here by tests/support/postgres.sh in a temporary directory):
//!
//! 1. the controller's one-node workflows/min on the embedded dev cluster
//!    (pods simulated), runs with history off and on alternating
//!    (`HISTORY_ROUNDS` rounds, default 8; `common::paired`), and the
//!    events/s the exporter wrote in the runs with it on;
//! 2. raw ingest: 100,000 events from 10,000 outboxes through the
//!    exporter, events/s;
//! 3. ListExecutions' query over 1,000,000 archived executions: the first
//!    page of a filtered listing and a deep page by cursor, p50 and p99
//!    of 200 each.
//!
//! `cargo bench -p weft --bench history` (after `make guests`);
//! `HISTORY_PARTS=1,3` runs only those parts; `PROFILE_SECONDS=N` takes a
//! CPU profile of the first N seconds of part 1's second history-on run
//! (target/history-cpu.pb.gz, as the controller bench does); with
//! `PROFILE_EVERY_ROUND=1` also every run of part 1, off and on
//! (target/history-{off,on}N-cpu.pb.gz).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::api::{Workflow, WorkflowResourceSpec};
use weft::history::query::{Cursor, Filter, LabelTerm};
use weft::history::{Db, History, Retention};
use weft_dag::history::{EventKind, HistoryEvent};

const WORKFLOWS: usize = 1_000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = postgres(dir.path())?;
    let db = Db::open(&url)?;
    db.migrate(None).await?;

    let parts = std::env::var("HISTORY_PARTS").unwrap_or_else(|_| "1,2,3".into());
    let part = |n: &str| parts.split(',').any(|p| p.trim() == n);
    if part("1") {
        throughput(&db).await?;
    }
    if part("2") {
        ingest(&url).await?;
    }
    if part("3") {
        listing(&url).await?;
    }
    let _ = std::process::Command::new("bash")
        .args(["tests/support/postgres.sh", "stop"])
        .arg(dir.path())
        .current_dir(root())
        .status();
    Ok(())
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A PostgreSQL cluster in `dir`; its URL.
fn postgres(dir: &std::path::Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("bash")
        .args(["tests/support/postgres.sh", "start"])
        .arg(dir)
        .current_dir(root())
        .env("WEFT_PG_WATCH_PID", std::process::id().to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "postgres.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// Part 1: the controller with history off, then on (the context takes a
/// history once), two runs each.
async fn throughput(db: &Db) -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let api: kube::Api<Workflow> = kube::Api::namespaced(sim.client.clone(), "default");
    let spec: weft_dag::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "nodes": [{"id": "task", "task": common::simulated_task()}]}))?;
    let h = History::start(db.clone(), sim.ctx.metrics.clone(), Retention::default());
    while h.health().is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let profile = std::env::var("PROFILE_SECONDS").ok();
    // History's own time: each run with it on, until the exporter has
    // written everything (the runs' workflows/min stop at their ends).
    let (on_secs, pg_cpu) = (std::cell::Cell::new(0.0), std::cell::Cell::new(0.0));
    let rounds = common::paired::rounds("HISTORY_ROUNDS", 8);
    let paired = common::paired::Paired::run(
        &sim.ctx,
        ["off", "on"],
        rounds,
        WORKFLOWS,
        |v, round, name| {
            match v {
                0 => sim.ctx.stop_history(),
                _ => sim.ctx.set_history(h.clone()),
            }
            let p = match &profile {
                Some(secs) if v == 1 && round == 1 => Some(tokio::spawn(common::cpu_profile(
                    secs.parse().expect("PROFILE_SECONDS: seconds"),
                    "history".into(),
                ))),
                Some(secs) if common::paired::profiles_round(round, usize::MAX) => {
                    Some(tokio::spawn(common::cpu_profile(
                        secs.parse().expect("PROFILE_SECONDS: seconds"),
                        format!("history-{name}"),
                    )))
                }
                _ => None,
            };
            let (api, spec, h, on_secs, pg_cpu) = (&api, &spec, &h, &on_secs, &pg_cpu);
            async move {
                let (start, cpu) = (Instant::now(), Cpu::now());
                let per_min = common::one_node_run(api, &name, WORKFLOWS, spec).await?;
                if v == 1 {
                    while h.pending() > 0 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    on_secs.set(on_secs.get() + start.elapsed().as_secs_f64());
                    pg_cpu.set(pg_cpu.get() + cpu.since().1);
                }
                if let Some(p) = p {
                    p.await??;
                }
                Ok(per_min)
            }
        },
    )
    .await?;
    paired.print("one-node workflows/min, history off vs on");
    let events = count(db, "SELECT COUNT(*) FROM events").await?;
    let archived = count(db, "SELECT COUNT(*) FROM executions").await?;
    println!(
        "  {events} events and {archived} archived executions written in {:.1}s of runs with history on ({:.0} events/s); PostgreSQL CPU {:.2} s per 1,000 workflows",
        on_secs.get(),
        events as f64 / on_secs.get(),
        pg_cpu.get() / rounds as f64 * (1_000.0 / WORKFLOWS as f64)
    );
    sim.shutdown().await;
    Ok(())
}

/// CPU seconds used so far by this process and by every `postgres`
/// process (from /proc; a backend that exited is not counted).
struct Cpu(f64, f64);

impl Cpu {
    fn now() -> Self {
        let mut pg = 0.0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            if comm.trim() == "postgres" {
                pg += common::cpu_of(&entry.path());
            }
        }
        Cpu(common::cpu_of(std::path::Path::new("/proc/self")), pg)
    }

    fn since(&self) -> (f64, f64) {
        let now = Cpu::now();
        (now.0 - self.0, now.1 - self.1)
    }
}

async fn count(db: &Db, sql: &'static str) -> anyhow::Result<i64> {
    use sqlx::Row;
    Ok(sqlx::query(sql).fetch_one(&db.pool).await?.try_get(0)?)
}

fn event(node: usize, phase: &str) -> HistoryEvent {
    HistoryEvent {
        kind: EventKind::Node,
        node: format!("n{node}"),
        attempt: 1,
        phase: phase.into(),
        at: "2026-11-29T00:00:00Z".into(),
        reason: None,
        message: Some("exit code 0".into()),
        plugin: None,
        resource: None,
        log_links: Vec::new(),
    }
}

/// Part 2: 100,000 events through the exporter into a fresh database.
async fn ingest(url: &str) -> anyhow::Result<()> {
    let db = Db::open(url)?;
    sqlx::query("TRUNCATE events, executions, execution_labels")
        .execute(&db.pool)
        .await?;
    let metrics = Arc::new(weft::metrics::Metrics::default());
    let h = History::start(db.clone(), metrics, Retention::default());
    while h.health().is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let statuses: Vec<(Workflow, weft_dag::WorkflowStatus)> = (0..10_000)
        .map(|i| {
            let mut wf = Workflow::new(&format!("w{i}"), WorkflowResourceSpec::default());
            wf.metadata.namespace = Some("bench".into());
            wf.metadata.uid = Some(format!("uid-{i:05}"));
            let outbox = (0..5)
                .flat_map(|n| [event(n, "Running"), event(n, "Succeeded")])
                .collect();
            let status = weft_dag::WorkflowStatus {
                outbox,
                ..Default::default()
            };
            (wf, status)
        })
        .collect();
    let start = Instant::now();
    for (wf, status) in &statuses {
        h.record(wf, status);
    }
    while h.pending() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = start.elapsed();
    let n = count(&db, "SELECT COUNT(*) FROM events").await?;
    println!(
        "ingest: {n} events from 10,000 outboxes in {:.2}s: {:.0} events/s",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
    Ok(())
}

/// Part 3: 1,000,000 archived executions (10 namespaces, 3 phases, a team
/// label of 20 values), written by PostgreSQL itself, then timed queries.
async fn listing(url: &str) -> anyhow::Result<()> {
    let db = Db::open(url)?;
    let start = Instant::now();
    for sql in [
        "TRUNCATE events, executions, execution_labels",
        "INSERT INTO executions (uid, namespace, name, phase, template, created_at, started_at, \
         finished_at, archived_at, message, labels, workflow, size_bytes) \
         SELECT 'uid-' || lpad(i::text, 7, '0'), 'ns-' || (i % 10), 'run-' || i, \
         (ARRAY['Succeeded', 'Failed', 'Aborted'])[1 + i % 3], NULL, i, \
         1800000000000 + i * 10, 1800000000000 + i * 10 + 5, 1800000000000 + i * 10 + 6, NULL, \
         '{}', '{\"metadata\": {\"name\": \"run-' || i || '\", \"namespace\": \"ns-' || (i % 10) || '\"}, \"spec\": {\"nodes\": []}, \"status\": {\"phase\": \"Succeeded\"}}', 200 \
         FROM generate_series(1, 1000000) AS i",
        "INSERT INTO execution_labels (uid, key, value) \
         SELECT 'uid-' || lpad(i::text, 7, '0'), 'team', 't' || (i % 20) FROM generate_series(1, 1000000) AS i",
        "ANALYZE",
    ] {
        sqlx::query(sql).execute(&db.pool).await?;
    }
    println!(
        "1,000,000 archived executions written in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let h = History::start(
        db,
        Arc::new(weft::metrics::Metrics::default()),
        Retention::default(),
    );
    while h.health().is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let filter = Filter {
        namespace: Some("ns-3".into()),
        phase: Some("Failed".into()),
        labels: vec![LabelTerm::Equals("team".into(), "t13".into())],
        ..Default::default()
    };
    let deep = Cursor {
        started: 1_800_000_000_000 + 500_000 * 10,
        uid: "uid-0500000".into(),
    };
    for (what, f, after) in [
        ("first page, all", Filter::default(), None),
        (
            "first page, namespace + phase + label",
            filter.clone(),
            None,
        ),
        (
            "deep page (cursor at the middle), all",
            Filter::default(),
            Some(&deep),
        ),
        (
            "deep page, namespace + phase + label",
            filter.clone(),
            Some(&deep),
        ),
    ] {
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..200 {
            let t = Instant::now();
            rows = h.list(&f, after, 100).await?.len();
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "ListExecutions query over 1,000,000, {what}: {rows} rows, p50 {:.2} ms, p99 {:.2} ms",
            times[100].as_secs_f64() * 1e3,
            times[197].as_secs_f64() * 1e3
        );
    }
    Ok(())
}
