//! Synchronization (issue 44) on the embedded dev cluster, pods
//! simulated: 1,000 one-node workflows, then the same 1,000 holding one
//! semaphore of 50 (workflow-level `synchronization`), in one process
//! and one run; workflows/min of each and their ratio, and the lock's
//! hand-over latency (from the write that made a waiter the holder to
//! that workflow's start: `weft_lock_handover_seconds`), p50 and p99
//! interpolated within its buckets. `SYNC_ROUNDS` times each (default
//! 4: run to run, one round's throughput varied by a tenth), alternating. Also, per
//! variant: CPU seconds of the process (controller and dev cluster) per
//! 1,000 workflows and the controller's reconciles and API writes per
//! workflow; with `PROFILE_SECONDS=n`, a CPU profile of n seconds of each
//! variant's second run (target/sync-free-cpu.pb.gz,
//! target/sync-held-cpu.pb.gz).
//!
//! `cargo bench -p weft --bench sync` (after `make guests`).

mod common;

const WORKFLOWS: usize = 1_000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let api: kube::Api<weft::api::Workflow> = kube::Api::namespaced(sim.client.clone(), "default");
    let plain: weft_dag::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "nodes": [{"id": "task", "task": common::simulated_task()}]}))?;
    let mut locked = plain.clone();
    locked.synchronization = Some(serde_json::from_value(
        serde_json::json!({"semaphore": {"name": "fifty", "limit": 50}}),
    )?);
    let (mut free, mut held) = (Variant::default(), Variant::default());
    let rounds: usize = std::env::var("SYNC_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    for round in 0..rounds {
        free.run(&sim, &api, "free", round, &plain).await?;
        held.run(&sim, &api, "held", round, &locked).await?;
    }
    let (f, h) = (free.per_min(), held.per_min());
    println!(
        "one-node workflows/min: no lock {f:.0}, on a semaphore of 50 {h:.0} ({:+.1}%)",
        (h / f - 1.0) * 100.0
    );
    let each = |v: &Variant| {
        v.per_min
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
    };
    println!(
        "each round: no lock {}; semaphore {}",
        each(&free).join(" "),
        each(&held).join(" ")
    );
    let runs = (rounds * WORKFLOWS) as f64;
    println!(
        "CPU seconds per 1,000 workflows (controller and dev cluster): no lock {:.2}, semaphore {:.2}",
        free.cpu / runs * 1e3,
        held.cpu / runs * 1e3
    );
    println!("per workflow (no lock / semaphore):");
    for (k, v) in &held.counts {
        let f = free.counts.get(k).copied().unwrap_or(0.0);
        println!("  {k}: {:.2} / {:.2}", f / runs, v / runs);
    }
    let (count, p50, p99) = handover(&sim.ctx.metrics.render());
    println!(
        "lock hand-over over {count} waits: p50 {:.1} ms, p99 {:.1} ms",
        p50 * 1e3,
        p99 * 1e3
    );
    sim.shutdown().await;
    Ok(())
}

/// One variant's runs: workflows/min of each, and what they cost.
#[derive(Default)]
struct Variant {
    per_min: Vec<f64>,
    cpu: f64,
    counts: std::collections::BTreeMap<String, f64>,
}

impl Variant {
    async fn run(
        &mut self,
        sim: &common::Simulated,
        api: &kube::Api<weft::api::Workflow>,
        label: &str,
        round: usize,
        spec: &weft_dag::WorkflowSpec,
    ) -> anyhow::Result<()> {
        let secs = std::env::var("PROFILE_SECONDS").ok().filter(|_| round == 1);
        let profile = match secs {
            Some(s) => Some(tokio::spawn(common::cpu_profile(
                s.parse()?,
                format!("sync-{label}"),
            ))),
            None => None,
        };
        let me = std::path::Path::new("/proc/self");
        let (cpu, counted) = (common::cpu_of(me), common::counters(&sim.ctx));
        let name = format!("{label}{round}");
        self.per_min
            .push(common::one_node_run(api, &name, WORKFLOWS, spec).await?);
        self.cpu += common::cpu_of(me) - cpu;
        for (k, v) in common::since(&common::counters(&sim.ctx), &counted) {
            *self.counts.entry(k).or_default() += v;
        }
        if let Some(p) = profile {
            p.await??;
        }
        Ok(())
    }

    fn per_min(&self) -> f64 {
        self.per_min.iter().sum::<f64>() / self.per_min.len() as f64
    }
}

/// (count, p50, p99) of `weft_lock_handover_seconds{kind="semaphore"}`,
/// each quantile interpolated linearly within its bucket.
fn handover(metrics: &str) -> (u64, f64, f64) {
    let mut buckets: Vec<(f64, u64)> = metrics
        .lines()
        .filter(|l| l.starts_with("weft_lock_handover_seconds_bucket") && l.contains("semaphore"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map_or(0, |b| b.1);
    let quantile = |q: f64| {
        let want = q * total as f64;
        let mut prev = (0.0, 0u64);
        for &(le, n) in &buckets {
            if n as f64 >= want {
                let span = (n - prev.1).max(1) as f64;
                let upper = if le.is_finite() { le } else { prev.0 * 2.0 };
                return prev.0 + (upper - prev.0) * (want - prev.1 as f64) / span;
            }
            prev = (le, n);
        }
        prev.0
    };
    (total, quantile(0.5), quantile(0.99))
}
