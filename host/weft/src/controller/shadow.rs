//! Shadow calls: each `build-resource` and `get-task-phase` call the
//! serving version of a plugin answers is copied to its shadow candidate
//! (see [`weft_plugin::rollout`]) on a background thread, and the two
//! answers are compared. Nothing the candidate answers is used; the round
//! never waits for it (a full queue drops the copy and counts it). The
//! candidate's faults feed the circuit breaker, which aborts the shadow.

use std::sync::{Arc, mpsc};

use serde_json::Value;
use weft_plugin::{Registry, TaskContext, TaskPlugin, rollout::Rollout};

use crate::metrics::Metrics;

/// Copies waiting for the worker at most; more are dropped.
const QUEUE: usize = 256;

/// Which call, with what the serving version answered.
pub enum Call {
    /// `build-resource`: the resource it built.
    Build,
    /// `get-task-phase` on this observed object: the phase info it gave.
    Phase(Value),
}

impl Call {
    fn name(&self) -> &'static str {
        match self {
            Call::Build => "build-resource",
            Call::Phase(_) => "get-task-phase",
        }
    }
}

struct Job {
    candidate: Arc<TaskPlugin>,
    rollout: Rollout,
    ctx: TaskContext,
    call: Call,
    served: Value,
}

/// The background caller of shadow candidates.
pub struct Shadow {
    tx: mpsc::SyncSender<Job>,
    metrics: Arc<Metrics>,
}

impl Shadow {
    /// Starts the worker thread; it ends when the `Shadow` is dropped.
    pub fn start(registry: Arc<Registry>, metrics: Arc<Metrics>) -> Arc<Self> {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("weft-shadow".into())
            .spawn(move || {
                for job in rx {
                    run(&registry, &m, job);
                }
            })
            .expect("spawn the shadow worker");
        Arc::new(Shadow { tx, metrics })
    }

    /// Copies a call the serving version `plugin` answered to its shadow
    /// candidate, if it has one; `call` makes the copy (the call and the
    /// answer), so nothing is cloned for a plugin without a shadow.
    pub fn offer(
        &self,
        registry: &Registry,
        plugin: &TaskPlugin,
        ctx: &TaskContext,
        call: impl FnOnce() -> (Call, Value),
    ) {
        let snap = registry.snapshot();
        let Some((candidate, rollout)) = snap.shadow(plugin.name()) else {
            return;
        };
        let (call, served) = call();
        let job = Job {
            candidate,
            rollout: rollout.clone(),
            ctx: ctx.clone(),
            call,
            served,
        };
        let name = job.call.name();
        if self.tx.try_send(job).is_err() {
            self.metrics.shadow_call(plugin.name(), name, "skipped");
        }
    }
}

/// One copy: call the candidate, compare, record.
fn run(registry: &Registry, metrics: &Metrics, job: Job) {
    let got = match &job.call {
        Call::Build => job.candidate.build_resource(&job.ctx).map(|(v, _)| v),
        Call::Phase(observed) => job
            .candidate
            .get_task_phase(&job.ctx, observed)
            .map(|(p, _)| serde_json::to_value(p).unwrap_or(Value::Null)),
    };
    registry.record_call(&job.candidate, got.as_ref().err());
    let at = format!(
        "{} of {}/{}",
        job.call.name(),
        job.ctx.workflow,
        job.ctx.node_id
    );
    let (result, diff, failed) = match got {
        Ok(v) if v == job.served => ("same", None, false),
        Ok(v) => (
            "diff",
            Some(format!("{at}: {}", describe(&job.served, &v))),
            false,
        ),
        Err(e) => (
            "error",
            Some(format!("{at}: the candidate failed: {e}")),
            true,
        ),
    };
    job.rollout.record_shadow(diff, failed);
    metrics.shadow_call(job.candidate.name(), job.call.name(), result);
}

/// The first few differing JSON paths, as `path: serving → candidate`.
pub fn describe(serving: &Value, candidate: &Value) -> String {
    let mut out = Vec::new();
    diff(serving, candidate, String::new(), &mut out);
    let more = out.len().saturating_sub(3);
    out.truncate(3);
    let mut text = out.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

fn diff(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                diff(va, vb, format!("{path}/{k}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                diff(va, vb, format!("{path}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!(
            "{}: {} → {}",
            if path.is_empty() { "/" } else { &path },
            short(a),
            short(b)
        )),
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_their_paths() {
        let a = json!({"spec": {"containers": [{"image": "busybox", "command": ["true"]}]}, "kind": "Pod"});
        let b = json!({"spec": {"containers": [{"image": "alpine", "command": ["true"]}]}, "kind": "Pod", "x": 1});
        assert_eq!(
            describe(&a, &b),
            "/spec/containers/0/image: \"busybox\" → \"alpine\"; /x: null → 1"
        );
        assert_eq!(describe(&a, &a), "");
    }
}
