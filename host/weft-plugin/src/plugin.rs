//! Loading a component as a plugin, and calling it safely.
//!
//! Loading checks everything once (wasm header, compilation, world, imports,
//! properties); every call runs in a fresh `Store` made from the version's
//! `InstancePre` (ahead of time when a spare is ready, see [`crate::prepared`]),
//! so no data survives from one call to the next and a trap poisons nothing.

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use serde_json::{Map, Value};
use wasmtime::{Store, Trap};

use crate::bindings::middleware::MiddlewarePlugin as MiddlewareBindings;
use crate::{
    bindings::{
        middleware::{
            MiddlewarePluginPre,
            exports::weft::plugin::middleware::{self as wit_mw},
        },
        task::{
            K8sTaskPlugin as K8sTaskBindings, K8sTaskPluginPre,
            exports::weft::plugin::k8s_task::{
                AbortBehaviour as WitAbort, TaskProperties as WitProps,
            },
            weft::plugin::types as wit,
        },
    },
    engine::{CompileSource, Digest, PluginEngine},
    host::{HostState, StateStore},
    manifest::{FailStrategy, Limits, Manifest, World},
    prepared::{CallStore, Make, Prepared, Spares},
};

/// Why a component could not be loaded as a plugin. Always names the origin.
#[derive(Debug, thiserror::Error)]
#[error("plugin {origin}: {problem}")]
pub struct LoadError {
    /// Where the component came from (a file path, a ConfigMap).
    pub origin: String,
    /// What is wrong.
    pub problem: LoadProblem,
}

/// What is wrong with a component.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly binary (no \\0asm header)")]
    NotWasm,
    /// A core module where a component was expected.
    #[error(
        "is a core WebAssembly module, not a component; wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// wasmtime could not compile it.
    #[error("invalid component: {0}")]
    Compile(String),
    /// It does not export what its manifest's world requires.
    #[error("does not implement world {expected}: it exports [{found}], not {export}")]
    WrongWorld {
        /// The world the manifest names.
        expected: World,
        /// The export that world requires.
        export: &'static str,
        /// What the component does export.
        found: String,
    },
    /// It needs imports the host does not provide, or its exports have the wrong types.
    #[error("cannot be linked against the host: {0}")]
    Link(String),
    /// Its manifest asks for more than the host allows.
    #[error("manifest asks for {asked} bytes of memory, more than the host's limit of {limit}")]
    MemoryOverLimit {
        /// What the manifest asked for.
        asked: u64,
        /// The engine's limit.
        limit: u64,
    },
    /// Asking the plugin for its properties failed.
    #[error("properties() failed: {0}")]
    Properties(Box<CallError>),
    /// The manifest names a world this host reads but does not run (none
    /// today: every world is served; kept for a world added to the WIT
    /// before its host).
    #[error("world {0} is not served by this version of the host")]
    Unserved(World),
}

/// Which budget a failure counts against, as in Flyte: a user failure is the
/// task's own fault; a system failure is the platform's (a plugin trap, a
/// timeout, an eviction) and is retried on a separate budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The task failed.
    User,
    /// The platform failed.
    System,
}

/// Why one plugin call failed. Each variant says which plugin, which call, and why.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past the manifest's deadline and was interrupted.
    #[error("plugin {plugin}: {call} exceeded its deadline of {deadline:?} and was stopped")]
    Deadline {
        /// Plugin name.
        plugin: String,
        /// The call, e.g. `build-resource`.
        call: &'static str,
        /// The deadline.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past the manifest's limit.
    #[error("plugin {plugin}: {call} ran out of memory (limit {limit} bytes)")]
    OutOfMemory {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The memory limit.
        limit: u64,
    },
    /// The guest exhausted its stack (unbounded recursion).
    #[error("plugin {plugin}: {call} overflowed its stack (unbounded recursion?)")]
    StackOverflow {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
    },
    /// The guest trapped (a panic, an unreachable, a bad memory access).
    #[error("plugin {plugin}: {call} trapped: {reason}")]
    Trap {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The trap, with the guest's last error log line (its panic message) when there is one.
        reason: String,
    },
    /// No instance could be created (the pool is exhausted, or the guest's start function failed).
    #[error("plugin {plugin}: cannot instantiate for {call}: {reason}")]
    Instantiate {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// Why.
        reason: String,
    },
    /// The guest returned more than the manifest's output limit.
    #[error("plugin {plugin}: {call} returned {size} bytes, over the limit of {limit}")]
    OutputTooLarge {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// Bytes returned.
        size: usize,
        /// The limit.
        limit: u64,
    },
    /// The guest returned something that is not what the contract asks for.
    #[error("plugin {plugin}: {call} returned an invalid result: {problem}")]
    InvalidOutput {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The built resource breaks the plugin's manifest (undeclared kind, another namespace).
    #[error("plugin {plugin}: {call} was denied: {problem}")]
    Forbidden {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// What it tried.
        problem: String,
    },
    /// A web-API plugin's request was refused, too large or too slow: the
    /// host's view, naming the URL, whatever the guest made of it.
    #[error("{message}")]
    Egress {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// `egress_denied`, `response_too_large` or `egress_timeout`.
        label: &'static str,
        /// What happened, naming the plugin and the URL.
        message: String,
        /// Whether a retry may help (a timeout may pass; a denial will not).
        retryable: bool,
    },
    /// The plugin returned an error on purpose (a WIT `plugin-error`).
    #[error("plugin {plugin}: {call} failed: {message}")]
    Plugin {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The plugin's message.
        message: String,
        /// Whether the plugin says a retry may help.
        retryable: bool,
    },
}

impl CallError {
    /// Which retry budget this failure counts against.
    pub fn kind(&self) -> FailureKind {
        match self {
            CallError::Plugin { .. } => FailureKind::User,
            CallError::Egress { retryable, .. } if !retryable => FailureKind::User,
            _ => FailureKind::System,
        }
    }

    /// Whether a new attempt may succeed. Faults of the sandbox (traps,
    /// deadlines, memory) may be transient; a plugin that breaks its own
    /// contract or manifest will do so again.
    pub fn retryable(&self) -> bool {
        match self {
            CallError::Plugin { retryable, .. } | CallError::Egress { retryable, .. } => *retryable,
            CallError::InvalidOutput { .. }
            | CallError::Forbidden { .. }
            | CallError::OutputTooLarge { .. } => false,
            _ => true,
        }
    }

    /// A short label for metrics (`deadline`, `oom`, `trap`, ...).
    pub fn metric_label(&self) -> &'static str {
        match self {
            CallError::Deadline { .. } => "deadline",
            CallError::OutOfMemory { .. } => "oom",
            CallError::StackOverflow { .. } => "stack_overflow",
            CallError::Trap { .. } => "trap",
            CallError::Instantiate { .. } => "instantiate",
            CallError::OutputTooLarge { .. } => "output_too_large",
            CallError::InvalidOutput { .. } => "invalid_output",
            CallError::Forbidden { .. } => "forbidden",
            CallError::Plugin { .. } => "plugin_error",
            CallError::Egress { label, .. } => label,
        }
    }

    /// Whether the sandbox stopped the guest (trap, deadline, memory, stack):
    /// what a circuit breaker counts.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            CallError::Deadline { .. }
                | CallError::OutOfMemory { .. }
                | CallError::StackOverflow { .. }
                | CallError::Trap { .. }
        )
    }
}

/// Everything the host tells a task plugin about a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskContext {
    /// The Workflow's name.
    pub workflow: String,
    /// The Workflow's uid, for the owner reference on what the plugin builds.
    pub workflow_uid: String,
    /// The Workflow's namespace.
    pub namespace: String,
    /// The node's id.
    pub node_id: String,
    /// Attempt number from 0.
    pub attempt: u32,
    /// Task type.
    pub task_type: String,
    /// The node's task config.
    pub config: Value,
    /// The node's resolved inputs.
    pub inputs: Value,
    /// The deterministic resource name for this attempt.
    pub resource_name: String,
    /// Labels every resource of this task carries.
    pub labels: BTreeMap<String, String>,
}

/// Label naming the Workflow on every resource of its tasks.
pub const LABEL_WORKFLOW: &str = "weft.dev/workflow";
/// Label naming the node.
pub const LABEL_NODE: &str = "weft.dev/node";
/// Label naming the attempt.
pub const LABEL_ATTEMPT: &str = "weft.dev/attempt";

impl TaskContext {
    /// The context of one attempt of a task node, with the deterministic
    /// resource name and the labels the host always sets.
    #[allow(clippy::too_many_arguments)]
    pub fn for_attempt(
        workflow: &str,
        workflow_uid: &str,
        namespace: &str,
        node_id: &str,
        attempt: u32,
        task_type: &str,
        config: Value,
        inputs: Value,
    ) -> Self {
        let labels = BTreeMap::from([
            (LABEL_WORKFLOW.to_string(), label_value(workflow)),
            (LABEL_NODE.to_string(), label_value(node_id)),
            (LABEL_ATTEMPT.to_string(), attempt.to_string()),
        ]);
        TaskContext {
            workflow: workflow.into(),
            workflow_uid: workflow_uid.into(),
            namespace: namespace.into(),
            node_id: node_id.into(),
            attempt,
            task_type: task_type.into(),
            config,
            inputs,
            resource_name: resource_name(workflow, node_id, attempt),
            labels,
        }
    }
}

/// The name of the resource of one attempt: `<workflow>-<node>-<attempt>`,
/// made a DNS-1123 label. Deterministic, so a controller that crashed after
/// creating it finds the same resource instead of creating another. When
/// too long (or altered to be valid) it is cut and ends in a hash of the
/// full name, so two long names never collide.
pub fn resource_name(workflow: &str, node_id: &str, attempt: u32) -> String {
    let full = format!("{workflow}-{node_id}-{attempt}");
    let mut clean: String = full
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean == full && clean.len() <= 63 && crate::manifest::check_dns_label(&clean).is_ok() {
        return clean;
    }
    let hash = &Digest::of(full.as_bytes()).hex()[..10];
    clean.truncate(63 - 11);
    let clean = clean.trim_matches('-');
    format!("{clean}-{hash}")
}

/// Makes a string a valid label value (at most 63 characters of
/// alphanumerics, '-', '_', '.'), hashing the rest when it must cut.
fn label_value(s: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if s.len() <= 63 && s.chars().all(ok) {
        return s.to_string();
    }
    let mut clean: String = s.chars().map(|c| if ok(c) { c } else { '-' }).collect();
    clean.truncate(52);
    let hash = &Digest::of(s.as_bytes()).hex()[..10];
    format!(
        "{}-{hash}",
        clean.trim_matches(|c: char| !c.is_ascii_alphanumeric())
    )
}

/// A task phase (the WIT `phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Cannot start yet.
    NotReady,
    /// Accepted, waiting to be scheduled.
    Queued,
    /// Waiting for capacity.
    WaitingForResources,
    /// Starting.
    Initializing,
    /// Running.
    Running,
    /// Succeeded.
    Success,
    /// Failed; a retry may help.
    RetryableFailure,
    /// Failed for good.
    PermanentFailure,
}

impl Phase {
    /// Whether the task is over.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Phase::Success | Phase::RetryableFailure | Phase::PermanentFailure
        )
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        f.write_str(v.as_str().unwrap_or("?"))
    }
}

impl From<wit::Phase> for Phase {
    fn from(p: wit::Phase) -> Self {
        match p {
            wit::Phase::NotReady => Phase::NotReady,
            wit::Phase::Queued => Phase::Queued,
            wit::Phase::WaitingForResources => Phase::WaitingForResources,
            wit::Phase::Initializing => Phase::Initializing,
            wit::Phase::Running => Phase::Running,
            wit::Phase::Success => Phase::Success,
            wit::Phase::RetryableFailure => Phase::RetryableFailure,
            wit::Phase::PermanentFailure => Phase::PermanentFailure,
        }
    }
}

/// A link to logs or a UI.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLink {
    /// Display name.
    pub name: String,
    /// Where.
    pub uri: String,
}

/// A task plugin's view of where a task stands.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PhaseInfo {
    /// The phase.
    pub phase: Phase,
    /// Machine-readable reason. A reason starting with `System:` marks a
    /// platform failure (eviction, node loss) for the system retry budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Outputs of a successful task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Map<String, Value>>,
    /// Links to logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log_links: Vec<LogLink>,
}

impl PhaseInfo {
    /// Which budget a failure counts against: `System:` reasons are the platform's.
    pub fn failure_kind(&self) -> FailureKind {
        match &self.reason {
            Some(r) if r.starts_with("System:") => FailureKind::System,
            _ => FailureKind::User,
        }
    }
}

/// What to do with a task's resource when its workflow is aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AbortBehaviour {
    /// Delete it.
    Delete,
    /// Leave it.
    Leave,
}

/// A task plugin's static properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskProperties {
    /// What to do on abort.
    pub abort: AbortBehaviour,
    /// Whether to delete the resource once the task finished.
    pub delete_on_finish: bool,
}

/// The owner of everything a task plugin builds.
pub const OWNER_API_VERSION: &str = "weft.dev/v1alpha1";
/// The owner's kind.
pub const OWNER_KIND: &str = "Workflow";
/// Label set on every resource the host creates for a task.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "weft");

/// A loaded plugin version of one of the three worlds.
#[derive(Clone)]
pub enum Plugin {
    /// A task plugin.
    Task(Arc<TaskPlugin>),
    /// A middleware plugin.
    Middleware(Arc<MiddlewarePlugin>),
    /// A web-API task plugin.
    WebApi(Arc<crate::webapi::WebApiPlugin>),
}

/// `base` with `overrides` winning key by key (top level only).
fn merged(base: &Map<String, Value>, overrides: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in overrides {
        out.insert(k.clone(), v.clone());
    }
    out
}

impl Plugin {
    /// The same version with another whole configuration (see
    /// [`TaskPlugin::set_config`]); the compiled code is shared.
    pub fn with_config(&self, config: Map<String, Value>) -> Plugin {
        match self {
            Plugin::Task(t) => {
                let mut t = TaskPlugin::clone(t);
                t.set_config(config);
                Plugin::Task(Arc::new(t))
            }
            Plugin::Middleware(m) => {
                let mut m = MiddlewarePlugin::clone(m);
                m.set_config(config);
                Plugin::Middleware(Arc::new(m))
            }
            Plugin::WebApi(w) => {
                let mut w = crate::webapi::WebApiPlugin::clone(w);
                w.set_config(config);
                Plugin::WebApi(Arc::new(w))
            }
        }
    }

    /// Load a component with its manifest. Blocking (may compile): call it off the async runtime.
    pub fn load(
        engine: &PluginEngine,
        bytes: &[u8],
        manifest: Manifest,
        origin: &str,
    ) -> Result<(Plugin, CompileSource), LoadError> {
        let fail = |problem| LoadError {
            origin: origin.to_string(),
            problem,
        };
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(fail(LoadProblem::CoreModule)),
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(fail(LoadProblem::NotWasm)),
        }
        if manifest.limits.memory > engine.inner.max_memory {
            return Err(fail(LoadProblem::MemoryOverLimit {
                asked: manifest.limits.memory,
                limit: engine.inner.max_memory,
            }));
        }
        let digest = Digest::of(bytes);
        let (component, source) = engine
            .compile(digest, bytes)
            .map_err(|e| fail(LoadProblem::Compile(format!("{e:#}"))))?;
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&engine.inner.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let export = manifest.world.export_name();
        if !exports.iter().any(|e| e == export) {
            return Err(fail(LoadProblem::WrongWorld {
                expected: manifest.world,
                export,
                found: exports.join(", "),
            }));
        }
        if manifest.world != World::WebapiTaskPlugin {
            let imports = ty
                .imports(&engine.inner.engine)
                .map(|(name, _)| name.to_string());
            if let Some(http) = imports.into_iter().find(|i| i.starts_with("wasi:http/")) {
                return Err(fail(LoadProblem::Link(format!(
                    "it imports {http}, but only a webapi-task-plugin may make outbound HTTP (this is a {})",
                    manifest.world
                ))));
            }
        }
        let pre = engine
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
        let common = Common {
            name: manifest.name.clone().into(),
            state: engine.state_of(&manifest.name),
            config_json: Value::Object(manifest.config_without_secret_refs()).to_string(),
            manifest: Arc::new(manifest),
            digest,
            size: bytes.len(),
            engine: engine.clone(),
            outbound: None,
        };
        let plugin = match common.manifest.world {
            World::K8sTaskPlugin => {
                let pre = K8sTaskPluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                let spares = common.spares(prepare(&common, &pre, warm_task_instance));
                let mut plugin = TaskPlugin {
                    common,
                    pre,
                    spares,
                    properties: TaskProperties {
                        abort: AbortBehaviour::Delete,
                        delete_on_finish: false,
                    },
                };
                plugin.properties = plugin
                    .call_properties()
                    .map_err(|e| fail(LoadProblem::Properties(Box::new(e))))?;
                Plugin::Task(Arc::new(plugin))
            }
            World::WebapiTaskPlugin => {
                let pre = crate::bindings::webapi::WebapiTaskPluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                Plugin::WebApi(Arc::new(crate::webapi::WebApiPlugin::new(common, pre)))
            }
            World::MiddlewarePlugin => {
                let pre = MiddlewarePluginPre::new(pre)
                    .map_err(|e| fail(LoadProblem::Link(format!("{e:#}"))))?;
                let spares = common.spares(prepare(&common, &pre, |p, s| p.instantiate(s)));
                Plugin::Middleware(Arc::new(MiddlewarePlugin {
                    common,
                    pre,
                    spares,
                }))
            }
        };
        Ok((plugin, source))
    }

    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common().manifest
    }

    /// The component's digest.
    pub fn digest(&self) -> Digest {
        self.common().digest
    }

    /// The component's size in bytes.
    pub fn size(&self) -> usize {
        self.common().size
    }

    fn common(&self) -> &Common {
        match self {
            Plugin::Task(p) => &p.common,
            Plugin::Middleware(p) => &p.common,
            Plugin::WebApi(p) => &p.common,
        }
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.common();
        write!(f, "{}@{} ({:?})", c.name, c.manifest.version, c.digest)
    }
}

/// What every kind of plugin carries.
#[derive(Clone)]
pub(crate) struct Common {
    pub(crate) name: Arc<str>,
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) digest: Digest,
    size: usize,
    state: Arc<StateStore>,
    /// The plugin config as JSON, serialized once at load instead of per call.
    pub(crate) config_json: String,
    engine: PluginEngine,
    /// A web-API plugin's outbound HTTP (`None`: every request is denied).
    pub(crate) outbound: Option<Arc<crate::outbound::Outbound>>,
}

impl Common {
    pub(crate) fn set_config(&mut self, config: Map<String, Value>) {
        self.config_json = Value::Object(config).to_string();
    }

    fn limits(&self) -> Limits {
        self.manifest.limits
    }

    fn store(&self, call: &'static str) -> Store<HostState> {
        let limits = self.limits();
        let mut data = HostState::new(self.name.clone(), call, limits.memory, self.state.clone());
        data.http.hooks.outbound = self.outbound.clone();
        let mut store = Store::new(&self.engine.inner.engine, data);
        store.limiter(|s| &mut s.limiter);
        self.arm_deadline(&mut store);
        if self.outbound.is_some() {
            self.deadline_leaving_out_network(&mut store);
        } else {
            store.epoch_deadline_trap();
        }
        store
    }

    /// A web-API plugin waits on the network inside its calls: its
    /// deadline counts only the guest's own time. (Each request is bounded
    /// apart by `egress.timeout`.)
    fn deadline_leaving_out_network(&self, store: &mut Store<HostState>) {
        let deadline = self.limits().deadline;
        let tick = self.engine.inner.tick.as_nanos().max(1);
        store.epoch_deadline_callback(move |ctx| {
            let data = ctx.data();
            let waited = data.http.hooks.waited();
            let used = data.started.elapsed().saturating_sub(waited);
            let Some(left) = deadline.checked_sub(used).filter(|l| !l.is_zero()) else {
                return Err(Trap::Interrupt.into());
            };
            let ticks = u64::try_from(left.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
            Ok(wasmtime::UpdateDeadline::Continue(ticks.saturating_add(1)))
        });
    }

    /// Spares of this version, if the engine keeps any.
    pub(crate) fn spares<B: Send + 'static>(&self, make: Make<B>) -> Arc<Spares<B>> {
        let inner = &self.engine.inner;
        Spares::new(inner.preparer.clone(), inner.spares, make)
    }

    /// A fresh instance for one call: a spare prepared ahead of time when
    /// one is ready, else one instantiated now. Either way it was never
    /// called before, and its deadline starts now.
    pub(crate) fn fresh<B: Send + 'static>(
        &self,
        spares: &Arc<Spares<B>>,
        call: &'static str,
        instantiate: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<B>,
    ) -> (CallStore<B>, wasmtime::Result<B>) {
        let (store, bindings) = match spares.take() {
            Some(Prepared {
                mut store,
                bindings,
            }) => {
                store.data_mut().call = call;
                self.arm_deadline(&mut store);
                (store, Ok(bindings))
            }
            None => {
                let mut store = self.store(call);
                let bindings = instantiate(&mut store);
                (store, bindings)
            }
        };
        (CallStore::new(store, spares.clone()), bindings)
    }

    /// Sets the store's epoch deadline to the manifest's deadline from now.
    fn arm_deadline(&self, store: &mut Store<HostState>) {
        store.data_mut().started = std::time::Instant::now();
        let tick = self.engine.inner.tick.as_nanos().max(1);
        let ticks =
            u64::try_from(self.limits().deadline.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
        // One extra tick: the deadline is never cut short by a tick that was
        // already half over when the call started.
        store.set_epoch_deadline(ticks.saturating_add(1));
    }

    /// Turns a wasmtime error from instantiating or calling into a typed failure.
    pub(crate) fn classify(
        &self,
        store: &mut Store<HostState>,
        call: &'static str,
        err: wasmtime::Error,
    ) -> CallError {
        let plugin = self.name.to_string();
        let data = store.data_mut();
        data.flush_stdio();
        let limits = self.limits();
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::Deadline {
                plugin,
                call,
                deadline: limits.deadline,
            },
            Some(Trap::StackOverflow) => CallError::StackOverflow { plugin, call },
            Some(_) if data.limiter.denied => CallError::OutOfMemory {
                plugin,
                call,
                limit: limits.memory,
            },
            Some(trap) => {
                let reason = match &data.last_error {
                    Some(msg) => format!("{trap}; the plugin's last error: {msg}"),
                    None => trap.to_string(),
                };
                CallError::Trap {
                    plugin,
                    call,
                    reason,
                }
            }
            None if data.limiter.denied => CallError::OutOfMemory {
                plugin,
                call,
                limit: limits.memory,
            },
            None => CallError::Trap {
                plugin,
                call,
                reason: format!("{err:#}"),
            },
        }
    }

    /// A plugin's answer about a task, whichever world it came from, held
    /// to the output limit and the contract (outputs are a JSON object).
    pub(crate) fn phase_info(
        &self,
        call: &'static str,
        phase: Phase,
        (reason, message, outputs): (Option<String>, Option<String>, Option<String>),
        log_links: impl Iterator<Item = (String, String)>,
    ) -> Result<PhaseInfo, CallError> {
        let invalid = |problem: String| CallError::InvalidOutput {
            plugin: self.name.to_string(),
            call,
            problem,
        };
        let outputs = match outputs {
            None => None,
            Some(s) => {
                self.check_output(call, &s)?;
                match serde_json::from_str::<Value>(&s) {
                    Ok(Value::Object(m)) => Some(m),
                    Ok(_) => return Err(invalid("outputs must be a JSON object".into())),
                    Err(e) => return Err(invalid(format!("outputs are not JSON: {e}"))),
                }
            }
        };
        for s in [&message, &reason].into_iter().flatten() {
            self.check_output(call, s)?;
        }
        Ok(PhaseInfo {
            phase,
            reason,
            message,
            outputs,
            log_links: log_links.map(|(name, uri)| LogLink { name, uri }).collect(),
        })
    }

    pub(crate) fn check_output(&self, call: &'static str, s: &str) -> Result<(), CallError> {
        let limit = self.limits().output;
        if s.len() as u64 > limit {
            return Err(CallError::OutputTooLarge {
                plugin: self.name.to_string(),
                call,
                size: s.len(),
                limit,
            });
        }
        Ok(())
    }
}

/// How the preparer makes a spare of a version: a store like a call's,
/// instantiated from the version's `InstancePre`.
pub(crate) fn prepare<P, B: 'static>(
    common: &Common,
    pre: &P,
    instantiate: fn(&P, &mut Store<HostState>) -> wasmtime::Result<B>,
) -> Make<B>
where
    P: Clone + Send + Sync + 'static,
{
    let (common, pre) = (common.clone(), pre.clone());
    Box::new(move || {
        let mut store = common.store("prepare");
        let bindings = instantiate(&pre, &mut store)?;
        Ok(Prepared { store, bindings })
    })
}

/// A JSON value as text. `serde_json::to_string` writes into a buffer
/// sized for it; `Value`'s `Display` goes through the formatter a token at
/// a time, which was 12% of the host's share of a pod call in a profile.
fn json(value: &Value) -> String {
    // A `Value` always serialises: its keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}

/// Instantiates a task plugin's spare and asks it for its properties.
/// That first call carries no task's data (it takes no arguments and
/// every instance answers the same), and it runs what a language runtime
/// does lazily on its first export call (CPython, SpiderMonkey) before a
/// task waits for it.
fn warm_task_instance(
    pre: &K8sTaskPluginPre<HostState>,
    store: &mut Store<HostState>,
) -> wasmtime::Result<K8sTaskBindings> {
    let bindings = pre.instantiate(&mut *store)?;
    bindings.weft_plugin_k8s_task().call_properties(store)?;
    Ok(bindings)
}

/// A loaded task plugin version. Cloning is cheap (shared compiled code
/// and spares); a clone can take its own config overrides.
#[derive(Clone)]
pub struct TaskPlugin {
    common: Common,
    pre: K8sTaskPluginPre<HostState>,
    spares: Arc<Spares<K8sTaskBindings>>,
    properties: TaskProperties,
}

impl fmt::Debug for TaskPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TaskPlugin({}@{} {:?})",
            self.common.name, self.common.manifest.version, self.common.digest
        )
    }
}

/// Per-call measurements, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    /// The highest linear memory size the instance reached, in bytes.
    pub memory_peak: usize,
}

impl TaskPlugin {
    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common.manifest
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.common.name
    }

    /// The component digest of this version.
    pub fn digest(&self) -> Digest {
        self.common.digest
    }

    /// The plugin's static properties, asked once at load.
    pub fn properties(&self) -> TaskProperties {
        self.properties
    }

    /// Replace the plugin configuration (manifest defaults merged with the
    /// operator's overrides, overrides winning key by key).
    pub fn set_config_overrides(&mut self, overrides: &Map<String, Value>) {
        let base = self.common.manifest.config_without_secret_refs();
        let overrides = crate::manifest::without_secret_refs(overrides);
        self.common.set_config(merged(&base, &overrides));
    }

    /// Replace the whole plugin configuration the guest sees (e.g. with
    /// Secret references resolved). It lives only in memory: nothing
    /// prints or stores it.
    pub fn set_config(&mut self, config: Map<String, Value>) {
        self.common.set_config(config);
    }

    fn call_properties(&self) -> Result<TaskProperties, CallError> {
        const CALL: &str = "properties";
        let mut store = self.common.store(CALL);
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|i| i.weft_plugin_k8s_task().call_properties(&mut store));
        match result {
            Ok(WitProps {
                abort,
                delete_on_finish,
            }) => Ok(TaskProperties {
                abort: match abort {
                    WitAbort::Delete => AbortBehaviour::Delete,
                    WitAbort::Leave => AbortBehaviour::Leave,
                },
                delete_on_finish,
            }),
            Err(e) => Err(self.common.classify(&mut store, CALL, e)),
        }
    }

    /// The task as the WIT call takes it (JSON strings: the 0.1 contract).
    fn wit_context(&self, ctx: &TaskContext) -> wit::TaskContext {
        wit::TaskContext {
            workflow: ctx.workflow.clone(),
            namespace: ctx.namespace.clone(),
            node_id: ctx.node_id.clone(),
            attempt: ctx.attempt,
            task_type: ctx.task_type.clone(),
            config: json(&ctx.config),
            inputs: json(&ctx.inputs),
            resource_name: ctx.resource_name.clone(),
            labels: ctx
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            plugin_config: self.common.config_json.clone(),
        }
    }

    /// Ask the plugin for the resource that runs this task, then hold it to
    /// the manifest: only declared kinds, only in the workflow's namespace,
    /// always owned by the Workflow and labelled as Weft's.
    pub fn build_resource(&self, ctx: &TaskContext) -> Result<(Value, CallStats), CallError> {
        const CALL: &str = "build-resource";
        let wctx = self.wit_context(ctx);
        let (mut store, instance) = self.instance(CALL);
        let result = instance.and_then(|i| {
            i.weft_plugin_k8s_task()
                .call_build_resource(&mut *store, &wctx)
        });
        let stats = CallStats {
            memory_peak: store.data().limiter.peak,
        };
        let out = match result {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                store.data_mut().flush_stdio();
                return Err(self.plugin_error(CALL, e));
            }
            Err(e) => return Err(self.common.classify(&mut store, CALL, e)),
        };
        store.data_mut().flush_stdio();
        drop(store);
        self.common.check_output(CALL, &out)?;
        let obj: Value =
            serde_json::from_str(&out).map_err(|e| self.invalid(CALL, format!("not JSON: {e}")))?;
        Ok((self.enforce(ctx, obj)?, stats))
    }

    /// A fresh instance for one call (see [`Common::fresh`]).
    fn instance(
        &self,
        call: &'static str,
    ) -> (
        CallStore<K8sTaskBindings>,
        wasmtime::Result<K8sTaskBindings>,
    ) {
        self.common
            .fresh(&self.spares, call, |s| self.pre.instantiate(s))
    }

    /// How many prepared instances are ready now (see [`EngineConfig::spares`]).
    ///
    /// [`EngineConfig::spares`]: crate::EngineConfig::spares
    pub fn spares_ready(&self) -> usize {
        self.spares.ready()
    }

    /// An instance kept across calls, for measuring what a call costs without
    /// instantiation. The host never serves tasks this way: its instances are
    /// fresh per call so nothing of one task can reach another.
    pub fn warm_instance(&self) -> Result<WarmTaskInstance<'_>, CallError> {
        const CALL: &str = "build-resource";
        let mut store = self.common.store(CALL);
        match self.pre.instantiate(&mut store) {
            Ok(bindings) => Ok(WarmTaskInstance {
                plugin: self,
                store,
                bindings,
            }),
            Err(e) => Err(self.common.classify(&mut store, CALL, e)),
        }
    }

    /// Ask the plugin where the task stands, given the resource as last observed.
    pub fn get_task_phase(
        &self,
        ctx: &TaskContext,
        observed: &Value,
    ) -> Result<(PhaseInfo, CallStats), CallError> {
        const CALL: &str = "get-task-phase";
        let wctx = self.wit_context(ctx);
        let observed = observed.to_string();
        let (mut store, instance) = self.instance(CALL);
        let result = instance.and_then(|i| {
            i.weft_plugin_k8s_task()
                .call_get_task_phase(&mut *store, &wctx, &observed)
        });
        let stats = CallStats {
            memory_peak: store.data().limiter.peak,
        };
        let info = match result {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                store.data_mut().flush_stdio();
                return Err(self.plugin_error(CALL, e));
            }
            Err(e) => return Err(self.common.classify(&mut store, CALL, e)),
        };
        store.data_mut().flush_stdio();
        drop(store);
        let links = info.log_links.into_iter().map(|l| (l.name, l.uri));
        let parts = (info.reason, info.message, info.outputs);
        let info = self
            .common
            .phase_info(CALL, info.phase.into(), parts, links)?;
        Ok((info, stats))
    }

    fn plugin_error(&self, call: &'static str, e: wit::PluginError) -> CallError {
        CallError::Plugin {
            plugin: self.common.name.to_string(),
            call,
            message: e.message,
            retryable: e.retryable,
        }
    }

    fn invalid(&self, call: &'static str, problem: String) -> CallError {
        CallError::InvalidOutput {
            plugin: self.common.name.to_string(),
            call,
            problem,
        }
    }

    fn enforce(&self, ctx: &TaskContext, mut obj: Value) -> Result<Value, CallError> {
        const CALL: &str = "build-resource";
        let name = self.common.name.to_string();
        let forbidden = |problem: String| CallError::Forbidden {
            plugin: name.clone(),
            call: CALL,
            problem,
        };
        let Some(map) = obj.as_object_mut() else {
            return Err(self.invalid(CALL, "the resource must be a JSON object".into()));
        };
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if api_version.is_empty() || kind.is_empty() {
            return Err(self.invalid(CALL, "the resource needs apiVersion and kind".into()));
        }
        if !self.common.manifest.allows(&api_version, &kind) {
            let allowed: Vec<String> = self
                .common
                .manifest
                .resources
                .iter()
                .map(ToString::to_string)
                .collect();
            return Err(forbidden(format!(
                "it built a {api_version}/{kind}, but its manifest only allows [{}]",
                allowed.join(", ")
            )));
        }
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(self.invalid(CALL, "metadata must be an object".into()));
        };
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), ctx.namespace.clone().into());
            }
            Some(ns) if ns == ctx.namespace => {}
            Some(ns) => {
                return Err(forbidden(format!(
                    "it built {kind} in namespace {ns:?}, but the workflow runs in {:?}",
                    ctx.namespace
                )));
            }
        }
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => {}
            _ => {
                meta.insert("name".into(), ctx.resource_name.clone().into());
            }
        }
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(labels) = labels.as_object_mut() else {
            return Err(self.invalid(CALL, "metadata.labels must be an object".into()));
        };
        for (k, v) in &ctx.labels {
            labels.insert(k.clone(), v.clone().into());
        }
        labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
        // The Workflow owns what its tasks create: deleting it collects them,
        // and no plugin can hand a resource to another owner.
        meta.insert(
            "ownerReferences".into(),
            serde_json::json!([{
                "apiVersion": OWNER_API_VERSION,
                "kind": OWNER_KIND,
                "name": ctx.workflow,
                "uid": ctx.workflow_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        );
        Ok(obj)
    }
}

/// One task plugin instance reused across calls; see [`TaskPlugin::warm_instance`].
pub struct WarmTaskInstance<'a> {
    plugin: &'a TaskPlugin,
    store: Store<HostState>,
    bindings: K8sTaskBindings,
}

impl WarmTaskInstance<'_> {
    /// Call build-resource and return the plugin's raw answer, unchecked:
    /// the cost of crossing into the guest and back, and nothing else.
    pub fn build_resource_raw(&mut self, ctx: &TaskContext) -> Result<String, CallError> {
        const CALL: &str = "build-resource";
        let wctx = self.plugin.wit_context(ctx);
        self.plugin.common.arm_deadline(&mut self.store);
        match self
            .bindings
            .weft_plugin_k8s_task()
            .call_build_resource(&mut self.store, &wctx)
        {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(self.plugin.plugin_error(CALL, e)),
            Err(e) => Err(self.plugin.common.classify(&mut self.store, CALL, e)),
        }
    }
}

/// A gRPC call as a middleware sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MiddlewareCall {
    /// Full method path.
    pub method: String,
    /// Request metadata, lower-case keys.
    pub metadata: Vec<(String, String)>,
    /// The peer's address.
    pub peer: Option<String>,
    /// The request as JSON; passed only when the manifest asks for it.
    pub request: Option<String>,
}

/// gRPC status codes a middleware may answer with.
pub use wit_mw::Code as RejectCode;

/// A middleware's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the call through with these metadata edits.
    Proceed {
        /// Keys to set.
        set: Vec<(String, String)>,
        /// Keys to remove.
        remove: Vec<String>,
    },
    /// Answer the call with an error.
    Reject {
        /// The gRPC code.
        code: RejectCode,
        /// The message.
        message: String,
    },
}

/// The numeric gRPC status code of a rejection code.
pub fn grpc_code(code: RejectCode) -> i32 {
    match code {
        RejectCode::Cancelled => 1,
        RejectCode::Unknown => 2,
        RejectCode::InvalidArgument => 3,
        RejectCode::DeadlineExceeded => 4,
        RejectCode::NotFound => 5,
        RejectCode::AlreadyExists => 6,
        RejectCode::PermissionDenied => 7,
        RejectCode::ResourceExhausted => 8,
        RejectCode::FailedPrecondition => 9,
        RejectCode::Aborted => 10,
        RejectCode::OutOfRange => 11,
        RejectCode::Unimplemented => 12,
        RejectCode::Internal => 13,
        RejectCode::Unavailable => 14,
        RejectCode::DataLoss => 15,
        RejectCode::Unauthenticated => 16,
    }
}

/// A loaded middleware plugin version.
#[derive(Clone)]
pub struct MiddlewarePlugin {
    common: Common,
    pre: MiddlewarePluginPre<HostState>,
    spares: Arc<Spares<MiddlewareBindings>>,
}

impl fmt::Debug for MiddlewarePlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MiddlewarePlugin({}@{} {:?})",
            self.common.name, self.common.manifest.version, self.common.digest
        )
    }
}

impl MiddlewarePlugin {
    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common.manifest
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.common.name
    }

    /// The component digest of this version.
    pub fn digest(&self) -> Digest {
        self.common.digest
    }

    /// What to do when this plugin faults.
    pub fn fail_strategy(&self) -> FailStrategy {
        self.common.manifest.middleware.fail_strategy
    }

    /// Replace the plugin configuration (see [`TaskPlugin::set_config_overrides`]).
    pub fn set_config_overrides(&mut self, overrides: &Map<String, Value>) {
        let base = self.common.manifest.config_without_secret_refs();
        let overrides = crate::manifest::without_secret_refs(overrides);
        self.common.set_config(merged(&base, &overrides));
    }

    /// Replace the whole configuration (see [`TaskPlugin::set_config`]).
    pub fn set_config(&mut self, config: Map<String, Value>) {
        self.common.set_config(config);
    }

    /// How many prepared instances are ready now (see [`TaskPlugin::spares_ready`]).
    pub fn spares_ready(&self) -> usize {
        self.spares.ready()
    }

    /// Decide on one call. The request body is dropped unless the manifest asks for it.
    pub fn on_request(&self, call: &MiddlewareCall) -> Result<Verdict, CallError> {
        const CALL: &str = "on-request";
        let wcall = wit_mw::Call {
            method: call.method.clone(),
            metadata: call.metadata.clone(),
            peer: call.peer.clone(),
            request: if self.common.manifest.middleware.request_body {
                call.request.clone()
            } else {
                None
            },
            plugin_config: self.common.config_json.clone(),
        };
        let (mut store, instance) = self
            .common
            .fresh(&self.spares, CALL, |s| self.pre.instantiate(s));
        let result = instance.and_then(|i| {
            i.weft_plugin_middleware()
                .call_on_request(&mut *store, &wcall)
        });
        let verdict = match result {
            Ok(v) => v,
            Err(e) => return Err(self.common.classify(&mut store, CALL, e)),
        };
        store.data_mut().flush_stdio();
        drop(store);
        Ok(match verdict {
            wit_mw::Verdict::Proceed(edits) => Verdict::Proceed {
                set: edits.set,
                remove: edits.remove,
            },
            wit_mw::Verdict::Reject(r) => {
                self.common.check_output(CALL, &r.message)?;
                Verdict::Reject {
                    code: r.code,
                    message: r.message,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_are_deterministic_valid_labels() {
        assert_eq!(resource_name("hello", "greet", 0), "hello-greet-0");
        let long = "w".repeat(80);
        let a = resource_name(&long, "node", 1);
        let b = resource_name(&long, "node", 2);
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b, "attempts differ even when cut");
        assert_eq!(a, resource_name(&long, "node", 1));
        let odd = resource_name("My_Flow", "Step.1", 0);
        assert!(crate::manifest::check_dns_label(&odd).is_ok(), "{odd}");
        assert_ne!(
            odd,
            resource_name("my-flow", "step-1", 0),
            "no collision after cleaning"
        );
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("train"), "train");
        let v = label_value(&"x/".repeat(50));
        assert!(v.len() <= 63 && !v.contains('/'), "{v}");
    }
}
