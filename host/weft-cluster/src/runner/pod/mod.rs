//! One pod's run on a node: the kubelet's part that Weft plays, for the dev
//! cluster's runner and for `weft node` on any API server alike.
//!
//! Init containers run one after another, then the containers side by side,
//! each as `command + args` in its own process group. Images are not pulled
//! (an Event on the pod says so), so the command must exist on this
//! machine. Because processes cannot see the container's filesystem, paths
//! the pod spec names are mapped into a per-pod directory: the container's
//! `terminationMessagePath` and the mount paths of `emptyDir` volumes are
//! rewritten wherever they appear in `command`/`args` (and exported as
//! `WEFT_TERMINATION_MESSAGE_PATH`).
//!
//! Simulation (like kwok): with the annotation `weft.dev/simulate: "true"`
//! (or [`crate::RunnerConfig::simulate_all`]) no process runs; the pod turns
//! Running, then after `weft.dev/simulate-duration` (default `1s`) ends with
//! `weft.dev/simulate-exit-code` (default 0) and
//! `weft.dev/simulate-termination-message`.
//!
//! What a run reads and writes goes through [`PodHost`]: the dev cluster's
//! store in-process, or an API server through a client. So the two nodes
//! cannot drift apart in how a pod runs.

// How a run goes: one module per part of the kubelet's job.
mod env;
mod lifecycle;
mod process;
mod status;
mod supervise;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::RunnerConfig;

/// Annotation that turns on simulation for one pod.
pub const SIMULATE: &str = "weft.dev/simulate";
/// How long a simulated pod runs (`500ms`, `2s`, `1m`).
pub const SIMULATE_DURATION: &str = "weft.dev/simulate-duration";
/// Exit code of a simulated pod's containers.
pub const SIMULATE_EXIT_CODE: &str = "weft.dev/simulate-exit-code";
/// Termination message of a simulated pod's containers.
pub const SIMULATE_MESSAGE: &str = "weft.dev/simulate-termination-message";

/// The API server a node serves, as a pod's run needs it. Objects are JSON
/// as the API returns them (secrets' `data` base64).
pub trait PodHost: Send + Sync + 'static {
    /// This node's name (`spec.nodeName` of the pods it runs).
    fn node_name(&self) -> &str;
    /// Where pods' directories (logs, termination messages, volumes) go.
    fn data_dir(&self) -> &Path;
    /// `KUBERNETES_SERVICE_PORT` for containers (the host is 127.0.0.1).
    fn service_port(&self) -> String;
    /// Whether unbound pods are this node's to bind (the dev cluster has no
    /// scheduler; a real one does).
    fn binds(&self) -> bool;
    /// Who runs the processes, for Events and messages ("the weft dev
    /// cluster", "weft node n1").
    fn describe(&self) -> String;
    /// Rewrites the pod (its spec, or its status when `status`) with `f`,
    /// unless it is gone or was replaced by one of another uid.
    fn modify<'a>(
        &'a self,
        pod: &'a Value,
        status: bool,
        f: Box<dyn FnOnce(&mut Value) + Send + 'a>,
    ) -> BoxFuture<'a, Option<Arc<Value>>>;
    /// Creates a core/v1 Event.
    fn create_event<'a>(&'a self, ns: &'a str, event: Value) -> BoxFuture<'a, ()>;
    /// A ConfigMap (`/configmaps`) or Secret (`/secrets`), if it exists.
    fn get<'a>(
        &'a self,
        gr: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Arc<Value>>>;
    /// Completes a deletion once the pod's processes are gone (the
    /// kubelet's final delete with grace 0).
    fn finish<'a>(&'a self, pod: &'a Value) -> BoxFuture<'a, ()>;
    /// Log files a container is still writing: `logs -f` follows these.
    fn live_logs(&self) -> &Mutex<HashSet<PathBuf>>;
}

#[derive(Debug, Clone)]
enum Update {
    Pod(Arc<Value>),
    Deleted,
    Shutdown,
}

struct PodHandle {
    updates: watch::Sender<Update>,
    task: JoinHandle<()>,
}

/// The pods a node runs, by uid: each change of a pod reaches its run.
pub struct Pods {
    host: Arc<dyn PodHost>,
    cfg: RunnerConfig,
    runs: HashMap<String, PodHandle>,
    /// Pods whose run ended, until they are deleted. A run writes its
    /// statuses faster than the watch delivers them, so an event showing
    /// the pod still Running can arrive after the run ended; starting a
    /// second run on it ran the container again and wrote the finished pod
    /// back to Running (it then counted against a pods quota again).
    ended: HashSet<String>,
}

impl Pods {
    /// No pod yet; `host` is the API server the node serves.
    pub fn new(host: Arc<dyn PodHost>, cfg: RunnerConfig) -> Self {
        Pods {
            host,
            cfg,
            runs: HashMap::new(),
            ended: HashSet::new(),
        }
    }

    /// The pod as it is now (`deleted`: its last state before it went).
    pub fn update(&mut self, pod: &Arc<Value>, deleted: bool) {
        let ended = &mut self.ended;
        self.runs.retain(|uid, h| {
            let done = h.task.is_finished();
            if done {
                ended.insert(uid.clone());
            }
            !done
        });
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
        if deleted {
            self.ended.remove(&uid);
        }
        let update = if deleted {
            Update::Deleted
        } else {
            Update::Pod(pod.clone())
        };
        if let Some(h) = self.runs.get(&uid) {
            let _ = h.updates.send(update);
            return;
        }
        if deleted {
            return;
        }
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
        let ours = node == self.host.node_name() || (node.is_empty() && self.host.binds());
        if !ours {
            return;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            if pod["metadata"]["deletionTimestamp"].is_string() {
                // Nothing runs: finish the deletion.
                let (host, pod) = (self.host.clone(), pod.clone());
                tokio::spawn(async move { host.finish(&pod).await });
            }
            return;
        }
        if self.ended.contains(&uid) {
            return;
        }
        let (tx, rx) = watch::channel(Update::Pod(pod.clone()));
        let run = PodRun::new(self.host.clone(), self.cfg.clone(), pod.clone(), rx);
        let task = tokio::spawn(run.run());
        self.runs.insert(uid, PodHandle { updates: tx, task });
    }

    /// Stops every run: their processes are killed.
    pub async fn shutdown(self) {
        for h in self.runs.values() {
            let _ = h.updates.send(Update::Shutdown);
        }
        for (_, h) in self.runs {
            let _ = tokio::time::timeout(Duration::from_secs(5), h.task).await;
        }
    }
}

/// A pod's directory: `pods/NS_NAME_UID` (a namesake gets a new one).
pub fn pod_dir(data_dir: &Path, pod: &Value) -> PathBuf {
    data_dir.join("pods").join(format!(
        "{}_{}_{}",
        pod["metadata"]["namespace"].as_str().unwrap_or(""),
        pod["metadata"]["name"].as_str().unwrap_or(""),
        pod["metadata"]["uid"].as_str().unwrap_or("")
    ))
}

/// Where a container instance's log goes; `restart` counts from 0.
pub fn log_path(dir: &Path, container: &str, restart: u64) -> PathBuf {
    dir.join("logs").join(format!("{container}-{restart}.log"))
}

fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    if let Some(sec) = s.strip_suffix('s') {
        return sec.parse::<f64>().ok().map(Duration::from_secs_f64);
    }
    if let Some(m) = s.strip_suffix('m') {
        return m
            .parse::<f64>()
            .ok()
            .map(|m| Duration::from_secs_f64(m * 60.0));
    }
    s.parse::<f64>().ok().map(Duration::from_secs_f64)
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Waiting(String, String),
    Running { pid: i32, started: String },
    Terminated(Value),
}

struct Ctr {
    spec: Value,
    name: String,
    init: bool,
    restarts: u64,
    state: State,
    last: Value,
    backoff: Duration,
    /// Finished for good (no restart coming).
    done: bool,
}

enum Internal {
    Exited {
        idx: usize,
        code: i32,
        message: String,
        started: String,
    },
    Start(usize),
}

struct PodRun {
    host: Arc<dyn PodHost>,
    cfg: RunnerConfig,
    pod: Arc<Value>,
    updates: watch::Receiver<Update>,
    dir: PathBuf,
    ctrs: Vec<Ctr>,
    tx: mpsc::UnboundedSender<Internal>,
    rx: mpsc::UnboundedReceiver<Internal>,
    phase: String,
    reason: Option<(String, String)>,
    start_time: String,
    conditions: HashMap<&'static str, (bool, String, Option<String>)>,
}

/// Kubernetes' `$(VAR)` expansion in command, args and env values;
/// `$$` escapes, unknown references stay as written.
fn expand_vars(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        if let Some(t) = tail.strip_prefix('$') {
            out.push('$');
            rest = t;
        } else if let Some(t) = tail.strip_prefix('(')
            && let Some(end) = t.find(')')
        {
            let name = &t[..end];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &t[end + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces each `from` of `subst` (longest first) where it stands as a
/// path of its own (`/data` in `cat /data/x` but not in `/srv/data` or the
/// second half of `/data/data`), in one pass: what one replacement wrote
/// is never matched again (a pod's directory may itself start with
/// another mount path, e.g. `/work`).
fn replace_paths(s: &str, subst: &[(String, String)]) -> String {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    'at: while let Some(c) = s[i..].chars().next() {
        let before_ok = s[..i].chars().next_back().is_none_or(|c| !part(c));
        for (from, to) in subst.iter().filter(|_| before_ok) {
            let end = i + from.len();
            let after_ok = || s[end..].chars().next().is_none_or(|c| c == '/' || !part(c));
            if s[i..].starts_with(from.as_str()) && after_ok() {
                out.push_str(to);
                i = end;
                continue 'at;
            }
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_expansion() {
        let env = vec![("A".to_string(), "x".to_string())];
        assert_eq!(expand_vars("$(A)-$(B)-$$(A)", &env), "x-$(B)-$(A)");
    }

    #[test]
    fn path_rewrites() {
        let one = |s: &str, from: &str, to: &str| replace_paths(s, &[(from.into(), to.into())]);
        assert_eq!(one("cat /data/data", "/data", "/v"), "cat /v/data");
        assert_eq!(
            one(
                "echo x > /dev/termination-log",
                "/dev/termination-log",
                "/p/t"
            ),
            "echo x > /p/t"
        );
        assert_eq!(one("/srv/data", "/data", "/v"), "/srv/data");
        // One pass: a rewritten path is not rewritten again, even when the
        // pod's directory itself starts with another mount path.
        let subst = [
            (
                "/weft/io".to_string(),
                "/work/node/pods/p/volumes/weft-io".to_string(),
            ),
            (
                "/work".to_string(),
                "/work/node/pods/p/volumes/work".to_string(),
            ),
        ];
        assert_eq!(
            replace_paths("/weft/io/bin/weft /work/in", &subst),
            "/work/node/pods/p/volumes/weft-io/bin/weft /work/node/pods/p/volumes/work/in"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
    }
}
