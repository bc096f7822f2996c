//! The task world (`weft:plugin/k8s-task-plugin`): what the host tells a
//! task plugin ([`TaskContext`]), what it answers ([`PhaseInfo`],
//! [`TaskProperties`]), and a loaded task plugin version ([`TaskPlugin`])
//! with its calls. The web-API world shares the task types.

use std::{collections::BTreeMap, fmt, sync::Arc};

use serde_json::{Map, Value};
use wasmtime::Store;

use crate::call::{CallError, CallStats, Common, FailureKind, json};
use crate::{
    bindings::task::{
        K8sTaskPlugin as K8sTaskBindings, K8sTaskPluginPre,
        exports::weft::plugin::k8s_task::{AbortBehaviour as WitAbort, TaskProperties as WitProps},
        weft::plugin::types as wit,
    },
    engine::Digest,
    host::HostState,
    manifest::Manifest,
    prepared::{CallStore, Spares},
};

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
pub(crate) fn label_value(s: &str) -> String {
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

/// Instantiates a task plugin's spare and asks it for its properties.
/// That first call carries no task's data (it takes no arguments and
/// every instance answers the same), and it runs what a language runtime
/// does lazily on its first export call (CPython, SpiderMonkey) before a
/// task waits for it.
pub(crate) fn warm_task_instance(
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
    pub(crate) common: Common,
    pub(crate) pre: K8sTaskPluginPre<HostState>,
    pub(crate) spares: Arc<Spares<K8sTaskBindings>>,
    pub(crate) properties: TaskProperties,
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
        self.common.set_config_overrides(overrides);
    }

    /// Replace the whole plugin configuration the guest sees (e.g. with
    /// Secret references resolved). It lives only in memory: nothing
    /// prints or stores it.
    pub fn set_config(&mut self, config: Map<String, Value>) {
        self.common.set_config(config);
    }

    pub(crate) fn call_properties(&self) -> Result<TaskProperties, CallError> {
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
        let info = checked_phase_info(&self.common, CALL, info.phase.into(), parts, links)?;
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

/// A plugin's answer about a task, whichever world it came from, held
/// to the output limit and the contract (outputs are a JSON object).
pub(crate) fn checked_phase_info(
    common: &Common,
    call: &'static str,
    phase: Phase,
    (reason, message, outputs): (Option<String>, Option<String>, Option<String>),
    log_links: impl Iterator<Item = (String, String)>,
) -> Result<PhaseInfo, CallError> {
    let invalid = |problem: String| CallError::InvalidOutput {
        plugin: common.name.to_string(),
        call,
        problem,
    };
    let outputs = match outputs {
        None => None,
        Some(s) => {
            common.check_output(call, &s)?;
            match serde_json::from_str::<Value>(&s) {
                Ok(Value::Object(m)) => Some(m),
                Ok(_) => return Err(invalid("outputs must be a JSON object".into())),
                Err(e) => return Err(invalid(format!("outputs are not JSON: {e}"))),
            }
        }
    };
    for s in [&message, &reason].into_iter().flatten() {
        common.check_output(call, s)?;
    }
    Ok(PhaseInfo {
        phase,
        reason,
        message,
        outputs,
        log_links: log_links.map(|(name, uri)| LogLink { name, uri }).collect(),
    })
}
