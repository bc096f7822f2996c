//! A task's artifacts in its pod, as Argo's executor moves them but with
//! no credentials in the pod: for each attempt the controller mints
//! presigned URLs for exactly that attempt's keys (GET for inputs, PUT for
//! outputs), writes them into an [`IoPlan`], and turns the Pod the plugin
//! built into one that runs the plan: an init container `weft-io` (Weft's
//! image; under the local runner the same binary as a process) stages the
//! `weft` binary and the inputs in an `emptyDir`, and the main container's
//! command runs under `weft io exec`, which uploads the outputs after it
//! exits 0 and reports them in the termination message.
//!
//! The controller then holds the pod to the plan: each declared output must
//! come back under its own key, and a `weft io` exit of
//! [`plan::EXIT_STORE_FAULT`] is the platform's failure (system budget).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use object_store::signer::Method;
use serde_json::{Map, Value, json};
use weft_dag::TaskSpec;
use weft_dag::artifacts::{ArtifactRef, ArtifactSource, OUTPUTS_KEY, ResolvedInput};

use crate::store::plan::{self, IoPlan, PlannedInput, PlannedOutput, PlannedParameter};
use crate::store::{Store, attempt_key};

/// The init container (and the volume) Weft adds.
pub const CONTAINER: &str = "weft-io";

/// The init container's image unless configured: Weft's own, at this
/// version.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/weft-dev/weft:", env!("CARGO_PKG_VERSION"));

/// How long presigned URLs live unless configured: long enough for a pod
/// that waits for a node, then runs for a working day.
pub const DEFAULT_URL_TTL: Duration = Duration::from_secs(24 * 3600);

/// The data plane as the controller uses it for pods.
pub struct PodIo {
    store: Store,
    /// The `weft` binary the init container runs.
    binary: String,
    /// The init container's image (Weft's own).
    image: String,
    url_ttl: Duration,
    max_size: Option<u64>,
    /// Plans by attempt: a round that applies the same Pod again must
    /// write the same URLs (a Pod's spec cannot change).
    plans: Mutex<HashMap<String, (Instant, IoPlan)>>,
}

/// One attempt, as keys are derived from it.
pub struct Attempt<'a> {
    /// The Workflow's namespace.
    pub namespace: &'a str,
    /// The Workflow's name.
    pub workflow: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// The node id (with `-<index>` for an array item).
    pub node: &'a str,
    /// The attempt, from 0.
    pub attempt: u32,
}

/// Why a pod cannot get its artifacts: the node fails with this.
#[derive(Debug)]
pub struct IoProblem {
    /// The node's reason.
    pub reason: &'static str,
    /// What happened, naming the artifact.
    pub message: String,
    /// The platform's fault (retried on the system budget).
    pub system: bool,
}

impl IoProblem {
    fn task(reason: &'static str, message: String) -> Self {
        IoProblem {
            reason,
            message,
            system: false,
        }
    }
}

impl Attempt<'_> {
    fn key(&self, name: &str) -> String {
        attempt_key(
            self.namespace,
            self.workflow,
            self.uid,
            self.node,
            self.attempt,
            name,
        )
    }

    fn id(&self) -> String {
        self.key("")
    }
}

impl PodIo {
    /// The data plane over `store`; pods get `binary` from `image`.
    pub fn new(store: Store, binary: &str, image: &str) -> PodIo {
        PodIo {
            store,
            binary: binary.into(),
            image: image.into(),
            url_ttl: DEFAULT_URL_TTL,
            max_size: None,
            plans: Mutex::new(HashMap::new()),
        }
    }

    /// Presigned URLs live `ttl`.
    pub fn with_url_ttl(mut self, ttl: Duration) -> PodIo {
        self.url_ttl = ttl;
        self
    }

    /// No artifact may be larger than `bytes`.
    pub fn with_max_size(mut self, bytes: Option<u64>) -> PodIo {
        self.max_size = bytes;
        self
    }

    /// The store (for the admin API and the CLI).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Makes `pod` (as the plugin built it) run `task`'s transfers for `at`.
    pub fn prepare(
        &self,
        pod: &mut Value,
        at: &Attempt<'_>,
        task: &TaskSpec,
        inputs: &[ResolvedInput],
    ) -> Result<(), IoProblem> {
        if !(pod["kind"] == "Pod" && pod["apiVersion"] == "v1") {
            let kind = pod["kind"].as_str().unwrap_or("resource").to_string();
            return Err(IoProblem::task(
                "ArtifactsNeedAPod",
                format!(
                    "the task declares artifacts, which move in a Pod, and task type {:?} built a {kind}",
                    task.task_type
                ),
            ));
        }
        let plan = self.plan(pod, at, task, inputs)?;
        inject(pod, &plan, &self.binary, &self.image)
            .map_err(|m| IoProblem::task("ArtifactsNeedACommand", m))
    }

    /// The attempt's plan: the one made before, or a new one.
    fn plan(
        &self,
        pod: &Value,
        at: &Attempt<'_>,
        task: &TaskSpec,
        inputs: &[ResolvedInput],
    ) -> Result<IoPlan, IoProblem> {
        let id = at.id();
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = plans.get(&id) {
            return Ok(p.clone());
        }
        let main = main_container(pod).map(|i| &pod["spec"]["containers"][i]);
        let log = main
            .and_then(|c| c["terminationMessagePath"].as_str())
            .unwrap_or("/dev/termination-log");
        let plan = IoPlan {
            dir: plan::IO_DIR.into(),
            termination_log: log.into(),
            inputs: inputs
                .iter()
                .map(|i| self.input(at, i))
                .collect::<Result<_, _>>()?,
            outputs: task
                .outputs
                .artifacts
                .iter()
                .map(|o| self.output(at, &o.name, &o.path))
                .collect::<Result<_, _>>()?,
            parameters: task
                .outputs
                .parameters
                .iter()
                .map(|p| PlannedParameter {
                    name: p.name.clone(),
                    path: p.path.clone(),
                })
                .collect(),
            max_size: self.max_size,
        };
        let ttl = self.url_ttl;
        plans.retain(|_, (made, _)| made.elapsed() < ttl);
        plans.insert(id, (Instant::now(), plan.clone()));
        Ok(plan)
    }

    fn input(&self, at: &Attempt<'_>, i: &ResolvedInput) -> Result<PlannedInput, IoProblem> {
        let (url, digest, kind) = match &i.source {
            ArtifactSource::Url(u) => (u.clone(), None, "file"),
            ArtifactSource::Stored(a) => {
                own_namespace(at, &i.name, a)?;
                let url = self.sign(Method::GET, &i.name, &a.key)?;
                (url, Some(a.digest.clone()), a.kind.as_str())
            }
        };
        let kind = match kind {
            "directory" => crate::store::transfer::Kind::Directory,
            _ => crate::store::transfer::Kind::File,
        };
        Ok(PlannedInput {
            name: i.name.clone(),
            path: i.path.clone(),
            kind,
            url,
            digest,
        })
    }

    fn output(&self, at: &Attempt<'_>, name: &str, path: &str) -> Result<PlannedOutput, IoProblem> {
        let key = at.key(name);
        Ok(PlannedOutput {
            name: name.into(),
            path: path.into(),
            url: self.sign(Method::PUT, name, &key)?,
            key,
        })
    }

    fn sign(&self, method: Method, artifact: &str, key: &str) -> Result<String, IoProblem> {
        // Signing is local work (static credentials), so no runtime is
        // needed and the round may call it.
        let signed = futures::executor::block_on(self.store.presign(method, key, self.url_ttl));
        signed.map(|u| u.to_string()).map_err(|e| IoProblem {
            reason: "ArtifactStoreError",
            message: format!("artifact {artifact}: {e}"),
            system: true,
        })
    }

    /// Holds a successful attempt's outputs to its plan: every declared
    /// output artifact is reported under the key minted for it.
    pub fn check_outputs(
        &self,
        at: &Attempt<'_>,
        task: &TaskSpec,
        outputs: Option<&Map<String, Value>>,
    ) -> Result<(), IoProblem> {
        self.plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&at.id());
        let reported = outputs.and_then(|o| o.get(OUTPUTS_KEY));
        for o in &task.outputs.artifacts {
            let got = reported
                .and_then(|r| r.get(&o.name))
                .and_then(|v| serde_json::from_value::<ArtifactRef>(v.clone()).ok());
            let problem = match got {
                None => format!(
                    "output artifact {}: the pod did not report it (was the main container's command run under weft io exec?)",
                    o.name
                ),
                Some(a) if a.key != at.key(&o.name) => format!(
                    "output artifact {}: reported under key {:?}, not the attempt's {:?}",
                    o.name,
                    a.key,
                    at.key(&o.name)
                ),
                Some(_) => continue,
            };
            return Err(IoProblem::task("ArtifactNotReported", problem));
        }
        Ok(())
    }
}

/// A stored input must be in the workflow's own namespace: a key is a
/// capability, and a spec may not name another namespace's objects.
fn own_namespace(at: &Attempt<'_>, name: &str, a: &ArtifactRef) -> Result<(), IoProblem> {
    match a.key.starts_with(&format!("{}/", at.namespace)) {
        true => Ok(()),
        false => Err(IoProblem::task(
            "ArtifactNotPermitted",
            format!(
                "input artifact {name}: key {:?} is outside namespace {}",
                a.key, at.namespace
            ),
        )),
    }
}

/// The main container's index: `main`, else the first (the pod plugin's
/// rule).
fn main_container(pod: &Value) -> Option<usize> {
    let cs = pod["spec"]["containers"].as_array()?;
    cs.iter()
        .position(|c| c["name"] == "main")
        .or((!cs.is_empty()).then_some(0))
}

/// The init container, the shared volume, and the main container's
/// command under `weft io exec`.
fn inject(pod: &mut Value, plan: &IoPlan, binary: &str, image: &str) -> Result<(), String> {
    let main = main_container(pod).ok_or("the pod has no container")?;
    let arg = plan.to_arg();
    let mount = json!({"name": CONTAINER, "mountPath": plan::IO_DIR});
    let spec = &mut pod["spec"];
    let c = &mut spec["containers"][main];
    let command: Vec<Value> = c["command"].as_array().cloned().unwrap_or_default();
    if command.is_empty() {
        return Err(format!(
            "container {} needs a command: the task declares artifacts, and Weft runs the command under weft io exec (an image's entrypoint is not known to it)",
            c["name"].as_str().unwrap_or("main")
        ));
    }
    let args: Vec<Value> = c["args"].as_array().cloned().unwrap_or_default();
    let wrapped = [
        format!("{}/bin/weft", plan::IO_DIR),
        "io".into(),
        "exec".into(),
        "--plan".into(),
        arg.clone(),
        "--".into(),
    ];
    let mut all: Vec<Value> = wrapped.into_iter().map(Value::from).collect();
    all.extend(command);
    all.extend(args);
    c["command"] = Value::Array(all);
    if let Some(o) = c.as_object_mut() {
        o.remove("args");
    }
    push(&mut c["volumeMounts"], mount.clone());
    push(
        &mut spec["volumes"],
        json!({"name": CONTAINER, "emptyDir": {}}),
    );
    let init = json!({
        "name": CONTAINER,
        "image": image,
        "command": [binary, "io", "init", "--plan", arg],
        "volumeMounts": [mount],
    });
    let mut inits = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    inits.insert(0, init);
    spec["initContainers"] = Value::Array(inits);
    Ok(())
}

fn push(list: &mut Value, item: Value) {
    match list.as_array_mut() {
        Some(l) => l.push(item),
        None => *list = Value::Array(vec![item]),
    }
}

/// Whether a failed attempt's main container exited with `weft io`'s
/// store-fault code: the platform's failure, not the task's.
pub fn store_fault(pod: &Value) -> bool {
    let Some(main) = main_container(pod) else {
        return false;
    };
    let name = &pod["spec"]["containers"][main]["name"];
    let statuses = pod["status"]["containerStatuses"].as_array();
    let inits = pod["status"]["initContainerStatuses"].as_array();
    let code = |s: &Value| s["state"]["terminated"]["exitCode"].as_i64();
    statuses
        .into_iter()
        .flatten()
        .filter(|s| &s["name"] == name)
        .chain(
            inits
                .into_iter()
                .flatten()
                .filter(|s| s["name"] == CONTAINER),
        )
        .any(|s| code(s) == Some(plan::EXIT_STORE_FAULT.into()))
}

#[cfg(test)]
mod tests;
