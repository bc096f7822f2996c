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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use object_store::signer::Method;
use serde_json::{Map, Value, json};
use weft_dag::TaskSpec;
use weft_dag::artifacts::{ArtifactRef, ArtifactSource, OUTPUTS_KEY, ResolvedInput};

use crate::store::plan::{
    self, IoPlan, Offload, PlannedInput, PlannedLog, PlannedOutput, PlannedParameter,
};
use crate::store::{Store, attempt_key};

pub use specs::{POD_SPECS_ANNOTATION, is_pod};

/// The init container (and the volume) Weft adds.
pub const CONTAINER: &str = "weft-io";

/// The init container's image unless configured: Weft's own, at this
/// version.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/weft-dev/weft:", env!("CARGO_PKG_VERSION"));

/// Outputs larger than this stay in the store unless configured: a
/// Workflow object holds many nodes, and etcd's objects stay under 1.5 MiB.
pub const DEFAULT_INLINE_LIMIT: usize = 32 << 10;

/// The name of an attempt's offloaded outputs object (not an artifact
/// name: those have no dots).
pub const OUTPUTS_OBJECT: &str = "outputs.json";

/// The name of an attempt's archived main container log.
pub const LOG_OBJECT: &str = "main.log";

/// How many read-back outputs are kept (cleared when full).
const LOADED_ENTRIES: usize = 256;

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
    /// Outputs larger than this stay in the store, referenced from the
    /// status (`--max-inline-outputs`).
    inline_limit: usize,
    /// Whether pods' logs are archived unless a workflow says
    /// (`--archive-logs`).
    archive_logs: bool,
    /// Outputs read back from the store, by digest (they never change).
    loaded: Mutex<HashMap<String, Arc<Map<String, Value>>>>,
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

/// A successful attempt's outputs as the status keeps them: inline, or
/// a reference to them in the store.
pub type Settled = (Option<Map<String, Value>>, Option<ArtifactRef>);

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
            inline_limit: DEFAULT_INLINE_LIMIT,
            archive_logs: false,
            loaded: Mutex::new(HashMap::new()),
            plans: Mutex::new(HashMap::new()),
        }
    }

    /// The same settings over another store (a namespace's repository).
    pub fn with_store(&self, store: Store) -> PodIo {
        PodIo {
            store,
            binary: self.binary.clone(),
            image: self.image.clone(),
            url_ttl: self.url_ttl,
            max_size: self.max_size,
            inline_limit: self.inline_limit,
            archive_logs: self.archive_logs,
            loaded: Mutex::new(HashMap::new()),
            plans: Mutex::new(HashMap::new()),
        }
    }

    /// Presigned URLs live `ttl`.
    pub fn with_url_ttl(mut self, ttl: Duration) -> PodIo {
        self.url_ttl = ttl;
        self
    }

    /// Outputs over `bytes` (serialised) stay in the store.
    pub fn with_inline_limit(mut self, bytes: usize) -> PodIo {
        self.inline_limit = bytes;
        self
    }

    /// Archive pods' logs unless a workflow says otherwise.
    pub fn with_archive_logs(mut self, archive: bool) -> PodIo {
        self.archive_logs = archive;
        self
    }

    /// The controller's `--archive-logs`.
    pub fn archive_logs(&self) -> bool {
        self.archive_logs
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

    /// Makes `object` (as the plugin built it) run `task`'s transfers for
    /// `at`, and archive its main container's log when `logs`: a Pod, or
    /// the pod specs a plugin marked in any other object (the SDK's
    /// `mark_pod_specs`), the first of which reports the outputs. A task
    /// that only archives its log is left alone when it cannot be wrapped
    /// (no pod spec, no command): its log is then not archived.
    pub fn prepare(
        &self,
        object: &mut Value,
        at: &Attempt<'_>,
        task: &TaskSpec,
        inputs: &[ResolvedInput],
        logs: bool,
    ) -> Result<(), IoProblem> {
        let specs = specs::pod_specs(object).map_err(|m| IoProblem::task("PodSpecsInvalid", m))?;
        let wrappable = !specs.is_empty()
            && specs
                .iter()
                .all(|p| object.pointer(p).is_some_and(wrappable));
        if !task.has_io() && !wrappable {
            return Ok(());
        }
        let Some(first) = specs.first() else {
            return Err(IoProblem::task(
                "ArtifactsNeedAPod",
                specs::no_pod(object, task),
            ));
        };
        let resource = !specs::is_pod(object);
        let main = object.pointer(first).expect("checked by pod_specs");
        let plan = self.plan(main, at, task, inputs, logs, resource)?;
        for (i, p) in specs.iter().enumerate() {
            let plan = match i {
                0 => plan.clone(),
                _ => plan.inputs_only(),
            };
            let spec = object.pointer_mut(p).expect("checked by pod_specs");
            inject(spec, &plan, &self.binary, &self.image).map_err(|m| {
                let m = if resource { format!("{p}: {m}") } else { m };
                IoProblem::task("ArtifactsNeedACommand", m)
            })?;
        }
        Ok(())
    }

    /// The attempt's plan (for the pod spec `spec`): the one made before,
    /// or a new one. A `resource`'s pods always leave their outputs in the
    /// store, where the controller reads them (it sees the resource, not
    /// its pods' termination messages).
    fn plan(
        &self,
        spec: &Value,
        at: &Attempt<'_>,
        task: &TaskSpec,
        inputs: &[ResolvedInput],
        logs: bool,
        resource: bool,
    ) -> Result<IoPlan, IoProblem> {
        let id = at.id();
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = plans.get(&id) {
            return Ok(p.clone());
        }
        let main = main_container(spec).map(|i| &spec["containers"][i]);
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
            offload: Some(Offload {
                url: self.sign(Method::PUT, "outputs", &at.key(OUTPUTS_OBJECT))?,
                key: at.key(OUTPUTS_OBJECT),
                above: if resource { 0 } else { plan::MESSAGE_LIMIT },
            }),
            log: match logs {
                true => Some(PlannedLog {
                    url: self.sign(Method::PUT, "log", &at.key(LOG_OBJECT))?,
                    key: at.key(LOG_OBJECT),
                }),
                false => None,
            },
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

    /// A successful attempt's outputs as the status keeps them: read
    /// back when the pod uploaded them, held to the plan, and left in the
    /// store (referenced) when over the inline limit. A `resource`'s
    /// (not a Pod's) come from the store, with its plugin's own.
    pub fn settle_outputs(
        &self,
        at: &Attempt<'_>,
        task: &TaskSpec,
        outputs: Option<Map<String, Value>>,
        resource: bool,
    ) -> Result<Settled, IoProblem> {
        if resource {
            return self.settle_reported(at, task, outputs);
        }
        let reference = outputs
            .as_ref()
            .and_then(|o| o.get(plan::OFFLOADED_KEY))
            .map(|v| serde_json::from_value::<ArtifactRef>(v.clone()));
        let (outputs, reference) = match reference {
            None => (outputs, None),
            Some(Ok(r)) if r.key == at.key(OUTPUTS_OBJECT) => {
                let loaded = self.load_outputs(&r).map_err(|e| IoProblem {
                    reason: "ArtifactStoreError",
                    message: format!("outputs: {e}"),
                    system: true,
                })?;
                (Some((*loaded).clone()), Some(r))
            }
            Some(_) => {
                let why = format!(
                    "outputs: the pod reported {:?}, not a reference to the attempt's {:?}",
                    outputs.as_ref().and_then(|o| o.get(plan::OFFLOADED_KEY)),
                    at.key(OUTPUTS_OBJECT)
                );
                return Err(IoProblem::task("ArtifactNotReported", why));
            }
        };
        self.check_outputs(at, task, outputs.as_ref())?;
        let large = outputs
            .as_ref()
            .is_some_and(|o| serde_json::to_vec(o).map_or(0, |v| v.len()) > self.inline_limit);
        match (large, reference) {
            (true, Some(r)) => Ok((None, Some(r))),
            (_, _) => Ok((outputs, None)),
        }
    }

    /// A resource's outputs: what its reporting pod left in the store
    /// (always there: its plan offloads everything), with what the
    /// plugin read from the resource itself; referenced when large and
    /// all of it is in the store.
    fn settle_reported(
        &self,
        at: &Attempt<'_>,
        task: &TaskSpec,
        own: Option<Map<String, Value>>,
    ) -> Result<Settled, IoProblem> {
        let key = at.key(OUTPUTS_OBJECT);
        let bytes = match block_on(self.store.get_bytes(&key)) {
            Ok(b) => b,
            Err(crate::store::StoreError::NotFound { .. }) => {
                return Err(IoProblem::task(
                    "ArtifactNotReported",
                    format!(
                        "outputs: no pod of the task's resource reported them at {key:?} (did its command run under weft io exec to the end?)"
                    ),
                ));
            }
            Err(e) => {
                return Err(IoProblem {
                    reason: "ArtifactStoreError",
                    message: format!("outputs: {e}"),
                    system: true,
                });
            }
        };
        let reported: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|e| {
            IoProblem::task(
                "ArtifactNotReported",
                format!("outputs: {key} is not a JSON object: {e}"),
            )
        })?;
        let mut outputs = own.unwrap_or_default();
        let all_reported = outputs.iter().all(|(k, v)| reported.get(k) == Some(v));
        outputs.extend(reported);
        self.check_outputs(at, task, Some(&outputs))?;
        let size = serde_json::to_vec(&outputs).map_or(0, |v| v.len());
        if size > self.inline_limit && all_reported {
            let r = ArtifactRef {
                key,
                digest: crate::store::Digest::of(&bytes).as_str().to_string(),
                size: bytes.len() as u64,
                kind: "file".into(),
            };
            // All reported: the outputs are the stored object's, already read.
            self.remember(&r.digest, outputs);
            return Ok((None, Some(r)));
        }
        Ok((Some(outputs), None))
    }

    /// Outputs kept in the store, read back (once per digest) and checked
    /// against their digest; for the synchronous round.
    pub fn load_outputs(&self, r: &ArtifactRef) -> Result<Arc<Map<String, Value>>, String> {
        block_on(self.read_outputs(r))
    }

    /// [`PodIo::load_outputs`] for async callers (the admin API, the CLI).
    pub async fn read_outputs(&self, r: &ArtifactRef) -> Result<Arc<Map<String, Value>>, String> {
        let cached = (self.loaded.lock().unwrap_or_else(|e| e.into_inner()))
            .get(&r.digest)
            .cloned();
        if let Some(m) = cached {
            return Ok(m);
        }
        let bytes = self
            .store
            .get_bytes(&r.key)
            .await
            .map_err(|e| e.to_string())?;
        let digest = crate::store::Digest::of(&bytes);
        if digest.as_str() != r.digest {
            return Err(format!(
                "{} has digest {}, not {}",
                r.key,
                digest.as_str(),
                r.digest
            ));
        }
        let map: Map<String, Value> = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a JSON object of outputs: {e}", r.key))?;
        Ok(self.remember(&r.digest, map))
    }

    /// Keeps outputs read from the store by their digest (they never
    /// change), so a round that needs them again reads no object.
    fn remember(&self, digest: &str, map: Map<String, Value>) -> Arc<Map<String, Value>> {
        let map = Arc::new(map);
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.len() >= LOADED_ENTRIES {
            loaded.clear();
        }
        loaded.insert(digest.to_string(), map.clone());
        map
    }

    /// Holds a successful attempt's outputs to its plan: every declared
    /// output artifact is reported under the key minted for it.
    fn check_outputs(
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

/// Runs `f` to completion from the synchronous round (a blocking thread
/// of the controller's runtime), or on its own outside any runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => tokio::task::block_in_place(|| h.block_on(f)),
        Err(_) => futures::executor::block_on(f),
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

/// Whether the pod spec's main container has a command to wrap.
fn wrappable(spec: &Value) -> bool {
    let main = main_container(spec).map(|i| &spec["containers"][i]);
    main.is_some_and(|c| c["command"].as_array().is_some_and(|a| !a.is_empty()))
}

/// The main container's index in a pod spec: `main`, else the first (the
/// pod plugin's rule).
fn main_container(spec: &Value) -> Option<usize> {
    let cs = spec["containers"].as_array()?;
    cs.iter()
        .position(|c| c["name"] == "main")
        .or((!cs.is_empty()).then_some(0))
}

/// The init container, the shared volume, and the main container's
/// command under `weft io exec`, in a pod spec.
fn inject(spec: &mut Value, plan: &IoPlan, binary: &str, image: &str) -> Result<(), String> {
    let main = main_container(spec).ok_or("the pod has no container")?;
    let (init_plan, exec_plan) = (plan.inputs_only().to_arg(), plan.for_exec().to_arg());
    let mount = json!({"name": CONTAINER, "mountPath": plan::IO_DIR});
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
        exec_plan,
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
        "command": [binary, "io", "init", "--plan", init_plan],
        "volumeMounts": [mount],
        // Its one-line fault on stderr becomes the node's message.
        "terminationMessagePolicy": "FallbackToLogsOnError",
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
    let Some(main) = main_container(&pod["spec"]) else {
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

mod specs;
#[cfg(test)]
mod tests;
