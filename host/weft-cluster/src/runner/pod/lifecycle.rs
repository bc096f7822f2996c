//! A pod's run from start to end: setting up its state, binding it to the
//! node, the `ImageNotPulled` events, the simulated run, and waiting for
//! the deletion that ends it. The process side lives in `supervise` and
//! `process`; this is the part every run, simulated or not, goes through.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{
    Ctr, PodHost, PodRun, SIMULATE, SIMULATE_DURATION, SIMULATE_EXIT_CODE, SIMULATE_MESSAGE, State,
    Update, parse_duration, pod_dir,
};
use crate::RunnerConfig;
use crate::meta;

impl PodRun {
    pub(super) fn new(
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

    pub(super) fn ns(&self) -> String {
        self.pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
    pub(super) fn name(&self) -> String {
        self.pod["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
    pub(super) fn restart_policy(&self) -> String {
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

    pub(super) async fn run(mut self) {
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
        let simulate =
            self.cfg.simulate_all || self.annotation(SIMULATE).as_deref() == Some("true");
        if simulate {
            // No process runs, so no ImageNotPulled: it says what runs
            // instead of the image. kwok, too, sends simulated pods none.
            self.simulate().await;
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
    pub(super) async fn modify(
        &self,
        status: bool,
        f: impl FnOnce(&mut Value) + Send,
    ) -> Option<Arc<Value>> {
        self.host.modify(&self.pod, status, Box::new(f)).await
    }

    pub(super) async fn event(&self, reason: &str, message: &str, container: Option<&str>) {
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

    /// Waits until the pod is deleted (or the cluster stops), then finishes
    /// the deletion.
    pub(super) async fn wait_for_deletion(&mut self) {
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
}

trait CloneSpecs {
    fn clone_specs(&self) -> Vec<Value>;
}

impl CloneSpecs for Vec<Ctr> {
    fn clone_specs(&self) -> Vec<Value> {
        self.iter().map(|c| c.spec.clone()).collect()
    }
}
