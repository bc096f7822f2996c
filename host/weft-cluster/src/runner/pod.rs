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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::RunnerConfig;
use crate::meta;

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
}

impl Pods {
    /// No pod yet; `host` is the API server the node serves.
    pub fn new(host: Arc<dyn PodHost>, cfg: RunnerConfig) -> Self {
        Pods {
            host,
            cfg,
            runs: HashMap::new(),
        }
    }

    /// The pod as it is now (`deleted`: its last state before it went).
    pub fn update(&mut self, pod: &Arc<Value>, deleted: bool) {
        self.runs.retain(|_, h| !h.task.is_finished());
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
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

impl PodRun {
    fn new(
        host: Arc<dyn PodHost>,
        cfg: RunnerConfig,
        pod: Arc<Value>,
        updates: watch::Receiver<Update>,
    ) -> Self {
        let dir = pod_dir(host.data_dir(), &pod);
        let mut ctrs = Vec::new();
        for (list, init) in [("initContainers", true), ("containers", false)] {
            for c in pod["spec"][list].as_array().into_iter().flatten() {
                ctrs.push(Ctr {
                    spec: c.clone(),
                    name: c["name"].as_str().unwrap_or("").to_string(),
                    init,
                    restarts: 0,
                    state: State::Waiting(
                        if init {
                            "PodInitializing"
                        } else {
                            "ContainerCreating"
                        }
                        .into(),
                        String::new(),
                    ),
                    last: json!({}),
                    backoff: cfg.restart_backoff,
                    done: false,
                });
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        PodRun {
            start_time: pod["status"]["startTime"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(meta::now),
            host,
            cfg,
            pod,
            updates,
            dir,
            ctrs,
            tx,
            rx,
            phase: "Pending".into(),
            reason: None,
            conditions: HashMap::new(),
        }
    }

    fn ns(&self) -> String {
        self.pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
    fn name(&self) -> String {
        self.pod["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
    fn restart_policy(&self) -> String {
        self.pod["spec"]["restartPolicy"]
            .as_str()
            .unwrap_or("Always")
            .to_string()
    }
    fn annotation(&self, k: &str) -> Option<String> {
        self.pod["metadata"]["annotations"][k]
            .as_str()
            .map(String::from)
    }

    async fn run(mut self) {
        let was_running = self.pod["status"]["phase"].as_str() == Some("Running");
        if let Err(e) = std::fs::create_dir_all(self.dir.join("logs")) {
            tracing::warn!("cannot create pod directory {}: {e}", self.dir.display());
        }
        if self.pod["metadata"]["deletionTimestamp"].is_string() {
            self.host.finish(&self.pod).await;
            return;
        }
        self.bind().await;
        self.set_cond("PodScheduled", true, None);
        if was_running && self.restart_policy() == "Never" {
            // The processes died with the previous dev cluster process.
            for c in &mut self.ctrs {
                c.state = State::Terminated(json!({"exitCode": 137, "reason": "Error",
                    "message": format!("{} restarted while the container was running", self.host.describe()),
                    "finishedAt": meta::now()}));
            }
            self.phase = "Failed".into();
            self.write_status().await;
            self.wait_for_deletion().await;
            return;
        }
        for c in self.ctrs.clone_specs() {
            let image = c["image"].as_str().unwrap_or("");
            let name = c["name"].as_str().unwrap_or("");
            self.event(
                "ImageNotPulled",
                &format!("Image \"{image}\" was not pulled: {} runs container \"{name}\"'s command as a local process on this machine", self.host.describe()),
                Some(name),
            )
            .await;
        }
        let simulate =
            self.cfg.simulate_all || self.annotation(SIMULATE).as_deref() == Some("true");
        if simulate {
            self.simulate().await;
            return;
        }
        self.run_processes().await;
    }

    /// The runner is also the scheduler: unbound pods land on this node.
    async fn bind(&mut self) {
        if self.pod["spec"]["nodeName"]
            .as_str()
            .unwrap_or("")
            .is_empty()
        {
            let node = self.host.node_name().to_string();
            if let Some(p) = self
                .modify(false, |p| p["spec"]["nodeName"] = node.clone().into())
                .await
            {
                self.pod = p;
            }
            self.event(
                "Scheduled",
                &format!(
                    "Successfully assigned {}/{} to {}",
                    self.ns(),
                    self.name(),
                    self.host.node_name()
                ),
                None,
            )
            .await;
        }
    }

    /// Rewrites the pod (spec when `status` is false) as the node.
    async fn modify(&self, status: bool, f: impl FnOnce(&mut Value) + Send) -> Option<Arc<Value>> {
        self.host.modify(&self.pod, status, Box::new(f)).await
    }

    async fn event(&self, reason: &str, message: &str, container: Option<&str>) {
        let now = meta::now();
        let node = self.host.node_name();
        let mut involved = json!({"kind": "Pod", "apiVersion": "v1", "namespace": self.ns(),
            "name": self.name(), "uid": self.pod["metadata"]["uid"]});
        if let Some(c) = container {
            involved["fieldPath"] = format!("spec.containers{{{c}}}").into();
        }
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{}.", self.name()), "namespace": self.ns()},
            "involvedObject": involved,
            "reason": reason, "message": message, "type": "Normal",
            "source": {"component": "weft-runner", "host": node},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "reportingComponent": "weft-runner", "reportingInstance": node,
        });
        self.host.create_event(&self.ns(), ev).await;
    }

    fn set_cond(&mut self, t: &'static str, ok: bool, reason: Option<&str>) {
        let entry = self.conditions.entry(t).or_insert((!ok, meta::now(), None));
        if entry.0 != ok {
            *entry = (ok, meta::now(), reason.map(String::from));
        } else {
            entry.2 = reason.map(String::from);
        }
    }

    fn ctr_status(c: &Ctr) -> Value {
        let state = match &c.state {
            State::Waiting(r, m) => {
                let mut w = json!({"reason": r});
                if !m.is_empty() {
                    w["message"] = m.clone().into();
                }
                json!({"waiting": w})
            }
            State::Running { started, .. } => json!({"running": {"startedAt": started}}),
            State::Terminated(t) => json!({"terminated": t}),
        };
        let running = matches!(c.state, State::Running { .. });
        let mut s = json!({
            "name": c.name,
            "image": c.spec["image"],
            "imageID": "",
            "ready": running && !c.init,
            "started": running,
            "restartCount": c.restarts,
            "state": state,
            "lastState": c.last,
        });
        if let State::Running { pid, .. } = &c.state {
            s["containerID"] = format!("weft://{pid}").into();
        }
        s
    }

    async fn write_status(&mut self) {
        let all_running = self
            .ctrs
            .iter()
            .filter(|c| !c.init)
            .all(|c| matches!(c.state, State::Running { .. }));
        let inits_done = self.ctrs.iter().filter(|c| c.init).all(|c| c.done);
        let terminal = self.phase == "Succeeded" || self.phase == "Failed";
        self.set_cond("Initialized", inits_done, None);
        self.set_cond("PodReadyToStartContainers", true, None);
        let ready_reason = if terminal {
            Some("PodCompleted")
        } else if all_running {
            None
        } else {
            Some("ContainersNotReady")
        };
        self.set_cond("ContainersReady", all_running && !terminal, ready_reason);
        self.set_cond("Ready", all_running && !terminal, ready_reason);
        let mut conds = Vec::new();
        for t in [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ] {
            if let Some((ok, at, reason)) = self.conditions.get(t) {
                let mut c = json!({"type": t, "status": if *ok { "True" } else { "False" }, "lastTransitionTime": at, "lastProbeTime": null});
                if let Some(r) = reason {
                    c["reason"] = r.clone().into();
                }
                conds.push(c);
            }
        }
        let mut status = json!({
            "phase": self.phase,
            "conditions": conds,
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "qosClass": "BestEffort",
            "containerStatuses": self.ctrs.iter().filter(|c| !c.init).map(Self::ctr_status).collect::<Vec<_>>(),
        });
        let inits: Vec<Value> = self
            .ctrs
            .iter()
            .filter(|c| c.init)
            .map(Self::ctr_status)
            .collect();
        if !inits.is_empty() {
            status["initContainerStatuses"] = inits.into();
        }
        if let Some((r, m)) = &self.reason {
            status["reason"] = r.clone().into();
            status["message"] = m.clone().into();
        }
        if let Some(p) = self.modify(true, |p| p["status"] = status).await {
            self.pod = p;
        }
    }

    /// Waits until the pod is deleted (or the cluster stops), then finishes
    /// the deletion.
    async fn wait_for_deletion(&mut self) {
        loop {
            if self.updates.changed().await.is_err() {
                return;
            }
            let u = self.updates.borrow_and_update().clone();
            if self.settle(u).await {
                return;
            }
        }
    }

    /// An update while no process runs: a due deletion is finished; whether
    /// the run is over.
    async fn settle(&mut self, u: Update) -> bool {
        match u {
            Update::Pod(p) if p["metadata"]["deletionTimestamp"].is_string() => {
                self.host.finish(&p).await;
                true
            }
            Update::Pod(_) => false,
            Update::Deleted | Update::Shutdown => true,
        }
    }

    async fn simulate(&mut self) {
        let dur = self
            .annotation(SIMULATE_DURATION)
            .and_then(|d| parse_duration(&d))
            .unwrap_or(Duration::from_secs(1));
        let code: i32 = self
            .annotation(SIMULATE_EXIT_CODE)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let message = self.annotation(SIMULATE_MESSAGE).unwrap_or_default();
        let started = meta::now();
        for c in self.ctrs.iter_mut() {
            c.done = c.init;
            if c.init {
                c.state = State::Terminated(
                    json!({"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}),
                );
            } else {
                c.state = State::Running {
                    pid: 0,
                    started: started.clone(),
                };
            }
        }
        self.phase = "Running".into();
        self.write_status().await;
        let sleep = tokio::time::sleep(dur);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                r = self.updates.changed() => {
                    if r.is_err() { return; }
                    let u = self.updates.borrow_and_update().clone();
                    if self.settle(u).await {
                        return;
                    }
                }
            }
        }
        let finished = meta::now();
        for c in self.ctrs.iter_mut().filter(|c| !c.init) {
            let mut t = json!({"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
                               "startedAt": started, "finishedAt": finished});
            if !message.is_empty() {
                t["message"] = message.clone().into();
            }
            c.state = State::Terminated(t);
            c.done = true;
        }
        self.phase = if code == 0 { "Succeeded" } else { "Failed" }.into();
        self.write_status().await;
        self.wait_for_deletion().await;
    }

    async fn run_processes(&mut self) {
        let first_init = self.ctrs.iter().position(|c| c.init);
        match first_init {
            Some(i) => self.start(i).await,
            None => self.start_mains().await,
        }
        let deadline = self.pod["spec"]["activeDeadlineSeconds"]
            .as_u64()
            .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
        loop {
            let dl = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(msg) = self.rx.recv() => match msg {
                    Internal::Start(idx) => {
                        if !self.ctrs[idx].done && !matches!(self.ctrs[idx].state, State::Running { .. }) {
                            self.start(idx).await;
                        }
                    }
                    Internal::Exited { idx, code, message, started } => {
                        self.exited(idx, code, message, started, None).await;
                        if self.phase == "Succeeded" || self.phase == "Failed" {
                            break;
                        }
                    }
                },
                r = self.updates.changed() => {
                    if r.is_err() {
                        self.kill_all(Duration::ZERO).await;
                        return;
                    }
                    let u = self.updates.borrow_and_update().clone();
                    match u {
                        Update::Pod(p) if p["metadata"]["deletionTimestamp"].is_string() => {
                            let grace = p["metadata"]["deletionGracePeriodSeconds"].as_u64().unwrap_or(30);
                            self.event("Killing", "Stopping the pod's processes (deletion)", None).await;
                            self.kill_all(Duration::from_secs(grace)).await;
                            self.host.finish(&p).await;
                            return;
                        }
                        Update::Pod(p) => self.pod = p,
                        Update::Deleted | Update::Shutdown => {
                            self.kill_all(Duration::ZERO).await;
                            return;
                        }
                    }
                }
                _ = dl => {
                    let grace = self.pod["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
                    self.event("DeadlineExceeded", "Pod was active on the node longer than the specified deadline", None).await;
                    self.reason = Some(("DeadlineExceeded".into(), "Pod was active on the node longer than the specified deadline".into()));
                    for c in self.ctrs.iter_mut() {
                        c.done = true;
                    }
                    self.kill_all(Duration::from_secs(grace)).await;
                    self.phase = "Failed".into();
                    self.write_status().await;
                    break;
                }
            }
        }
        self.wait_for_deletion().await;
    }

    async fn start_mains(&mut self) {
        self.phase = "Running".into();
        for i in 0..self.ctrs.len() {
            if !self.ctrs[i].init {
                self.start(i).await;
            }
        }
        self.phase = "Running".into();
        self.write_status().await;
    }

    /// Resolves the environment and spawns one container instance.
    async fn start(&mut self, idx: usize) {
        let spec = self.ctrs[idx].spec.clone();
        let prepared = match self.resolve_env(&spec).await {
            Ok(env) => self.fill_volumes(&spec).await.map(|()| env),
            Err(e) => Err(e),
        };
        let env = match prepared {
            Ok(env) => env,
            Err(msg) => {
                self.ctrs[idx].state =
                    State::Waiting("CreateContainerConfigError".into(), msg.clone());
                self.write_status().await;
                self.event(
                    "Failed",
                    &format!("Error: {msg}"),
                    Some(&self.ctrs[idx].name.clone()),
                )
                .await;
                let tx = self.tx.clone();
                let delay = self.cfg.restart_backoff.max(Duration::from_millis(200));
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Internal::Start(idx));
                });
                return;
            }
        };
        let c = &self.ctrs[idx];
        let policy = c.spec["terminationMessagePolicy"]
            .as_str()
            .unwrap_or("File")
            .to_string();
        let tm_file = self.dir.join(format!("{}.termination-log", c.name));
        let _ = std::fs::remove_file(&tm_file);
        let mut subst: Vec<(String, String)> = Vec::new();
        let tm_path = c.spec["terminationMessagePath"]
            .as_str()
            .unwrap_or("/dev/termination-log");
        subst.push((tm_path.to_string(), tm_file.display().to_string()));
        for m in c.spec["volumeMounts"].as_array().into_iter().flatten() {
            let (Some(mp), Some(vol)) = (m["mountPath"].as_str(), m["name"].as_str()) else {
                continue;
            };
            let vdir = self.dir.join("volumes").join(vol);
            let _ = std::fs::create_dir_all(&vdir);
            subst.push((mp.to_string(), vdir.display().to_string()));
        }
        subst.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        let rewrite = |s: &str| -> String {
            let mut out = expand_vars(s, &env);
            for (from, to) in &subst {
                out = replace_path(&out, from, to);
            }
            out
        };
        let mut argv: Vec<String> = c.spec["command"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(c.spec["args"].as_array().into_iter().flatten())
            .filter_map(|v| v.as_str())
            .map(rewrite)
            .collect();
        let log = log_path(&self.dir, &c.name, c.restarts);
        let started = meta::now();
        if argv.is_empty() {
            // No image entrypoint to fall back on.
            argv = vec![];
        }
        let spawned = if argv.is_empty() {
            Err("the container has no command or args; the node cannot run an image's default entrypoint (images are not pulled)".to_string())
        } else {
            spawn(&argv, &env, c, &self.dir, &log, &tm_file)
        };
        match spawned {
            Ok(child) => {
                let pid = child.id().map(|p| p as i32).unwrap_or(0);
                self.host
                    .live_logs()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(log.clone());
                self.ctrs[idx].state = State::Running {
                    pid,
                    started: started.clone(),
                };
                let tx = self.tx.clone();
                let host = self.host.clone();
                tokio::spawn(async move {
                    let code = wait(child).await;
                    let message = termination_message(&tm_file, &log, code, &policy);
                    host.live_logs()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&log);
                    let _ = tx.send(Internal::Exited {
                        idx,
                        code,
                        message,
                        started,
                    });
                });
                let name = self.ctrs[idx].name.clone();
                self.event(
                    "Started",
                    &format!("Started container {name} (local process {pid})"),
                    Some(&name),
                )
                .await;
            }
            Err(msg) => {
                let _ = std::fs::write(&log, format!("{msg}\n"));
                let _ = self.tx.send(Internal::Exited {
                    idx,
                    code: 128,
                    message: msg,
                    started,
                });
                self.ctrs[idx].state = State::Running {
                    pid: 0,
                    started: meta::now(),
                };
            }
        }
        if self.ctrs[idx].init {
            self.phase = "Pending".into();
        }
        self.write_status().await;
    }

    async fn exited(
        &mut self,
        idx: usize,
        code: i32,
        message: String,
        started: String,
        reason: Option<&str>,
    ) {
        let policy = self.restart_policy();
        let c = &mut self.ctrs[idx];
        let reason = reason.unwrap_or(if code == 0 { "Completed" } else { "Error" });
        let mut t = json!({"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": meta::now()});
        if !message.is_empty() {
            t["message"] = message.into();
        }
        if let State::Running { pid, .. } = c.state {
            t["containerID"] = format!("weft://{pid}").into();
        }
        let restart = !c.done
            && match policy.as_str() {
                "Never" => false,
                "OnFailure" => code != 0,
                _ => !c.init || code != 0,
            };
        if restart {
            c.last = json!({"terminated": t});
            c.restarts += 1;
            c.state = State::Waiting(
                "CrashLoopBackOff".into(),
                format!(
                    "back-off {:?} restarting failed container={}",
                    c.backoff, c.name
                ),
            );
            let delay = c.backoff;
            c.backoff = (c.backoff * 2).min(self.cfg.max_restart_backoff);
            let tx = self.tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = tx.send(Internal::Start(idx));
            });
            self.write_status().await;
            return;
        }
        c.state = State::Terminated(t);
        c.done = true;
        if c.init {
            if code != 0 {
                self.phase = "Failed".into();
                self.write_status().await;
                return;
            }
            match self.ctrs.iter().position(|c| c.init && !c.done) {
                Some(next) => self.start(next).await,
                None => self.start_mains().await,
            }
            return;
        }
        if self.ctrs.iter().filter(|c| !c.init).all(|c| c.done) && self.reason.is_none() {
            let ok = self
                .ctrs
                .iter()
                .filter(|c| !c.init)
                .all(|c| matches!(&c.state, State::Terminated(t) if t["exitCode"] == 0));
            self.phase = if ok { "Succeeded" } else { "Failed" }.into();
        }
        self.write_status().await;
    }

    /// SIGTERM to every running container's process group, SIGKILL after
    /// `grace`; records how each ended.
    async fn kill_all(&mut self, grace: Duration) {
        let running: Vec<(usize, i32)> = self
            .ctrs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c.state {
                State::Running { pid, .. } if pid > 0 => Some((i, pid)),
                _ => None,
            })
            .collect();
        for c in self.ctrs.iter_mut() {
            c.done = true;
        }
        let sig = if grace.is_zero() {
            nix::sys::signal::Signal::SIGKILL
        } else {
            nix::sys::signal::Signal::SIGTERM
        };
        for (_, pid) in &running {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pid), sig);
        }
        let mut left: Vec<usize> = running.iter().map(|(i, _)| *i).collect();
        let until = Instant::now() + grace;
        let mut killed = grace.is_zero();
        while !left.is_empty() {
            let wait = until.saturating_duration_since(Instant::now());
            let msg = if killed {
                tokio::time::timeout(Duration::from_secs(5), self.rx.recv()).await
            } else {
                tokio::time::timeout(wait, self.rx.recv()).await
            };
            match msg {
                Ok(Some(Internal::Exited {
                    idx,
                    code,
                    message,
                    started,
                })) => {
                    left.retain(|i| *i != idx);
                    let c = &mut self.ctrs[idx];
                    let mut t = json!({"exitCode": code, "reason": "Error", "startedAt": started, "finishedAt": meta::now()});
                    if !message.is_empty() {
                        t["message"] = message.into();
                    }
                    c.state = State::Terminated(t);
                }
                Ok(Some(Internal::Start(_))) => {}
                Ok(None) => break,
                Err(_) if !killed => {
                    for (i, pid) in &running {
                        if left.contains(i) {
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(*pid),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                        }
                    }
                    killed = true;
                }
                Err(_) => break,
            }
        }
        // Containers waiting for a restart never run again.
        for c in self.ctrs.iter_mut() {
            if let State::Waiting(..) = c.state {
                c.state = State::Terminated(
                    json!({"exitCode": 0, "reason": "Completed", "finishedAt": meta::now()}),
                );
            }
        }
    }

    async fn resolve_env(&self, spec: &Value) -> Result<Vec<(String, String)>, String> {
        let ns = self.ns();
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOME".into(), self.dir.display().to_string()),
            ("HOSTNAME".into(), self.name()),
            ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
            ("KUBERNETES_SERVICE_PORT".into(), self.host.service_port()),
        ];
        let tm = spec["terminationMessagePath"]
            .as_str()
            .unwrap_or("/dev/termination-log");
        let _ = tm;
        env.push((
            "WEFT_TERMINATION_MESSAGE_PATH".into(),
            self.dir
                .join(format!(
                    "{}.termination-log",
                    spec["name"].as_str().unwrap_or("")
                ))
                .display()
                .to_string(),
        ));
        let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
            env.retain(|(x, _)| *x != k);
            env.push((k, v));
        };
        for from in spec["envFrom"].as_array().into_iter().flatten() {
            let prefix = from["prefix"].as_str().unwrap_or("");
            for (kind, gr) in [("configMapRef", "/configmaps"), ("secretRef", "/secrets")] {
                let r = &from[kind];
                if !r.is_object() {
                    continue;
                }
                let name = r["name"].as_str().unwrap_or("");
                match self.host.get(gr, &ns, name).await {
                    Some(obj) => {
                        for (k, v) in obj["data"].as_object().into_iter().flatten() {
                            let v = decode(gr, v);
                            set(&mut env, format!("{prefix}{k}"), v);
                        }
                    }
                    None if r["optional"].as_bool() == Some(true) => {}
                    None => return Err(format!("{} \"{name}\" not found", &gr[1..gr.len() - 1])),
                }
            }
        }
        for e in spec["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap_or("").to_string();
            if let Some(v) = e["value"].as_str() {
                let v = expand_vars(v, &env);
                set(&mut env, name, v);
                continue;
            }
            let vf = &e["valueFrom"];
            if let Some(path) = vf["fieldRef"]["fieldPath"].as_str() {
                set(&mut env, name, field_ref(&self.pod, path));
            } else if vf["configMapKeyRef"].is_object() || vf["secretKeyRef"].is_object() {
                let (r, gr) = if vf["configMapKeyRef"].is_object() {
                    (&vf["configMapKeyRef"], "/configmaps")
                } else {
                    (&vf["secretKeyRef"], "/secrets")
                };
                let obj_name = r["name"].as_str().unwrap_or("");
                let key = r["key"].as_str().unwrap_or("");
                let optional = r["optional"].as_bool() == Some(true);
                let what = &gr[1..gr.len() - 1];
                match self.host.get(gr, &ns, obj_name).await {
                    Some(obj) => match obj["data"].get(key) {
                        Some(v) => set(&mut env, name, decode(gr, v)),
                        None if optional => {}
                        None => {
                            return Err(format!(
                                "couldn't find key {key} in {what} {ns}/{obj_name}"
                            ));
                        }
                    },
                    None if optional => {}
                    None => return Err(format!("{what} \"{obj_name}\" not found")),
                }
            } else if vf["resourceFieldRef"].is_object() {
                set(&mut env, name, "0".into());
            }
        }
        Ok(env)
    }
}

trait CloneSpecs {
    fn clone_specs(&self) -> Vec<Value>;
}

impl CloneSpecs for Vec<Ctr> {
    fn clone_specs(&self) -> Vec<Value> {
        self.iter().map(|c| c.spec.clone()).collect()
    }
}

impl PodRun {
    /// Writes the keys of the `secret` and `configMap` volumes a container
    /// mounts into their per-pod directories, as the kubelet projects them
    /// (`items` pick and rename keys; a missing object or key fails the
    /// container unless `optional`).
    async fn fill_volumes(&self, spec: &Value) -> Result<(), String> {
        let ns = self.ns();
        for m in spec["volumeMounts"].as_array().into_iter().flatten() {
            let name = m["name"].as_str().unwrap_or("");
            let Some(vol) = self.pod["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == name)
            else {
                continue;
            };
            let (src, gr, obj_name) = if vol["secret"].is_object() {
                (
                    &vol["secret"],
                    "/secrets",
                    vol["secret"]["secretName"].as_str(),
                )
            } else if vol["configMap"].is_object() {
                (
                    &vol["configMap"],
                    "/configmaps",
                    vol["configMap"]["name"].as_str(),
                )
            } else {
                continue;
            };
            let obj_name = obj_name.unwrap_or("");
            let what = &gr[1..gr.len() - 1];
            let optional = src["optional"].as_bool() == Some(true);
            let Some(obj) = self.host.get(gr, &ns, obj_name).await else {
                if optional {
                    continue;
                }
                return Err(format!("{what} \"{obj_name}\" not found"));
            };
            let items: Vec<(String, String)> = match src["items"].as_array() {
                Some(items) => items
                    .iter()
                    .map(|i| {
                        let key = i["key"].as_str().unwrap_or("").to_string();
                        (key.clone(), i["path"].as_str().unwrap_or(&key).to_string())
                    })
                    .collect(),
                None => obj["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| (k.clone(), k.clone()))
                    .collect(),
            };
            let dir = self.dir.join("volumes").join(name);
            for (key, path) in items {
                let Some(v) = obj["data"].get(&key) else {
                    if optional {
                        continue;
                    }
                    return Err(format!("couldn't find key {key} in {what} {ns}/{obj_name}"));
                };
                let file = dir.join(&path);
                if path.split('/').any(|p| p == "..") {
                    return Err(format!(
                        "{what} {ns}/{obj_name}: item path {path:?} leaves the volume"
                    ));
                }
                if let Some(parent) = file.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                std::fs::write(&file, decode(gr, v))
                    .map_err(|e| format!("writing {what} volume {name}: {e}"))?;
            }
        }
        Ok(())
    }
}

fn decode(gr: &str, v: &Value) -> String {
    let s = v.as_str().unwrap_or("");
    if gr == "/secrets" {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default()
    } else {
        s.to_string()
    }
}

/// The downward API for env: `metadata.name`, `metadata.labels['k']`, ...
fn field_ref(pod: &Value, path: &str) -> String {
    let m = &pod["metadata"];
    let bracket = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?;
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        Some(key.to_string())
    };
    if let Some(k) = bracket("metadata.labels") {
        return m["labels"][k].as_str().unwrap_or("").to_string();
    }
    if let Some(k) = bracket("metadata.annotations") {
        return m["annotations"][k].as_str().unwrap_or("").to_string();
    }
    match path {
        "status.podIP" | "status.hostIP" | "status.podIPs" | "status.hostIPs" => "127.0.0.1".into(),
        _ => {
            let mut cur = pod;
            for seg in path.split('.') {
                cur = &cur[seg];
            }
            match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            }
        }
    }
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

/// Replaces `from` where it stands as a path of its own (`/data` in
/// `cat /data/x` but not in `/srv/data` or the second half of `/data/data`).
fn replace_path(s: &str, from: &str, to: &str) -> String {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    let mut out = String::new();
    let mut i = 0;
    while let Some(off) = s[i..].find(from) {
        let at = i + off;
        let end = at + from.len();
        let before_ok = s[..at].chars().next_back().is_none_or(|c| !part(c));
        let after_ok = s[end..].chars().next().is_none_or(|c| c == '/' || !part(c));
        out.push_str(&s[i..at]);
        if before_ok && after_ok {
            out.push_str(to);
        } else {
            out.push_str(from);
        }
        i = end;
    }
    out.push_str(&s[i..]);
    out
}

fn spawn(
    argv: &[String],
    env: &[(String, String)],
    c: &Ctr,
    pod_dir: &Path,
    log: &Path,
    _tm: &Path,
) -> Result<tokio::process::Child, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open log {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .process_group(0)
        .kill_on_drop(false);
    let wd = c.spec["workingDir"]
        .as_str()
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    cmd.current_dir(wd.unwrap_or_else(|| pod_dir.to_path_buf()));
    cmd.spawn().map_err(|e| {
        format!(
            "failed to start container \"{}\": exec: \"{}\": {e}",
            c.name, argv[0]
        )
    })
}

async fn wait(mut child: tokio::process::Child) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match child.wait().await {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
        Err(_) => 128,
    }
}

fn termination_message(tm: &Path, log: &Path, code: i32, policy: &str) -> String {
    let mut msg = std::fs::read(tm).unwrap_or_default();
    msg.truncate(4096);
    if msg.is_empty() && code != 0 && policy == "FallbackToLogsOnError" {
        let data = std::fs::read(log).unwrap_or_default();
        let tail: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
        let start = tail.len().saturating_sub(81);
        let mut joined = tail[start..].join(&b'\n');
        if joined.len() > 2048 {
            joined = joined[joined.len() - 2048..].to_vec();
        }
        msg = joined;
    }
    String::from_utf8_lossy(&msg).trim_end().to_string()
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
        assert_eq!(replace_path("cat /data/data", "/data", "/v"), "cat /v/data");
        assert_eq!(
            replace_path(
                "echo x > /dev/termination-log",
                "/dev/termination-log",
                "/p/t"
            ),
            "echo x > /p/t"
        );
        assert_eq!(replace_path("/srv/data", "/data", "/v"), "/srv/data");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
    }
}
