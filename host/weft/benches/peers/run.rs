//! One run: a fresh bed, one controller, one workload, measured.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use kube::api::{DynamicObject, ListParams, PostParams};
use serde::{Deserialize, Serialize};

use crate::bed::{self, NAMESPACE, Peer, Setting};
use crate::measure::{self, FirstPods};
use crate::workloads::{self, Workload};

/// The longest one run may take before it counts as failed: an hour, two
/// for the 100,000-node tree (kube-scheduler binds ~3,000 pods a minute at
/// best, and with 45,000 pods waiting for it on this machine about half
/// that: the first complete try was cut at an hour with 38,000 done).
fn deadline(w: &Workload) -> Duration {
    match w.key == workloads::TREE.key {
        true => Duration::from_secs(7_200),
        false => Duration::from_secs(3_600),
    }
}

/// Everything one run measured (a line of results.jsonl).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// When the run ended (UTC, minutes) and Weft's commit.
    #[serde(default)]
    pub at: String,
    #[serde(default)]
    pub commit: String,
    pub workload: String,
    pub peer: String,
    pub setting: String,
    pub workflows: usize,
    pub pods: usize,
    pub seconds: f64,
    pub workflows_per_min: f64,
    pub pods_per_min: f64,
    pub first_pod_p50_ms: f64,
    pub first_pod_p99_ms: f64,
    pub writes_per_pod: f64,
    pub reads_per_pod: f64,
    pub requests: BTreeMap<String, usize>,
    pub cpu_seconds: f64,
    pub peak_rss_mib: f64,
    /// The controller's peak RSS before the first workflow was created
    /// (started, caches synced, plugins loaded): its floor.
    #[serde(default)]
    pub idle_rss_mib: f64,
    /// Pods' life from first seen to seen Succeeded, median (`None`: not
    /// measured).
    #[serde(default)]
    pub pod_life_p50_ms: Option<f64>,
    /// The most pods kube-scheduler bound in one second.
    #[serde(default)]
    pub binds_peak_per_s: usize,
    pub largest_object_bytes: usize,
    pub controller_error_lines: usize,
}

/// Runs `w` on `peer` with `setting` on a fresh bed.
pub async fn one(
    peer: Peer,
    setting: Setting,
    w: &Workload,
    peers: &Path,
    run_ms: u64,
) -> anyhow::Result<Row> {
    let cluster = bed::cluster(peer, peers, run_ms);
    let client = cluster.client().await;
    let mut controller = bed::start(peer, setting, &cluster, peers);
    let pid = controller.id();
    let result = measured(peer, setting, w, &cluster, &client, pid).await;
    let _ = controller.kill();
    let _ = controller.wait();
    if result.is_err() {
        let tail = bed::log_tail(&cluster, 20);
        eprintln!(
            "[peers] {}'s controller log, last lines:\n{tail}",
            peer.name()
        );
    }
    cluster.stop();
    result
}

async fn measured(
    peer: Peer,
    setting: Setting,
    w: &Workload,
    cluster: &crate::k8s::RealCluster,
    client: &kube::Client,
    pid: u32,
) -> anyhow::Result<Row> {
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), NAMESPACE, &peer.resource());
    let pods = FirstPods::default();
    let watch = pods.watch(client.clone(), NAMESPACE);
    let (_, skip) = measure::requests(cluster, peer.user(), 0);
    let (cpu0, idle_rss) = measure::usage(pid);
    let mut heap = measure::HeapProfiles::new(peer == Peer::Weft);
    let label = format!("{}-{}", w.key, setting.name());
    heap.save(pid, &format!("{label}-idle"));
    if peer == Peer::Weft {
        set_up(client, w).await?;
    }
    let start = Instant::now();
    let created = create_all(peer, w, &api).await?;
    eprintln!(
        "[peers] {} workflows created in {:.1} s",
        created.len(),
        start.elapsed().as_secs_f64()
    );
    wait_done(peer, &api, w, pid, |pid| heap.at_high(pid, &label)).await?;
    let seconds = start.elapsed().as_secs_f64();
    let (cpu1, rss) = measure::usage(pid);
    watch.abort();
    let (requests, _) = measure::requests(cluster, peer.user(), skip);
    let binds_peak = measure::binds_peak(cluster, skip);
    let expected = w.workflows * w.shape.pods();
    anyhow::ensure!(
        pods.count() == expected,
        "{}: {} pods ran, the workload has {expected}",
        peer.name(),
        pods.count()
    );
    let (writes, reads) = measure::split(&requests);
    let mut lat: Vec<f64> = created
        .iter()
        .filter_map(|(name, at)| {
            let first = pods.first(name, w.workflows == 1)?;
            Some(first.saturating_duration_since(*at).as_secs_f64() * 1e3)
        })
        .collect();
    Ok(Row {
        at: crate::report::sh("date -u +%Y-%m-%dT%H:%MZ"),
        commit: crate::report::sh(&format!(
            "git -C {} rev-parse --short HEAD",
            crate::root().display()
        )),
        workload: w.key.into(),
        peer: peer.name().into(),
        setting: setting.name().into(),
        workflows: w.workflows,
        pods: expected,
        seconds,
        workflows_per_min: w.workflows as f64 / seconds * 60.0,
        pods_per_min: expected as f64 / seconds * 60.0,
        first_pod_p50_ms: measure::percentile(&mut lat, 50.0),
        first_pod_p99_ms: measure::percentile(&mut lat, 99.0),
        writes_per_pod: writes as f64 / expected as f64,
        reads_per_pod: reads as f64 / expected as f64,
        requests,
        cpu_seconds: cpu1 - cpu0,
        peak_rss_mib: rss,
        idle_rss_mib: idle_rss,
        pod_life_p50_ms: Some(pods.life(50.0)).filter(|v| v.is_finite()),
        binds_peak_per_s: binds_peak,
        largest_object_bytes: largest(&api).await?,
        controller_error_lines: error_lines(peer, &cluster.log("controller")),
    })
}

/// Creates what Weft's rendering of `w` needs before its workflows (a
/// WorkflowTemplate), outside the timed run.
async fn set_up(client: &kube::Client, w: &Workload) -> anyhow::Result<()> {
    let gvk = kube::api::GroupVersionKind::gvk("weft.dev", "v1alpha1", "WorkflowTemplate");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "workflowtemplates");
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    for doc in workloads::weft_setup(w.shape) {
        let obj: DynamicObject = serde_json::from_value(doc)?;
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "create WorkflowTemplate {}: {e}",
                    obj.metadata.name.as_deref().unwrap_or("")
                )
            })?;
    }
    Ok(())
}

/// Creates the workload's workflows, 64 at a time; when each create was
/// answered, by name.
async fn create_all(
    peer: Peer,
    w: &Workload,
    api: &kube::Api<DynamicObject>,
) -> anyhow::Result<HashMap<String, Instant>> {
    let results: Vec<anyhow::Result<(String, Instant)>> = stream::iter(0..w.workflows)
        .map(|i| async move {
            let name = format!("w-{i}");
            let doc = match peer {
                Peer::Weft => workloads::weft(&name, w.shape),
                Peer::Argo => workloads::argo(&name, w.shape),
                Peer::Flyte => workloads::flyte(&name, w.shape),
            };
            let obj: DynamicObject = serde_json::from_value(doc)?;
            api.create(&PostParams::default(), &obj)
                .await
                .map_err(|e| anyhow::anyhow!("create {} workflow {name}: {e}", peer.name()))?;
            Ok((name, Instant::now()))
        })
        .buffer_unordered(64)
        .collect()
        .await;
    results.into_iter().collect()
}

/// The phase in a workflow's own status; flytepropeller's is a number
/// (its `WorkflowPhase`: 3 Success, 5 Failed, 6 Aborted).
fn phase(o: &DynamicObject) -> &str {
    let phase = &o.data["status"]["phase"];
    match phase.as_u64() {
        Some(3) => "Succeeded",
        Some(5) => "Failed",
        Some(6) => "Aborted",
        Some(_) => "",
        None => phase.as_str().unwrap_or(""),
    }
}

/// The workload's own workflows: Weft labels every child it creates with
/// its parent's name (`weft.dev/workflow`), the workloads never.
const TOP_LEVEL: &str = "!weft.dev/workflow";

/// Waits until all of `w`'s workflows have a terminal phase; an error if
/// one did not succeed, the controller exited, or its deadline passed.
async fn wait_done(
    peer: Peer,
    api: &kube::Api<DynamicObject>,
    w: &Workload,
    pid: u32,
    mut each: impl FnMut(u32),
) -> anyhow::Result<()> {
    let (n, limit) = (w.workflows, deadline(w));
    let deadline = Instant::now() + limit;
    let mut failed_lists = 0;
    loop {
        each(pid);
        anyhow::ensure!(
            bed::alive(pid),
            "{}'s controller exited during the run",
            peer.name()
        );
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: not done in {limit:?}",
            peer.name()
        );
        // Weft's children (labelled with their parent) are left out: a
        // tree's 100 children of 1,000 nodes each would make every list
        // tens of megabytes. A failed list is the bench's, not the
        // controller's: tried again (it failed once mid-run on a closed
        // connection).
        let list = match api.list(&ListParams::default().labels(TOP_LEVEL)).await {
            Ok(list) => {
                failed_lists = 0;
                list
            }
            Err(e) if failed_lists < 10 => {
                failed_lists += 1;
                eprintln!("[peers] listing the workflows failed ({e}); trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let done: Vec<_> = list
            .items
            .iter()
            .filter(|o| matches!(phase(o), "Succeeded" | "Failed" | "Error" | "Aborted"))
            .collect();
        if let Some(bad) = done.iter().find(|o| phase(o) != "Succeeded") {
            anyhow::bail!(
                "{} workflow {} ended {}: {}",
                peer.name(),
                bad.metadata.name.as_deref().unwrap_or(""),
                phase(bad),
                bad.data["status"]["message"]
            );
        }
        if done.len() == n {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The size as JSON of the largest workflow object in the namespace.
async fn largest(api: &kube::Api<DynamicObject>) -> anyhow::Result<usize> {
    let all = api.list(&ListParams::default()).await?;
    Ok(all
        .items
        .iter()
        .map(|o| serde_json::to_vec(o).map_or(0, |b| b.len()))
        .max()
        .unwrap_or(0))
}

/// Error-level lines of the controller's log (Argo's slog text says
/// `level=ERROR`, older releases `level=error`; Weft's tracing ` ERROR `;
/// flytepropeller's JSON `"level":"error"`).
fn error_lines(peer: Peer, log: &str) -> usize {
    log.lines()
        .filter(|l| match peer {
            Peer::Weft => l.contains(" ERROR "),
            Peer::Argo => l.to_ascii_lowercase().contains("level=error"),
            Peer::Flyte => l.contains(r#""level":"error""#),
        })
        .count()
}
