//! What the controller benches share: the embedded dev cluster with every
//! pod simulated (no process, as kwok does), the first-party plugins, the
//! CRDs and a controller running against it.

use std::path::Path;
use std::sync::Arc;

#[allow(dead_code)]
#[path = "../../tests/common/port.rs"]
mod port;
#[allow(unused_imports)]
pub use port::free_port;

#[allow(dead_code, reason = "only some benches compare two variants")]
pub mod paired;

/// A running simulated cluster and controller.
pub struct Simulated {
    /// A client of the cluster.
    pub client: kube::Client,
    /// The controller's context (its metrics).
    #[allow(dead_code, reason = "only some benches read the metrics")]
    pub ctx: Arc<weft::controller::Context>,
    /// The loaded plugins.
    #[allow(dead_code, reason = "only the console bench serves the admin API")]
    pub registry: Arc<weft_plugin::Registry>,
    cluster: weft_cluster::DevCluster,
    _dir: tempfile::TempDir,
}

/// Starts the cluster (pods simulated) and the controller.
pub async fn simulated() -> anyhow::Result<Simulated> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir()?;
    let mut config = weft_cluster::Config::new(dir.path());
    config.runner.simulate_all = true;
    let cluster = weft_cluster::DevCluster::start(config).await?;
    let client = weft::runtime::client_for(&cluster.base_url())?;
    let (_engine, registry) = weft::runtime::load_plugins(&root.join("target/plugins"), None)?;
    weft::runtime::install_crd(&client).await?;
    // The controller starts once its settings are in: CONCURRENT_RECONCILES
    // (`--concurrent-reconciles`, default 0: no limit).
    let (go, gate) = tokio::sync::oneshot::channel::<()>();
    let start = async {
        let _ = gate.await;
    };
    let (ctx, _controller) = weft::runtime::spawn_controller_after(
        client.clone(),
        registry.clone(),
        None,
        start,
        std::future::pending(),
    );
    if let Ok(n) = std::env::var("CONCURRENT_RECONCILES") {
        ctx.set_concurrency(n.parse()?);
    }
    let _ = go.send(());
    Ok(Simulated {
        client,
        ctx,
        registry,
        cluster,
        _dir: dir,
    })
}

impl Simulated {
    /// Stops the cluster (the controller stops with the process).
    #[allow(dead_code, reason = "not every bench shuts down explicitly")]
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

/// A pod task the simulated cluster "runs" in 10 ms (no process).
#[allow(dead_code, reason = "only some benches build workflows of their own")]
pub fn simulated_task() -> serde_json::Value {
    serde_json::json!({"type": "pod", "config": {"image": "busybox", "command": ["true"],
        "annotations": {"weft.dev/simulate": "true", "weft.dev/simulate-duration": "10ms"}}})
}

/// Creates the Workflow `name` with `spec` and waits until it succeeds;
/// how long that took from the create (an error if it did not succeed).
#[allow(dead_code, reason = "only some benches build workflows of their own")]
pub async fn run_to_success(
    api: &kube::Api<weft::api::Workflow>,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<std::time::Duration> {
    let spec: weft_dag::WorkflowSpec = serde_json::from_value(spec)?;
    let start = std::time::Instant::now();
    let wf = weft::api::Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
    api.create(&Default::default(), &wf).await?;
    loop {
        let w = api.get(name).await?;
        if let Some(s) = w.status.as_ref().filter(|s| s.phase.is_terminal()) {
            anyhow::ensure!(
                s.phase == weft_dag::WorkflowPhase::Succeeded,
                "{name}: {:?}",
                s.message
            );
            return Ok(start.elapsed());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Takes a CPU profile over `secs` seconds through the profiling server,
/// saves it and prints the Weft functions most often on a sampled stack.
#[allow(dead_code, reason = "only some benches profile")]
pub async fn cpu_profile(secs: u64, label: String) -> anyhow::Result<()> {
    use std::collections::HashSet;
    use std::io::Read;
    let addr = weft::profiling::serve("127.0.0.1:0".parse()?).await?;
    let url = format!("http://{addr}/debug/pprof/profile?seconds={secs}");
    let out = tokio::process::Command::new("curl")
        .args(["-sf", "-m", "600", &url])
        .output()
        .await?;
    anyhow::ensure!(out.status.success(), "{url}: {:?}", out.status);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../target/{label}-cpu.pb.gz"));
    std::fs::write(&path, &out.stdout)?;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(out.stdout.as_slice()).read_to_end(&mut raw)?;
    let p = <pprof::protos::Profile as pprof::protos::Message>::decode(raw.as_slice())?;
    let name = |f: u64| {
        let func = p.function.iter().find(|x| x.id == f);
        func.map_or("", |x| p.string_table[x.name as usize].as_str())
    };
    let mut on_stack: std::collections::HashMap<&str, i64> = Default::default();
    let mut crates: std::collections::HashMap<&str, i64> = Default::default();
    for s in &p.sample {
        let (mut seen, mut seen_crates) = (HashSet::new(), HashSet::new());
        for loc in &s.location_id {
            let Some(l) = p.location.iter().find(|l| l.id == *loc) else {
                continue;
            };
            for line in &l.line {
                let n = name(line.function_id);
                if n.starts_with("weft") && seen.insert(n) {
                    *on_stack.entry(n).or_default() += s.value[0];
                }
                let krate = n.trim_start_matches('<').split("::").next().unwrap_or("");
                if seen_crates.insert(krate) {
                    *crates.entry(krate).or_default() += s.value[0];
                }
            }
        }
    }
    println!(
        "CPU profile: {} samples over {secs}s, {} bytes, saved to {}",
        p.sample.len(),
        out.stdout.len(),
        path.display()
    );
    for (title, counts) in [("Weft functions", on_stack), ("crates", crates)] {
        println!("{title} on most stacks:");
        let mut top: Vec<_> = counts.into_iter().collect();
        top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        for (f, n) in top.iter().take(12) {
            println!("  {n:>5}  {f}");
        }
    }
    Ok(())
}

/// `n` workflows of `spec` named `<prefix>-N`, created 32 at a time, run
/// to their end (an error names the first that did not succeed), then
/// deleted (so every run starts from the same
/// cluster): workflows/min. Their ends are read from a watch, as a UI
/// would: a list of every workflow every 100 ms cost the API server more
/// the longer a run took, which charged a slower variant twice.
#[allow(dead_code, reason = "only some benches run one-node workflows")]
pub async fn one_node_run(
    api: &kube::Api<weft::api::Workflow>,
    prefix: &str,
    n: usize,
    spec: &weft_dag::WorkflowSpec,
) -> anyhow::Result<f64> {
    use futures::{StreamExt, stream};
    use kube::api::{DeleteParams, ListParams, PostParams};
    let start = std::time::Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(32, |i| async move {
            let spec = weft::api::WorkflowResourceSpec { spec: spec.clone() };
            let wf = weft::api::Workflow::new(&format!("{prefix}-{i:04}"), spec);
            api.create(&PostParams::default(), &wf)
                .await
                .expect("create");
        })
        .await;
    let mut done = std::collections::HashSet::new();
    let ended = kube::runtime::watcher(api.clone(), Default::default());
    let ended = kube::runtime::WatchStreamExt::applied_objects(ended);
    futures::pin_mut!(ended);
    while done.len() < n {
        let Some(wf) = ended.next().await.transpose()? else {
            anyhow::bail!("the watch of workflows ended");
        };
        let mine = kube::ResourceExt::name_any(&wf).starts_with(&format!("{prefix}-"));
        if let Some(s) = wf.status.as_ref().filter(|s| mine && s.phase.is_terminal()) {
            anyhow::ensure!(
                s.phase == weft_dag::WorkflowPhase::Succeeded,
                "{} ended {:?}: {:?}",
                kube::ResourceExt::name_any(&wf),
                s.phase,
                s.message
            );
            done.insert(kube::ResourceExt::name_any(&wf));
        }
    }
    let per_min = n as f64 / start.elapsed().as_secs_f64() * 60.0;
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    while !api.list(&ListParams::default()).await?.items.is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok(per_min)
}

/// [`one_node_run`], with a CPU profile of its first `secs` seconds
/// saved as `label` when `profile` is `Some((secs, label))`.
#[allow(dead_code, reason = "only some benches profile their runs")]
pub async fn profiled_run(
    api: &kube::Api<weft::api::Workflow>,
    name: &str,
    n: usize,
    spec: &weft_dag::WorkflowSpec,
    profile: Option<(u64, String)>,
) -> anyhow::Result<f64> {
    let p = profile.map(|(secs, label)| tokio::spawn(cpu_profile(secs, label)));
    let per_min = one_node_run(api, name, n, spec).await?;
    if let Some(p) = p {
        p.await??;
    }
    Ok(per_min)
}

/// The controller's reconciles, API writes and plugin calls (count and
/// seconds) so far, by series.
#[allow(dead_code, reason = "only some benches count")]
pub fn counters(ctx: &weft::controller::Context) -> std::collections::BTreeMap<String, f64> {
    let keep = [
        "weft_reconciles_total",
        "weft_api_writes_total",
        "weft_plugin_call_duration_seconds_count",
        "weft_plugin_call_duration_seconds_sum",
    ];
    ctx.metrics
        .render()
        .lines()
        .filter(|l| keep.iter().any(|k| l.starts_with(k)))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[allow(dead_code, reason = "only some benches count")]
pub fn since(
    now: &std::collections::BTreeMap<String, f64>,
    then: &std::collections::BTreeMap<String, f64>,
) -> std::collections::BTreeMap<String, f64> {
    now.iter()
        .map(|(k, v)| (k.clone(), v - then.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// CPU seconds this process has used (the controller and the dev cluster).
#[allow(dead_code, reason = "only some benches count")]
pub fn own_cpu() -> f64 {
    cpu_of(std::path::Path::new("/proc/self"))
}

/// utime + stime of a /proc/<pid> directory, in seconds (USER_HZ 100).
#[allow(dead_code, reason = "only some benches count")]
pub fn cpu_of(proc_dir: &std::path::Path) -> f64 {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<f64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    (fields.get(11).unwrap_or(&0.0) + fields.get(12).unwrap_or(&0.0)) / 100.0
}
