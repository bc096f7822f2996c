//! What template launches and sub-workflow trees cost: the same 1,000 task
//! nodes run (a) inline in one Workflow and (b) as a Workflow launched from
//! a WorkflowTemplate whose 10 sub-workflow nodes each run 100 of them in a
//! child Workflow. Pods are simulated (10 ms, no process) on the embedded
//! dev cluster. Runs alternate, three of each, each from an emptied
//! namespace; prints the medians and the tree's overhead over the inline
//! run.
//! `cargo bench -p weft --bench subworkflows` (after `make guests`).
//!
//! `TREE_NODES=100000 TREE_CHILDREN=25` runs one large tree instead (no
//! inline run: no single Workflow object holds 100,000 nodes), after the
//! 1,000-node tree as its reference, and prints the nodes run per second
//! of both and the largest Workflow object written. It prints the
//! process's resident memory every 30 s; with `HEAP_PROFILE=DIR` it also
//! writes jemalloc heap profiles there (pprof, as `--profiling-addr`
//! serves them) each time the resident memory passes another 2 GiB and at
//! the end, and prints which functions hold the most of it.

mod common;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use weft::api::{Workflow, WorkflowTemplate};

/// The weft binary's allocator, so that memory is measured as it behaves
/// there, and its heap profiles (inactive unless `HEAP_PROFILE` is set).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, as the weft binary sets them (`src/main.rs`).
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8] = b"prof:true,prof_active:false,lg_prof_sample:19\0";

const NODES: usize = 1_000;
const CHILDREN: usize = 10;
const RUNS: usize = 3;

/// `count` independent simulated pod nodes.
fn nodes(count: usize) -> Value {
    let task = common::simulated_task();
    (0..count)
        .map(|i| json!({"id": format!("t{i}"), "task": task}))
        .collect()
}

async fn run(api: &kube::Api<Workflow>, name: &str, spec: Value) -> anyhow::Result<Duration> {
    let took = common::run_to_success(api, name, spec).await?;
    clean(api).await?;
    Ok(took)
}

/// Deletes the run's Workflows and waits until their pods are gone, so
/// every run starts from the same empty namespace.
async fn clean(api: &kube::Api<Workflow>) -> anyhow::Result<()> {
    let dp = kube::api::DeleteParams::background();
    api.delete_collection(&dp, &Default::default()).await?;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.clone().into_client(), "default");
    for _ in 0..6_000 {
        let left = pods.list(&Default::default()).await?.items.len();
        let wfs = api.list(&Default::default()).await?.items.len();
        if left == 0 && wfs == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the namespace did not empty in 600 s")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Creates or replaces the WorkflowTemplate `name` with `spec`.
async fn template(client: &kube::Client, name: &str, spec: Value) -> anyhow::Result<()> {
    let template: WorkflowTemplate = serde_json::from_value(json!({
        "apiVersion": "weft.dev/v1alpha1", "kind": "WorkflowTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec
    }))?;
    let templates: kube::Api<WorkflowTemplate> = kube::Api::namespaced(client.clone(), "default");
    templates
        .patch(name, &PatchParams::apply("bench"), &Patch::Apply(&template))
        .await?;
    Ok(())
}

/// A tree of `total` simulated pod nodes: `children` sub-workflow nodes,
/// each running the template `part` of `total / children` nodes; returns
/// how long it ran (its Workflows are left for [`largest_workflow`]).
async fn large_tree(
    api: &kube::Api<Workflow>,
    total: usize,
    children: usize,
) -> anyhow::Result<Duration> {
    let client = api.clone().into_client();
    template(&client, "part", json!({"nodes": nodes(total / children)})).await?;
    let subs: Vec<Value> = (0..children)
        .map(|c| json!({"id": format!("c{c}"), "workflow": {"templateRef": "part"}}))
        .collect();
    common::run_to_success(api, "large", json!({"nodes": subs})).await
}

/// The size as JSON of the largest Workflow in the namespace.
async fn largest_workflow(api: &kube::Api<Workflow>) -> anyhow::Result<usize> {
    let all = api.list(&Default::default()).await?;
    Ok(all
        .items
        .iter()
        .map(|w| serde_json::to_vec(w).map_or(0, |b| b.len()))
        .max()
        .unwrap_or(0))
}

/// `total` simulated nodes in `TREE_CHILDREN` child Workflows (default
/// 25), after the 1,000-node tree as the reference.
async fn large(api: &kube::Api<Workflow>, total: usize) -> anyhow::Result<()> {
    let children: usize = std::env::var("TREE_CHILDREN").map_or(Ok(25), |v| v.parse())?;
    let launch = json!({"workflowTemplateRef": {"name": "tree"}});
    let reference = run(api, "tree-ref", launch).await?;
    println!(
        "reference: {NODES} nodes in {CHILDREN} children: {reference:?} ({:.0} nodes/s)",
        NODES as f64 / reference.as_secs_f64()
    );
    let took = large_tree(api, total, children).await?;
    let size = largest_workflow(api).await?;
    println!(
        "{total} nodes in {children} children: {took:?} ({:.0} nodes/s); largest Workflow object {size} bytes",
        total as f64 / took.as_secs_f64(),
    );
    clean(api).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = common::simulated().await?;
    let client = sim.client.clone();
    let api: kube::Api<Workflow> = kube::Api::namespaced(client.clone(), "default");
    let per_child = NODES / CHILDREN;
    let children: Vec<Value> = (0..CHILDREN)
        .map(|c| json!({"id": format!("c{c}"), "workflow": {"nodes": nodes(per_child)}}))
        .collect();
    template(&client, "tree", json!({"nodes": children})).await?;
    if let Ok(total) = std::env::var("TREE_NODES") {
        let heap = std::env::var_os("HEAP_PROFILE").map(std::path::PathBuf::from);
        let watcher = tokio::spawn(memory::watch(heap.clone()));
        large(&api, total.parse()?).await?;
        watcher.abort();
        if let Some(dir) = heap {
            memory::profile(&dir.join("end.pb.gz")).await?;
        }
        sim.shutdown().await;
        return Ok(());
    }

    let (mut inline, mut tree) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        inline.push(run(&api, &format!("inline-{i}"), json!({"nodes": nodes(NODES)})).await?);
        let launch = json!({"workflowTemplateRef": {"name": "tree"}});
        tree.push(run(&api, &format!("tree-{i}"), launch).await?);
        println!("run {i}: inline {:?}, tree {:?}", inline[i], tree[i]);
    }
    let (a, b) = (median(inline), median(tree));
    println!(
        "{NODES} simulated pod nodes: inline {a:?}, template + {CHILDREN} sub-workflows {b:?} (median of {RUNS}); overhead {:+.1} %",
        (b.as_secs_f64() / a.as_secs_f64() - 1.0) * 100.0
    );
    sim.shutdown().await;
    Ok(())
}

/// Resident memory and heap profiles of the bench process (dev cluster,
/// controller and plugins together).
mod memory {
    use std::collections::{HashMap, HashSet};
    use std::io::Read;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use pprof::protos::{Message, Profile};

    /// The process's resident set in MiB (`VmRSS`).
    fn rss_mib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    }

    /// Prints the resident memory every 30 s; with a directory, switches
    /// heap sampling on and writes a profile each time it passes another
    /// 2 GiB.
    pub async fn watch(heap: Option<PathBuf>) {
        if heap.is_some() {
            let ctl = jemalloc_pprof::PROF_CTL
                .as_ref()
                .expect("jemalloc profiling");
            ctl.lock().await.activate().expect("heap sampling on");
        }
        let start = Instant::now();
        let (mut peak, mut next_dump) = (0, 2048);
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let rss = rss_mib();
            peak = peak.max(rss);
            println!(
                "memory after {:?}: {rss} MiB resident (peak {peak})",
                start.elapsed()
            );
            if let Some(dir) = heap.as_ref().filter(|_| rss >= next_dump) {
                let _ = profile(&dir.join(format!("{next_dump}mib.pb.gz"))).await;
                next_dump += 2048;
            }
        }
    }

    /// Writes jemalloc's heap profile to `path` and prints the functions
    /// whose stacks hold the most bytes (each function counted once per
    /// stack, so callers include their callees).
    pub async fn profile(path: &Path) -> anyhow::Result<()> {
        let ctl = jemalloc_pprof::PROF_CTL
            .as_ref()
            .expect("jemalloc profiling");
        let gz = ctl.lock().await.dump_pprof()?;
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
        std::fs::write(path, &gz)?;
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut raw)?;
        let p = Profile::decode(raw.as_slice())?;
        let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        println!(
            "heap profile {}: {} MiB in use (sampled); the functions holding most:",
            path.display(),
            total >> 20
        );
        for (name, bytes) in top(&p, 40) {
            println!("  {:>7} MiB  {name}", bytes >> 20);
        }
        Ok(())
    }

    /// The `n` functions with the most in-use bytes under them.
    fn top(p: &Profile, n: usize) -> Vec<(String, i64)> {
        let name = |f: u64| {
            let func = p.function.iter().find(|x| x.id == f);
            func.map_or_else(String::new, |x| p.string_table[x.name as usize].clone())
        };
        let loc: HashMap<u64, Vec<String>> = p
            .location
            .iter()
            .map(|l| (l.id, l.line.iter().map(|x| name(x.function_id)).collect()))
            .collect();
        let mut held: HashMap<String, i64> = HashMap::new();
        for s in &p.sample {
            let names: HashSet<&String> = s
                .location_id
                .iter()
                .filter_map(|id| loc.get(id))
                .flatten()
                .collect();
            for f in names {
                *held.entry(short(f)).or_default() += s.value[0];
            }
        }
        let mut v: Vec<_> = held.into_iter().collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v.truncate(n);
        v
    }

    /// A function's name without its hash suffix, at most 140 characters.
    fn short(name: &str) -> String {
        let n = name.rsplit_once("::h").map_or(name, |(a, _)| a);
        n.chars().take(140).collect()
    }
}
