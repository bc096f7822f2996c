//! Workflows whose pods record their runs: each appends its start and
//! end (nanoseconds) to a file the test reads, so overlap and order are
//! measured where the work happens (pods run as local processes on both
//! beds), not inferred from phases. Used by the synchronization tests.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::Api;
use weft::api::Workflow;
use weft_dag::{WorkflowPhase, WorkflowStatus};

use super::cluster::Bed;
use super::kubectl;

/// A pod task that records its run in `log` as `start|end <who> <ns>`.
pub fn recorded(who: &str, log: &Path, secs: f64) -> String {
    let log = log.display();
    format!(
        "{{type: pod, config: {{image: busybox, command: [sh, -c, 'echo start {who} $(date +%s%N) >> {log}; sleep {secs}; echo end {who} $(date +%s%N) >> {log}']}}}}"
    )
}

/// The intervals of the runs recorded in `log`, by who.
pub fn intervals(log: &Path) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut starts = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [what, who, at] = parts[..] else {
            continue;
        };
        let at: u128 = at.parse().unwrap();
        match what {
            "start" => {
                starts.insert(who.to_string(), at);
            }
            _ => out.push((who.to_string(), starts[who], at)),
        }
    }
    out
}

/// The most runs at once.
pub fn most_at_once(runs: &[(String, u128, u128)]) -> usize {
    let mut edges: Vec<(u128, i32)> = runs
        .iter()
        .flat_map(|(_, s, e)| [(*s, 1), (*e, -1)])
        .collect();
    // An end at the same instant as a start comes first.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

pub async fn create(bed: &Bed, yaml: &str) {
    let out = kubectl(&bed.kubeconfig, &["create", "-f", "-"], Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn workflow(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    )
}

pub async fn wait_all(api: &Api<Workflow>, names: &[String], secs: u64) -> Vec<Workflow> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut done = Vec::new();
        for n in names {
            let wf = api.get(n).await.unwrap();
            if wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
                done.push(wf);
            }
        }
        if done.len() == names.len() {
            return done;
        }
        if Instant::now() > deadline {
            let mut open = Vec::new();
            for n in names {
                let wf = api.get(n).await.unwrap();
                if !wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
                    open.push(serde_json::to_string(&wf.status).unwrap());
                }
            }
            panic!("only {} of {} finished: {open:?}", done.len(), names.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for Workflow `name` to finish and asserts it succeeded (the
/// message says why not): its status.
#[allow(
    dead_code,
    reason = "not every test file that shares this module uses it"
)]
pub async fn succeeded(api: &Api<Workflow>, name: &str, secs: u64) -> WorkflowStatus {
    let wf = wait_all(api, &[name.to_string()], secs).await.remove(0);
    let status = wf.status.unwrap_or_default();
    assert_eq!(
        status.phase,
        WorkflowPhase::Succeeded,
        "{name}: {:?}",
        status.message
    );
    status
}

/// Every status the Workflows `names` had, from a watch started before
/// they were created, until all of them finished.
pub fn statuses(
    api: Api<Workflow>,
    names: &[&str],
) -> tokio::task::JoinHandle<std::collections::HashMap<String, Vec<weft_dag::WorkflowStatus>>> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    tokio::spawn(async move {
        let mut seen: std::collections::HashMap<String, Vec<weft_dag::WorkflowStatus>> =
            Default::default();
        let stream = watcher(api, watcher::Config::default()).applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(wf)) = stream.next().await {
            let name = wf.metadata.name.clone().unwrap_or_default();
            let (true, Some(status)) = (names.contains(&name), wf.status) else {
                continue;
            };
            let list = seen.entry(name).or_default();
            if list.last() != Some(&status) {
                list.push(status);
            }
            let done = |n: &String| {
                seen.get(n)
                    .and_then(|l| l.last())
                    .is_some_and(|s| s.phase.is_terminal())
            };
            if names.iter().all(done) {
                break;
            }
        }
        seen
    })
}
