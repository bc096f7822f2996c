//! Weft, Argo Workflows and Flyte's flytepropeller side by side on the
//! same real control plane (issue 41): `make bench-peers`. For every workload of
//! [`workloads::all`] (the five, then the scale curve's other
//! points), every setting and every peer, a fresh
//! control plane (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, all from tests/k8s/build.sh), kwok nodes whose pods end
//! Succeeded `POD_RUN_MS` (default 1,000) after they run, and the
//! controller as a process; the workflows are created at once (64 at a
//! time), and the run ends when every one of them has a terminal phase in
//! its own status. A run fails when any workflow did not succeed, when a
//! controller exits, or when the pods counted differ from the workload's.
//!
//! Appends one line per run to `target/bench-peers/results.jsonl` and
//! writes the tables of the latest run of each (workload, controller,
//! setting) in it between the markers of docs/benchmarks.md's "Weft vs
//! Argo": rerunning one workload replaces its columns only.
//! Environment: `PEERS_WORKLOADS=a,b,…,n10,n100,w100,w10000` (default
//! all; `t`, the 100,000-node tree, Weft only, runs only when named),
//! `PEERS_SETTINGS`
//! (`defaults,matched`), `PEERS` (`weft,argo,flyte`), `POD_RUN_MS`,
//! `PEERS_WRITE_WORKLOADS=DIR` (only write the workloads' YAML),
//! `PEERS_NO_DOCS=1` (leave docs/benchmarks.md alone), `PEERS_HEAP=ADDR`
//! (Weft's heap profiles, `measure::HeapProfiles`), `PEERS_PROFILE=ADDR`
//! (Weft serves its profiles there, e.g. `curl
//! ADDR/debug/pprof/profile?seconds=60`; nothing saved), `PEERS_TABLES_ONLY=1`
//! (no run: write the tables of results.jsonl).

#[allow(dead_code)]
#[path = "../../tests/common/k8s.rs"]
mod k8s;

mod bed;
mod measure;
mod report;
mod run;
mod workloads;

use bed::{Peer, Setting};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[path = "../../tests/common/port.rs"]
mod port;
use port::free_port;

/// The comma-separated list `var`, or `all`.
fn pick<T: Copy>(var: &str, all: &[T], key: impl Fn(T) -> String) -> anyhow::Result<Vec<T>> {
    let Ok(list) = std::env::var(var) else {
        return Ok(all.to_vec());
    };
    list.split(',')
        .map(|k| {
            let k = k.trim().to_lowercase();
            all.iter()
                .copied()
                .find(|x| key(*x).to_lowercase() == k)
                .ok_or_else(|| anyhow::anyhow!("{var}: no such entry {k:?}"))
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if let Some(dir) = std::env::var_os("PEERS_WRITE_WORKLOADS") {
        return workloads::write_all(std::path::Path::new(&dir));
    }
    let run_ms: u64 = std::env::var("POD_RUN_MS").map_or(Ok(1_000), |v| v.parse())?;
    let mut chosen = pick("PEERS_WORKLOADS", &workloads::named(), |w| w.key.into())?;
    if std::env::var_os("PEERS_WORKLOADS").is_none() {
        chosen.retain(|w| w.key != workloads::TREE.key);
    }
    let settings = pick(
        "PEERS_SETTINGS",
        &[Setting::Defaults, Setting::Matched],
        |s| s.name().into(),
    )?;
    let peers = pick("PEERS", &[Peer::Weft, Peer::Argo, Peer::Flyte], |p| {
        p.name().into()
    })?;
    let dir = bed::peers_dir();
    let mut rows = Vec::new();
    // PEERS_TABLES_ONLY=1: no run, the tables of results.jsonl only.
    let only_tables = std::env::var_os("PEERS_TABLES_ONLY").is_some();
    for w in chosen.iter().filter(|_| !only_tables) {
        for s in &settings {
            for p in &peers {
                if w.key == workloads::TREE.key && *p != Peer::Weft {
                    continue;
                }
                eprintln!(
                    "[peers] workload {} ({}), {}, {}",
                    w.key,
                    w.title,
                    s.name(),
                    p.name()
                );
                let row = run::one(*p, *s, w, &dir, run_ms).await?;
                eprintln!("[peers] {}", serde_json::to_string(&row)?);
                report::append(&row)?;
                rows.push(row);
            }
        }
    }
    let all = report::latest()?;
    eprintln!(
        "[peers] {} runs now, {} in results.jsonl's tables",
        rows.len(),
        all.len()
    );
    let tables = report::tables(&all, run_ms, &dir);
    println!("{tables}");
    if std::env::var_os("PEERS_NO_DOCS").is_none() {
        report::write_docs(&tables)?;
    }
    Ok(())
}
