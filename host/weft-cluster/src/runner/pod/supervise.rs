//! The run of a pod's processes: init containers one after another, then
//! the main containers, restarts under the restart policy with back-off,
//! the pod's phase as containers end, deletion and `activeDeadlineSeconds`.
//! It decides what happens next; `process` does it to the processes.

use std::time::Duration;

use serde_json::json;

use super::{Internal, PodRun, State, Update};
use crate::meta;

impl PodRun {
    pub(super) async fn run_processes(&mut self) {
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
}
