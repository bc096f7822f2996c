//! The bench's output: one JSON line per run in
//! target/bench-peers/results.jsonl, and Markdown tables written between
//! the markers of docs/benchmarks.md, so that no figure is typed by hand.

use std::fmt::Write as _;
use std::path::Path;

use crate::bed::{MATCHED_BURST, MATCHED_QPS, MATCHED_WORKERS};
use crate::run::Row;
use crate::workloads::{SCALE_NODES, SCALE_WORKFLOWS, TREE, WORKLOADS};

const BEGIN: &str = "<!-- peers:begin (written by `make bench-peers`) -->";
const END: &str = "<!-- peers:end -->";

/// Appends `row` to target/bench-peers/results.jsonl.
pub fn append(row: &Row) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = crate::root().join("target/bench-peers");
    std::fs::create_dir_all(&dir)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("results.jsonl"))?;
    writeln!(f, "{}", serde_json::to_string(row)?)?;
    Ok(())
}

/// A shell command's output, trimmed (empty when it fails).
pub fn sh(cmd: &str) -> String {
    std::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The latest row of every (workload, peer, setting) in results.jsonl:
/// the tables cover runs of several invocations (one workload rerun
/// replaces its columns only).
pub fn latest() -> anyhow::Result<Vec<Row>> {
    let file = crate::root().join("target/bench-peers/results.jsonl");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let mut rows: Vec<Row> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: Row = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!("{}: a line does not read as a run: {e}", file.display())
        })?;
        rows.retain(|r| {
            (&r.workload, &r.peer, &r.setting) != (&row.workload, &row.peer, &row.setting)
        });
        rows.push(row);
    }
    rows.sort_by_key(|r| (r.workload.clone(), r.setting.clone(), peer_rank(&r.peer)));
    Ok(rows)
}

/// The peers in the order of the tables' columns.
const PEERS: [&str; 3] = ["Weft", "Argo", "Flyte"];

fn peer_rank(peer: &str) -> usize {
    PEERS.iter().position(|p| *p == peer).unwrap_or(PEERS.len())
}

/// The versions and the bed, as the tables' preamble.
fn preamble(run_ms: u64, peers: &Path) -> String {
    let root = crate::root();
    let env = |file: &str, key: &str| {
        let text = std::fs::read_to_string(root.join("tests/k8s").join(file)).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    format!(
        "Tables written {date} (each column names its run) on {cpus} cores, {mem}; Weft `{commit}` (release), Argo Workflows \
         `{argo}` and Flyte's flytepropeller `{flyte}` (`{peers}`), Kubernetes `{kube}`, etcd `{etcd}`, kwok `{kwok}`. Pods end \
         Succeeded {run_ms} ms after they run (kwok, 4 nodes); kube-scheduler at its defaults. \
         Settings: **defaults** = each controller as it ships (Weft 100 QPS / 200 burst, \
         unlimited reconciles, info logs; Argo 20 QPS / 30 burst, 32 workflow workers, info \
         logs; flytepropeller 100 QPS / 25 burst, 20 workers, warn logs, no flyteadmin: \
         events to its log, storage in memory, pods asking 10m CPU / 16Mi); **matched** = \
         each at {MATCHED_QPS} QPS / {MATCHED_BURST} burst, {MATCHED_WORKERS} workers, warn logs.\n",
        date = sh("date -u +%Y-%m-%dT%H:%MZ"),
        cpus = sh("nproc"),
        mem = sh("free -g | awk '/Mem:/{print $2\" GiB\"}'"),
        commit = sh(&format!("git -C {} rev-parse --short HEAD", root.display())),
        argo = env("peers.env", "ARGO_VERSION"),
        flyte = env("peers.env", "FLYTE_VERSION"),
        peers = peers.display(),
        kube = env("versions.env", "KUBE_VERSION"),
        etcd = env("versions.env", "ETCD_VERSION"),
        kwok = env("versions.env", "KWOK_VERSION"),
    )
}

fn find<'a>(rows: &'a [Row], w: &str, peer: &str, setting: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.workload == w && r.peer == peer && r.setting == setting)
}

/// `weft / argo` of a figure, where both runs exist.
fn ratio(rows: &[Row], w: &str, setting: &str, f: impl Fn(&Row) -> f64) -> Option<f64> {
    let (a, b) = (
        find(rows, w, "Weft", setting)?,
        find(rows, w, "Argo", setting)?,
    );
    Some(f(a) / f(b))
}

/// The goals, computed from the rows.
fn goals(rows: &[Row]) -> String {
    let mut s = String::from("| Goal | Measured (Weft / Argo) | Met |\n|---|---|---|\n");
    let mut line = |goal: &str, r: Option<f64>, met: fn(f64) -> bool| {
        let (m, ok) = match r {
            Some(r) => (format!("{r:.2}×"), if met(r) { "yes" } else { "no" }),
            None => ("not run".into(), "—"),
        };
        let _ = writeln!(s, "| {goal} | {m} | {ok} |");
    };
    line(
        "throughput, one-node workflows (a), matched: Weft ≥ 5× Argo",
        ratio(rows, "a", "matched", |r| r.workflows_per_min),
        |r| r >= 5.0,
    );
    for w in WORKLOADS {
        let goal = format!(
            "API writes per pod ({}), matched: Weft ≤ ⅓ of Argo's",
            w.key
        );
        let r = ratio(rows, w.key, "matched", |r| r.writes_per_pod);
        if r.is_some() || w.key == "a" {
            line(&goal, r, |r| r <= 1.0 / 3.0);
        }
    }
    line(
        "controller peak RSS at 1,000 concurrent workflows (a), matched: Weft ≤ ¼ of Argo's",
        ratio(rows, "a", "matched", |r| r.peak_rss_mib),
        |r| r <= 0.25,
    );
    line(
        "creation to first pod p99 (a), matched: Weft ≤ ½ of Argo's",
        ratio(rows, "a", "matched", |r| r.first_pod_p99_ms),
        |r| r <= 0.5,
    );
    let tree = ["matched", "defaults"]
        .iter()
        .find_map(|setting| find(rows, TREE.key, "Weft", setting));
    let (m, ok) = match tree {
        Some(r) => (
            format!(
                "ran in {:.0} s; Weft's peak RSS {:.0} MiB",
                r.seconds, r.peak_rss_mib
            ),
            yes_no(r.peak_rss_mib <= 2048.0),
        ),
        None => ("not run".into(), "—"),
    };
    let _ = writeln!(
        s,
        "| 100,000-node workflow (tree, (t)) on the real control plane: runs, Weft's controller RSS ≤ 2 GiB | {m} | {ok} |"
    );
    s
}

/// Where a floor that neither controller's code can move stops a goal,
/// computed from the same runs: kube-scheduler's bind rate, Weft's own
/// minimum of writes, and its RSS before any workflow.
fn floors(rows: &[Row]) -> String {
    let mut s = String::from(
        "| Goal | Its bar | Floor under it (same runs) | Bar below the floor |\n|---|---|---|---|\n",
    );
    let (weft, argo) = (
        find(rows, "a", "Weft", "matched"),
        find(rows, "a", "Argo", "matched"),
    );
    if let (Some(weft), Some(argo)) = (weft, argo) {
        let bar = 5.0 * argo.workflows_per_min;
        let client = f64::from(MATCHED_QPS) / 2.0 * 60.0;
        let _ = writeln!(
            s,
            "| throughput (a), matched | ≥ {bar:.0} workflows/min (5 × {:.0}) | kube-scheduler bound at most {} pods in one second (its default client limits, 50 QPS and burst 100, allow about 3,000 binds/min); Weft's {} QPS over its floor of 2 writes per one-node workflow (the pod, the final status) allows {client:.0}/min | {} |",
            argo.workflows_per_min,
            weft.binds_peak_per_s.max(argo.binds_peak_per_s),
            MATCHED_QPS,
            yes_no(bar > client.min(3_000.0)),
        );
        let bar = argo.peak_rss_mib / 4.0;
        let _ = writeln!(
            s,
            "| peak RSS (a), matched | ≤ {bar:.0} MiB (¼ of {:.0}) | Weft's RSS before its first workflow (plugins loaded, compiled in a child process; caches synced): {:.0} MiB | {} |",
            argo.peak_rss_mib,
            weft.idle_rss_mib,
            yes_no(weft.idle_rss_mib > bar),
        );
    }
    for w in WORKLOADS {
        if let Some(argo) = find(rows, w.key, "Argo", "matched") {
            let bar = argo.writes_per_pod / 3.0;
            let _ = writeln!(
                s,
                "| API writes per pod ({}), matched | ≤ {bar:.2} (⅓ of {:.2}) | one create per pod | {} |",
                w.key,
                argo.writes_per_pod,
                yes_no(bar < 1.0),
            );
        }
    }
    s
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// A row of a workload's table: its label and how a run shows it.
type Figure = (&'static str, fn(&Row) -> String);

/// A figure, or "—" for a run from before the bench measured it.
fn opt(v: f64, shown: String) -> String {
    if v > 0.0 { shown } else { "—".into() }
}

/// One table per workload: a column per run, a row per figure.
fn workload_table(rows: &[Row], key: &str, title: &str) -> Option<String> {
    let runs: Vec<&Row> = rows.iter().filter(|r| r.workload == key).collect();
    let first = runs.first()?;
    let mut s = format!("#### ({key}) {title}: {} pods\n\n| |", first.pods);
    for r in &runs {
        let _ = write!(s, " {} {} |", r.peer, r.setting);
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(runs.len()));
    s.push('\n');
    let figures: [Figure; 15] = [
        ("completion, s", |r| format!("{:.1}", r.seconds)),
        ("workflows/min", |r| format!("{:.0}", r.workflows_per_min)),
        ("pods/min", |r| format!("{:.0}", r.pods_per_min)),
        ("creation → first pod p50, ms", |r| {
            format!("{:.0}", r.first_pod_p50_ms)
        }),
        ("creation → first pod p99, ms", |r| {
            format!("{:.0}", r.first_pod_p99_ms)
        }),
        ("API writes per pod", |r| format!("{:.2}", r.writes_per_pod)),
        ("API reads per pod (get, list, watch)", |r| {
            format!("{:.2}", r.reads_per_pod)
        }),
        ("controller CPU, s", |r| format!("{:.1}", r.cpu_seconds)),
        ("controller peak RSS, MiB", |r| {
            format!("{:.0}", r.peak_rss_mib)
        }),
        ("controller RSS before the first workflow, MiB", |r| {
            opt(r.idle_rss_mib, format!("{:.0}", r.idle_rss_mib))
        }),
        ("pod life (first seen → Succeeded) p50, ms", |r| {
            r.pod_life_p50_ms.map_or("—".into(), |v| format!("{v:.0}"))
        }),
        ("kube-scheduler binds in its busiest second", |r| {
            opt(r.binds_peak_per_s as f64, r.binds_peak_per_s.to_string())
        }),
        ("largest workflow object, bytes", |r| {
            r.largest_object_bytes.to_string()
        }),
        ("controller log lines at error level", |r| {
            r.controller_error_lines.to_string()
        }),
        ("run at (UTC), Weft commit", |r| match r.at.is_empty() {
            true => "2026-11-28, before the stamp (f0c7983)".into(),
            false => format!("{} `{}`", r.at, r.commit),
        }),
    ];
    for (name, f) in figures {
        let _ = write!(s, "| {name} |");
        for r in &runs {
            let _ = write!(s, " {} |", f(r));
        }
        s.push('\n');
    }
    Some(s)
}

/// Every run's requests by verb and resource, per pod.
fn requests_table(rows: &[Row]) -> String {
    let mut s = String::from("| Run | Requests per pod by verb and resource |\n|---|---|\n");
    for r in rows {
        let per: Vec<String> = r
            .requests
            .iter()
            .map(|(k, n)| format!("{k} {:.2}", *n as f64 / r.pods as f64))
            .collect();
        let _ = writeln!(
            s,
            "| ({}) {} {} | {} |",
            r.workload,
            r.peer,
            r.setting,
            per.join(", ")
        );
    }
    s
}

/// A scale curve: its title, its unit, and its points (n, workload key).
type Curve = (&'static str, &'static str, &'static [(usize, &'static str)]);

/// The scale curves (issue 41, item 5), one table per curve and setting:
/// how each controller's time, throughput, writes and memory grow with
/// nodes per workflow and with concurrent workflows. A point not run
/// reads "—".
fn scale_tables(rows: &[Row]) -> String {
    let curves: [Curve; 2] = [
        ("nodes per workflow (one workflow)", "nodes", &SCALE_NODES),
        (
            "concurrent one-node workflows",
            "workflows",
            &SCALE_WORKFLOWS,
        ),
    ];
    let mut s = String::new();
    for setting in ["matched", "defaults"] {
        for (title, unit, points) in curves {
            let ran = points
                .iter()
                .any(|(_, k)| PEERS.iter().any(|p| find(rows, k, p, setting).is_some()));
            if !ran {
                continue;
            }
            let _ = write!(
                s,
                "\n#### Scale curve: {title}, {setting}\n\n| {unit} | completion s ({peers}) | pods/min | API writes per pod | controller CPU s | controller peak RSS MiB | run at, Weft commit ({peers}) |\n|---|---|---|---|---|---|---|\n",
                peers = PEERS.join(" / ")
            );
            for (n, key) in points {
                let both = |f: fn(&Row) -> String| {
                    let one = |p: &&str| find(rows, key, p, setting).map_or("—".to_string(), f);
                    PEERS.iter().map(one).collect::<Vec<_>>().join(" / ")
                };
                let _ = writeln!(
                    s,
                    "| {n} ({key}) | {} | {} | {} | {} | {} | {} |",
                    both(|r| format!("{:.1}", r.seconds)),
                    both(|r| format!("{:.0}", r.pods_per_min)),
                    both(|r| format!("{:.2}", r.writes_per_pod)),
                    both(|r| format!("{:.1}", r.cpu_seconds)),
                    both(|r| format!("{:.0}", r.peak_rss_mib)),
                    both(|r| format!("{} `{}`", r.at, r.commit)),
                );
            }
        }
    }
    s
}

/// The whole section's body.
pub fn tables(rows: &[Row], run_ms: u64, peers: &Path) -> String {
    let mut s = preamble(run_ms, peers);
    s.push('\n');
    s.push_str(&goals(rows));
    s.push_str("\nWhere a floor stops a goal:\n\n");
    s.push_str(&floors(rows));
    for w in WORKLOADS.iter().chain([&TREE]) {
        if let Some(t) = workload_table(rows, w.key, w.title) {
            s.push('\n');
            s.push_str(&t);
        }
    }
    s.push_str(&scale_tables(rows));
    s.push_str("\nThe controllers' requests, from kube-apiserver's audit log:\n\n");
    s.push_str(&requests_table(rows));
    s
}

/// Replaces what stands between the markers of docs/benchmarks.md.
pub fn write_docs(tables: &str) -> anyhow::Result<()> {
    let path = crate::root().join("docs/benchmarks.md");
    let text = std::fs::read_to_string(&path)?;
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        anyhow::bail!(
            "{}: the markers {BEGIN:?} and {END:?} are missing",
            path.display()
        );
    };
    let out = format!("{}{BEGIN}\n{tables}\n{}", &text[..b], &text[e..]);
    std::fs::write(&path, out)?;
    eprintln!("[peers] wrote the tables into {}", path.display());
    Ok(())
}
