//! Synchronization (issue 44) on the embedded dev cluster, pods
//! simulated: 1,000 one-node workflows, then the same 1,000 holding one
//! semaphore of 50 (workflow-level `synchronization`), in one process
//! and one run; workflows/min of each and their ratio, and the lock's
//! hand-over latency (from the write that made a waiter the holder to
//! that workflow's start: `weft_lock_handover_seconds`), p50 and p99
//! interpolated within its buckets. `SYNC_ROUNDS` rounds of both (default
//! 8: run to run, one variant's throughput moves by a tenth), alternating
//! (`common::paired`: the median of each round's ratio). Also, per
//! variant: CPU seconds of the process (controller and dev cluster) per
//! 1,000 workflows and the controller's reconciles and API writes per
//! workflow; with `PROFILE_SECONDS=n`, a CPU profile of n seconds of each
//! variant's second run (target/sync-free1-cpu.pb.gz,
//! target/sync-held1-cpu.pb.gz; every round's with `PROFILE_EVERY_ROUND=1`).
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
    let rounds = common::paired::rounds("SYNC_ROUNDS", 8);
    let profile = std::env::var("PROFILE_SECONDS").ok();
    let paired = common::paired::Paired::run(
        &sim.ctx,
        ["free", "held"],
        rounds,
        WORKFLOWS,
        |v, round, name| {
            let spec = if v == 0 { &plain } else { &locked };
            let p = profile
                .as_ref()
                .filter(|_| common::paired::profiles_round(round, 1))
                .map(|secs| {
                    let secs = secs.parse().expect("PROFILE_SECONDS: seconds");
                    (secs, format!("sync-{name}"))
                });
            let api = &api;
            async move { common::profiled_run(api, &name, WORKFLOWS, spec, p).await }
        },
    )
    .await?;
    paired.print("one-node workflows/min, no lock (free) vs on a semaphore of 50 (held)");
    let (count, p50, p99) = handover(&sim.ctx.metrics.render());
    println!(
        "lock hand-over over {count} waits: p50 {:.1} ms, p99 {:.1} ms",
        p50 * 1e3,
        p99 * 1e3
    );
    sim.shutdown().await;
    Ok(())
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
