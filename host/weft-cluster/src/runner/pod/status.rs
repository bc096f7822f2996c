//! The pod's status as the node reports it: conditions with their
//! transition times, each container's state, and the status write itself.
//! Separate so the run's logic only changes state and calls `write_status`.

use serde_json::{Value, json};

use super::{Ctr, PodRun, State};
use crate::meta;

impl PodRun {
    pub(super) fn set_cond(&mut self, t: &'static str, ok: bool, reason: Option<&str>) {
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

    pub(super) async fn write_status(&mut self) {
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
}
