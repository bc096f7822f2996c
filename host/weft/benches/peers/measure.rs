//! What one run measures, the same way for both controllers: from the API
//! (a watch on pods, a list of workflows), from kube-apiserver's audit log
//! and from /proc, never from a controller's own metrics.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;

use crate::k8s::RealCluster;

/// CPU seconds and peak RSS (MiB) of a process, from /proc.
pub fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 (11 and 12 after the name).
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    (cpu, status_mib(pid, "VmHWM:"))
}

/// A figure of /proc/PID/status given in kB (`VmHWM:`, `VmRSS:`), in MiB.
fn status_mib(pid: u32, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// With `PEERS_HEAP=ADDR` Weft's controller serves its profiles on ADDR
/// (`--profiling-addr`), and a run saves jemalloc's heap profile when
/// the controller's RSS is at a new high (so the last file saved is the
/// one nearest its peak) and before the first workflow, as
/// target/bench-peers/heap-{label}.pb.gz (`go tool pprof -top
/// -sample_index=inuse_space BINARY FILE`), with the process's memory
/// map beside it (smaps-{label}.txt: what is resident outside the heap,
/// such as the plugins' linear memories and code).
pub struct HeapProfiles {
    addr: Option<String>,
    high: f64,
}

impl HeapProfiles {
    pub fn new(weft: bool) -> Self {
        let addr = std::env::var("PEERS_HEAP").ok().filter(|_| weft);
        HeapProfiles { addr, high: 0.0 }
    }

    /// Saves a profile as `label` when RSS is over every earlier one.
    pub fn at_high(&mut self, pid: u32, label: &str) {
        if self.addr.is_none() {
            return;
        }
        let rss = status_mib(pid, "VmRSS:");
        if rss > self.high + 1.0 {
            self.high = rss;
            self.save(pid, label);
        }
    }

    /// Saves a profile and the memory map of `pid` as `label`.
    pub fn save(&self, pid: u32, label: &str) {
        let Some(addr) = &self.addr else { return };
        let dir = crate::root().join("target/bench-peers");
        let smaps = std::fs::copy(
            format!("/proc/{pid}/smaps"),
            dir.join(format!("smaps-{label}.txt")),
        );
        if let Err(e) = smaps {
            eprintln!("[peers] PEERS_HEAP: /proc/{pid}/smaps: {e}");
        }
        let path = dir.join(format!("heap-{label}.pb.gz"));
        let url = format!("http://{addr}/debug/pprof/heap");
        let ok = std::process::Command::new("curl")
            .args(["-sf", "-m", "30", "-o"])
            .arg(&path)
            .arg(&url)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("[peers] PEERS_HEAP: no heap profile from {url}");
        }
    }
}

/// Whether an audit verb writes.
fn writes(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// `user`'s requests by verb from the audit log, after its first `skip`
/// lines; one line per request (completed ones, and watches when they
/// start). Returns them and the log's length.
pub fn requests(
    cluster: &RealCluster,
    user: &str,
    skip: usize,
) -> (BTreeMap<String, usize>, usize) {
    let mut by_verb = BTreeMap::new();
    let mut lines = 0;
    cluster.each_audit(|e| {
        lines += 1;
        let stage = e["stage"].as_str().unwrap_or("");
        let counted = match e["verb"] == "watch" {
            true => stage == "ResponseStarted",
            false => stage == "ResponseComplete",
        };
        if lines <= skip || e["user"]["username"] != user || !counted {
            return;
        }
        let resource = e["objectRef"]["resource"].as_str().unwrap_or("-");
        let key = format!("{} {resource}", e["verb"].as_str().unwrap_or(""));
        *by_verb.entry(key).or_insert(0) += 1;
    });
    (by_verb, lines)
}

/// The most pods kube-scheduler bound in one second (its `create
/// pods/binding` requests in the audit log after its first `skip` lines):
/// with its default client limits (50 QPS, burst 100) it binds at most
/// about 50 a second, a floor under every controller's pods/min.
pub fn binds_peak(cluster: &RealCluster, skip: usize) -> usize {
    let mut by_second: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines = 0;
    cluster.each_audit(|e| {
        lines += 1;
        let bind = e["verb"] == "create"
            && e["objectRef"]["subresource"] == "binding"
            && e["stage"] == "ResponseComplete";
        let at = e["requestReceivedTimestamp"].as_str().unwrap_or("");
        if lines > skip && bind && at.len() >= 19 {
            *by_second.entry(at[..19].to_string()).or_insert(0) += 1;
        }
    });
    by_second.into_values().max().unwrap_or(0)
}

/// Writes and reads (get, list, watch) in `by_verb`.
pub fn split(by_verb: &BTreeMap<String, usize>) -> (usize, usize) {
    by_verb.iter().fold((0, 0), |(w, r), (k, n)| {
        let verb = k.split(' ').next().unwrap_or("");
        if writes(verb) { (w + n, r) } else { (w, r + n) }
    })
}

/// When each pod of the namespace was first seen, by the name of the
/// Workflow that owns it (and the earliest of all under ""), and how long
/// each pod lived from first seen to seen Succeeded.
#[derive(Clone, Default)]
pub struct FirstPods {
    inner: Arc<Mutex<(HashMap<String, Instant>, usize)>>,
    lives: Arc<Mutex<Vec<f64>>>,
}

impl FirstPods {
    /// Watches the namespace's pods until the returned task is aborted.
    pub fn watch(&self, client: kube::Client, ns: &str) -> tokio::task::JoinHandle<()> {
        let pods: kube::Api<Pod> = kube::Api::namespaced(client, ns);
        let me = self.clone();
        tokio::spawn(async move {
            let mut seen: HashMap<String, Option<Instant>> = HashMap::new();
            let mut events = watcher(pods, watcher::Config::default()).boxed();
            while let Some(Ok(ev)) = events.next().await {
                let (watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                    continue;
                };
                let name = p.metadata.name.clone().unwrap_or_default();
                let born = seen.entry(name).or_insert_with(|| {
                    me.record(&p);
                    Some(Instant::now())
                });
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase == Some("Succeeded")
                    && let Some(at) = born.take()
                {
                    let ms = at.elapsed().as_secs_f64() * 1e3;
                    me.lives.lock().unwrap().push(ms);
                }
            }
        })
    }

    fn record(&self, pod: &Pod) {
        let now = Instant::now();
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            // flytepropeller writes its kind in lower case.
            .find(|o| o.kind == "Workflow" || o.kind.eq_ignore_ascii_case("FlyteWorkflow"))
            .map_or(String::new(), |o| o.name.clone());
        let mut g = self.inner.lock().unwrap();
        g.0.entry(owner).or_insert(now);
        g.0.entry(String::new()).or_insert(now);
        g.1 += 1;
    }

    /// The p-th percentile of the pods' lives (first seen to seen
    /// Succeeded), in milliseconds.
    pub fn life(&self, p: f64) -> f64 {
        percentile(&mut self.lives.lock().unwrap().clone(), p)
    }

    /// How many distinct pods were seen.
    pub fn count(&self) -> usize {
        self.inner.lock().unwrap().1
    }

    /// The first pod of workflow `name`, else (for a run of one workflow
    /// whose pods belong to its children) the first of all.
    pub fn first(&self, name: &str, only: bool) -> Option<Instant> {
        let g = self.inner.lock().unwrap();
        g.0.get(name)
            .or(if only { g.0.get("") } else { None })
            .copied()
    }
}

/// The p-th percentile (0..=100) of `v`, in milliseconds.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i]
}
