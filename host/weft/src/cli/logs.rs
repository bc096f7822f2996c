//! `weft logs`: the logs of a Workflow's task pods, as `argo logs` shows
//! them: every line prefixed with the node it came from, pods in the order
//! the DAG created them; with `-f`, followed live until the Workflow ends.
//! Nodes whose pods are gone (pod GC) are served from their archived logs
//! (`archiveLogs`) through the admin API, with or without `-f`.
//!
//! Pods are found by the labels the host puts on every resource of a task
//! (`weft.dev/workflow`, `weft.dev/node`, `weft.dev/attempt`: see
//! [`weft_plugin::TaskContext::for_attempt`]), so any plugin that makes
//! pods with them is covered, not only the pod plugin. An array item's pod
//! carries the node label `<id>-<index>`; the Workflow's spec says which
//! ids are arrays, so the prefix can read `train[2]` instead.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::pin::pin;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Args;
use futures::{AsyncBufRead, AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;
use weft_plugin::plugin::{LABEL_ATTEMPT, LABEL_NODE, LABEL_WORKFLOW};

use crate::api::Workflow;

/// Arguments of `weft logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The Workflow.
    pub name: String,
    /// Only this node's pods (every item of an array node, every attempt).
    #[arg(long, value_name = "ID")]
    pub node: Option<String>,
    /// Stream the logs, including pods started later, until the Workflow
    /// has ended and every stream with it.
    #[arg(short, long)]
    pub follow: bool,
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
    /// The admin API, asked for the archived logs (`archiveLogs`) of pods
    /// that are gone.
    #[command(flatten)]
    pub admin: super::cp::AdminClientArgs,
}

/// Run `weft logs`.
pub fn logs(args: LogsArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = args.cluster.client().await?;
        let ns = &args.cluster.namespace;
        let workflows: Api<Workflow> = Api::namespaced(client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(client, ns);
        let Some(wf) = workflows.get_opt(&args.name).await? else {
            anyhow::bail!("workflow {} not found in namespace {ns}", args.name);
        };
        let dag = Dag::of(&wf);
        if let Some(id) = &args.node {
            dag.check_node(&args.name, id)?;
        }
        let selector = dag.selector(&args.name, args.node.as_deref());
        match args.follow {
            false => {
                let shown = print_all(&pods, &dag, &selector, args.node.as_deref()).await?;
                print_archived(&args, &wf, &shown).await?;
            }
            true => {
                // Pods already gone (pod GC, an earlier attempt): their
                // archived logs first; the pods still there are followed.
                let present = pods.list(&ListParams::default().labels(&selector)).await?;
                let present = present.items.iter().map(|p| p.name_any()).collect();
                print_archived(&args, &wf, &present).await?;
                follow(
                    workflows,
                    pods,
                    &args.name,
                    dag,
                    selector,
                    args.node.clone(),
                )
                .await?
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The label value the host gives `value` (the same for a Workflow's name
/// and a node id). The host's own function is private to weft-plugin;
/// `for_attempt` is its public door, so the two can never disagree.
fn label_of(value: &str) -> String {
    let ctx =
        weft_plugin::TaskContext::for_attempt(value, "", "", "", 0, "", Value::Null, Value::Null);
    ctx.labels[LABEL_WORKFLOW].clone()
}

/// What the Workflow's DAG says about its pods: which node a node label
/// names, and the order the DAG starts nodes in (pods created in the same
/// second, which `creationTimestamp` cannot order, are put in DAG order).
#[derive(Debug, Default, Clone)]
struct Dag {
    /// Node label → node id, for every node of the spec and the status.
    by_label: HashMap<String, String>,
    /// Array node id → items known so far (from the status).
    arrays: BTreeMap<String, usize>,
    /// Node id → its place in a topological order (spec order among
    /// equals): a node always comes after those it depends on.
    rank: HashMap<String, usize>,
}

impl Dag {
    fn of(wf: &Workflow) -> Dag {
        let status = wf.status.as_ref();
        // A template launch has no nodes of its own: it runs the spec
        // resolved when it started.
        let spec = status
            .and_then(|s| s.resolved_spec.as_deref())
            .unwrap_or(&wf.spec.spec);
        let mut dag = Dag::default();
        for node in &spec.nodes {
            dag.by_label.insert(label_of(&node.id), node.id.clone());
            if node.array.is_some() {
                dag.arrays.insert(node.id.clone(), 0);
            }
        }
        for (id, node) in status.map(|s| &s.nodes).into_iter().flatten() {
            dag.by_label
                .entry(label_of(id))
                .or_insert_with(|| id.clone());
            if !node.items.is_empty() {
                dag.arrays.insert(id.clone(), node.items.len());
            }
        }
        // Kahn's algorithm, seeded in spec order.
        let ids: HashSet<&str> = spec.nodes.iter().map(|n| n.id.as_str()).collect();
        let mut waiting: HashMap<&str, usize> = HashMap::new();
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for node in &spec.nodes {
            let deps = node.depends_on.iter().filter(|d| ids.contains(d.as_str()));
            for d in deps {
                *waiting.entry(node.id.as_str()).or_default() += 1;
                children.entry(d.as_str()).or_default().push(&node.id);
            }
        }
        let mut ready: VecDeque<&str> = spec
            .nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| !waiting.contains_key(id))
            .collect();
        while let Some(id) = ready.pop_front() {
            let next = dag.rank.len();
            dag.rank.insert(id.to_string(), next);
            for child in children.get(id).into_iter().flatten() {
                let left = waiting.get_mut(child).expect("counted");
                *left -= 1;
                if *left == 0 {
                    ready.push_back(child);
                }
            }
        }
        dag
    }

    /// Refuses a `--node` the Workflow does not have (when it knows its
    /// nodes: a template launch that has not started does not yet).
    fn check_node(&self, workflow: &str, id: &str) -> anyhow::Result<()> {
        if self.by_label.is_empty() || self.by_label.values().any(|n| n == id) {
            return Ok(());
        }
        let mut ids: Vec<&str> = self.by_label.values().map(String::as_str).collect();
        ids.sort();
        anyhow::bail!(
            "workflow {workflow} has no node {id} (its nodes: {})",
            ids.join(", ")
        )
    }

    /// The pods' label selector: the Workflow's, and the node's unless it
    /// is an array (its items' labels are `<id>-<index>`, matched by
    /// [`Dag::wanted`] instead).
    fn selector(&self, workflow: &str, node: Option<&str>) -> String {
        let mut selector = format!("{LABEL_WORKFLOW}={}", label_of(workflow));
        if let Some(id) = node.filter(|id| !self.arrays.contains_key(*id)) {
            selector.push_str(&format!(",{LABEL_NODE}={}", label_of(id)));
        }
        selector
    }

    /// The node id and array index a pod's node label stands for. A node
    /// whose id is the label wins over an array item that would read the
    /// same; a label the DAG does not explain is shown as it is.
    fn identify(&self, label: &str) -> (String, Option<usize>) {
        if let Some(id) = self.by_label.get(label) {
            return (id.clone(), None);
        }
        for (id, &known) in &self.arrays {
            let index = label
                .strip_prefix(id.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .and_then(|i| i.parse::<usize>().ok());
            if let Some(i) = index.filter(|i| label_of(&format!("{id}-{i}")) == label) {
                return (id.clone(), Some(i));
            }
            // A long id's item labels are cut and hashed: try the items
            // the status knows.
            if let Some(i) = (0..known).find(|i| label_of(&format!("{id}-{i}")) == label) {
                return (id.clone(), Some(i));
            }
        }
        (label.to_string(), None)
    }

    /// Where a pod stands among the Workflow's pods, and its line prefix.
    fn describe(&self, pod: &Pod) -> PodLog {
        let labels = pod.labels();
        let label = labels
            .get(LABEL_NODE)
            .cloned()
            .unwrap_or_else(|| pod.name_any());
        let (node, item) = self.identify(&label);
        let attempt: u32 = labels
            .get(LABEL_ATTEMPT)
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        let mut prefix = node.clone();
        if let Some(i) = item {
            prefix.push_str(&format!("[{i}]"));
        }
        // Attempts are counted from 1 here, as `status.nodes.*.attempts`
        // counts them; the label (and pod name) count from 0.
        if attempt > 0 {
            prefix.push_str(&format!(" (attempt {})", attempt + 1));
        }
        PodLog {
            name: pod.name_any(),
            created: super::list::created(pod),
            rank: self.rank.get(&node).copied().unwrap_or(usize::MAX),
            item,
            attempt,
            container: main_container(pod),
            node,
            label,
            prefix,
        }
    }

    /// Whether a pod belongs to `--node` (all pods without it).
    fn wanted(&self, log: &PodLog, node: Option<&str>) -> bool {
        node.is_none_or(|id| log.node == id || log.label == label_of(id))
    }
}

/// One pod whose log is shown.
#[derive(Debug, Clone, PartialEq)]
struct PodLog {
    name: String,
    created: Option<SystemTime>,
    rank: usize,
    item: Option<usize>,
    attempt: u32,
    /// The container shown: the task's main one.
    container: Option<String>,
    /// The node id it ran.
    node: String,
    /// Its node label as found.
    label: String,
    /// What its lines start with (`train`, `train[2] (attempt 2)`).
    prefix: String,
}

impl PodLog {
    /// Creation order: the time, then the DAG, the item and the attempt.
    fn order(&self) -> impl Ord + '_ {
        (
            self.created,
            self.rank,
            self.item,
            self.attempt,
            self.name.as_str(),
        )
    }
}

/// The container whose log is the task's: the pod plugin names it `main`;
/// another plugin's pod shows its first container. A pod of several
/// containers must name one, or the API server refuses the request.
fn main_container(pod: &Pod) -> Option<String> {
    let names: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| c.name.as_str())
        .collect();
    names
        .iter()
        .find(|n| **n == "main")
        .or(names.first())
        .map(|n| n.to_string())
}

/// Prints every line of a log, prefixed, as it arrives, after the first
/// `skip` bytes (shown already, by a stream that ended early); returns the
/// bytes of the log read in all. Bytes that are not UTF-8 are shown
/// replaced rather than ending the log.
async fn print_lines(prefix: &str, log: impl AsyncBufRead, skip: u64) -> anyhow::Result<u64> {
    let mut log = pin!(log);
    let mut line = Vec::new();
    let mut read = 0u64;
    loop {
        line.clear();
        let n = log.read_until(b'\n', &mut line).await? as u64;
        if n == 0 {
            return Ok(read);
        }
        read += n;
        if read <= skip {
            continue;
        }
        let new = &line[(n - (read - skip).min(n)) as usize..];
        let text = String::from_utf8_lossy(new);
        super::out(&format!(
            "{prefix}: {}",
            text.trim_end_matches(['\n', '\r'])
        ))?;
    }
}

/// Whether the API server refused a log because the container has not
/// started (kube-apiserver answers 400 `... is waiting to start`), or the
/// pod is gone.
fn no_log_yet(e: &kube::Error) -> Option<&str> {
    match e {
        kube::Error::Api(s) if s.code == 400 || s.code == 404 => Some(&s.message),
        _ => None,
    }
}

/// The nodes whose pods are gone (pod GC, TTL) but whose status names
/// one: their archived logs, through the admin API (which reads the
/// artifact repository; this machine has no credentials for it). Pods
/// already shown (`shown`, by name) are skipped.
async fn print_archived(
    args: &LogsArgs,
    wf: &Workflow,
    shown: &HashSet<String>,
) -> anyhow::Result<()> {
    let Some(status) = &wf.status else {
        return Ok(());
    };
    let gone: Vec<(&String, &str)> = status
        .nodes
        .iter()
        .filter(|(id, _)| args.node.as_ref().is_none_or(|n| n == *id))
        .filter_map(|(id, st)| st.resource.as_ref().map(|r| (id, r)))
        .filter(|(_, r)| r.kind == "Pod" && !shown.contains(&r.name))
        .map(|(id, r)| (id, r.name.as_str()))
        .collect();
    if gone.is_empty() {
        return Ok(());
    }
    let mut admin = match args.admin.connect().await {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "pods of {} are gone; their archived logs come through the admin API: {e:#}",
                args.name
            );
            return Ok(());
        }
    };
    for (node, pod) in gone {
        let req = crate::admin::pb::StreamNodeLogsRequest {
            id: Some(crate::admin::pb::ExecutionId {
                namespace: args.cluster.namespace.clone(),
                name: args.name.clone(),
                ..Default::default()
            }),
            node_id: node.clone(),
            ..Default::default()
        };
        match admin.stream_node_logs(req).await {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                while let Some(chunk) = stream.next().await {
                    let text = chunk
                        .map_err(|s| anyhow::anyhow!("node {node}: {}", s.message()))?
                        .text;
                    super::out(&format!("{node}: {}", text.trim_end_matches(['\n', '\r'])))?;
                }
            }
            Err(s) => eprintln!("{node}: pod {pod} is gone: {}", s.message()),
        }
    }
    Ok(())
}

/// Without `-f`: each pod's whole log once, pods in creation order; the
/// names of the pods shown.
async fn print_all(
    pods: &Api<Pod>,
    dag: &Dag,
    selector: &str,
    node: Option<&str>,
) -> anyhow::Result<HashSet<String>> {
    let found = pods.list(&ListParams::default().labels(selector)).await?;
    let mut logs: Vec<PodLog> = found
        .items
        .iter()
        .map(|p| dag.describe(p))
        .filter(|l| dag.wanted(l, node))
        .collect();
    logs.sort_by(|a, b| a.order().cmp(&b.order()));
    if logs.is_empty() {
        eprintln!("No pods found for {selector}.");
    }
    let shown = logs.iter().map(|l| l.name.clone()).collect();
    for log in logs {
        let params = LogParams {
            container: log.container.clone(),
            ..LogParams::default()
        };
        match pods.log_stream(&log.name, &params).await {
            Ok(stream) => _ = print_lines(&log.prefix, stream, 0).await?,
            Err(e) => match no_log_yet(&e) {
                Some(why) => eprintln!("{}: pod {} has no log yet: {why}", log.prefix, log.name),
                None => return Err(e.into()),
            },
        }
    }
    Ok(shown)
}

/// What following knows of the Workflow, from one watch: its DAG as last
/// seen (array items appear as an array starts) and whether it has ended.
#[derive(Debug, Clone, Default)]
struct Progress {
    dag: Dag,
    ended: bool,
}

/// With `-f`: a stream per pod, pods that appear later included, until
/// the Workflow is done and every stream has ended.
async fn follow(
    workflows: Api<Workflow>,
    pods: Api<Pod>,
    name: &str,
    dag: Dag,
    selector: String,
    node: Option<String>,
) -> anyhow::Result<()> {
    let (tx, progress) = watch::channel(Progress { dag, ended: false });
    let mut changes = watcher::watch_object(workflows, name)
        .default_backoff()
        .boxed();
    let wf_name = name.to_string();
    tokio::spawn(async move {
        while let Some(event) = changes.next().await {
            match event {
                Ok(Some(wf)) => {
                    let ended = wf.status.as_ref().is_some_and(|s| s.phase.is_terminal());
                    tx.send_replace(Progress {
                        dag: Dag::of(&wf),
                        ended,
                    });
                    if ended {
                        return;
                    }
                }
                Ok(None) => {
                    eprintln!("workflow {wf_name} was deleted");
                    tx.send_modify(|p| p.ended = true);
                    return;
                }
                // The backoff retries; a lasting failure shows with -v.
                Err(e) => tracing::debug!("watching workflow {wf_name}: {e}"),
            }
        }
    });

    let mut streams = tokio::task::JoinSet::new();
    let mut seen = HashSet::new();
    // Starts following the pods not followed yet, in creation order.
    let mut start = |found: Vec<Pod>, streams: &mut tokio::task::JoinSet<_>| {
        let now = progress.borrow().clone();
        let mut logs: Vec<PodLog> = found
            .iter()
            .filter(|p| seen.insert(p.uid().unwrap_or_else(|| p.name_any())))
            .map(|p| now.dag.describe(p))
            .filter(|l| now.dag.wanted(l, node.as_deref()))
            .collect();
        logs.sort_by(|a, b| a.order().cmp(&b.order()));
        for log in logs {
            streams.spawn(follow_pod(pods.clone(), log, progress.clone()));
        }
    };

    let config = watcher::Config::default().labels(&selector);
    let mut events = watcher::watcher(pods.clone(), config)
        .default_backoff()
        .boxed();
    // The first listing is gathered, so the pods already there start in
    // creation order.
    let mut initial = Vec::new();
    let mut ended = progress.clone();
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(watcher::Event::InitApply(pod))) => initial.push(pod),
                Some(Ok(watcher::Event::InitDone)) => start(std::mem::take(&mut initial), &mut streams),
                Some(Ok(watcher::Event::Apply(pod))) => start(vec![pod], &mut streams),
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::debug!("watching pods {selector}: {e}"),
                None => break,
            },
            _ = ended.wait_for(|p| p.ended) => {
                // The pods the watch has not shown yet: every pod exists
                // before the Workflow can end.
                let last = pods.list(&ListParams::default().labels(&selector)).await?;
                start(last.items, &mut streams);
                break;
            }
        }
    }
    drop(events);
    while let Some(result) = streams.join_next().await {
        result??;
    }
    Ok(())
}

/// Follows one pod's log to its end: waits while its container has not
/// started, and gives up on that once the Workflow has ended (the pod
/// never ran, or was deleted).
///
/// A stream may end before its container does (the dev cluster's, opened
/// as the container starts; a real API server's, when its connection to
/// the kubelet drops), so an ended stream is reopened, past what was
/// shown, until the container is done; then it is read once more without
/// `follow`, for what a stream cut short may have missed.
async fn follow_pod(
    pods: Api<Pod>,
    log: PodLog,
    mut progress: watch::Receiver<Progress>,
) -> anyhow::Result<()> {
    let whole = LogParams {
        container: log.container.clone(),
        ..LogParams::default()
    };
    let params = LogParams {
        follow: true,
        ..whole.clone()
    };
    let mut shown = 0;
    loop {
        let error = match pods.log_stream(&log.name, &params).await {
            Ok(stream) => {
                shown = print_lines(&log.prefix, stream, shown).await?;
                let ended = progress.borrow_and_update().ended;
                if ended || !writing(&pods, &log).await? {
                    if let Ok(rest) = pods.log_stream(&log.name, &whole).await {
                        print_lines(&log.prefix, rest, shown).await?;
                    }
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => e,
        };
        let Some(why) = no_log_yet(&error) else {
            return Err(anyhow::Error::new(error).context(format!("pod {}", log.name)));
        };
        if progress.borrow_and_update().ended {
            eprintln!("{}: pod {} has no log: {why}", log.prefix, log.name);
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = progress.changed() => {}
        }
    }
}

/// Whether the followed container may still write to its log: not
/// terminated, its pod neither finished nor gone.
async fn writing(pods: &Api<Pod>, log: &PodLog) -> anyhow::Result<bool> {
    let Some(pod) = pods.get_opt(&log.name).await? else {
        return Ok(false);
    };
    let status = pod.status.unwrap_or_default();
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return Ok(false);
    }
    let terminated = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| log.container.as_ref().is_none_or(|name| *name == c.name))
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.terminated.is_some());
    Ok(!terminated)
}

#[cfg(test)]
mod tests;
