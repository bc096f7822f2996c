//! Any Kubernetes object as a task, without writing a plugin: Argo's
//! resource template as a Weft component. The task config carries the
//! object's template and CEL conditions that say, from the object's
//! status, whether it succeeded, failed or runs.
//!
//! # Task config
//!
//! | key                | required | what                                                                 |
//! |--------------------|----------|----------------------------------------------------------------------|
//! | `manifest`         | yes      | the object to create (`apiVersion`, `kind`, `metadata`, `spec`, ...)  |
//! | `successCondition` | yes      | CEL over `object`: the task succeeded                                 |
//! | `failureCondition` | no       | CEL over `object`: the task failed                                    |
//! | `runningCondition` | no       | CEL over `object`: the task runs (else: runs as soon as it has a status) |
//! | `outputs`          | no       | name → CEL over `object`, evaluated once on success                   |
//! | `failureRetryable` | no       | whether a failure may be retried (default: the plugin config's, `true`) |
//! | `podSpecs`         | no       | JSON Pointers to the object's pod specs, for artifacts (default: by kind, below) |
//!
//! ```yaml
//! task:
//!   type: k8s-resource
//!   config:
//!     manifest:
//!       apiVersion: kubeflow.org/v1
//!       kind: PyTorchJob
//!       spec:
//!         pytorchReplicaSpecs:
//!           Master:
//!             replicas: 1
//!             template:
//!               spec:
//!                 containers:
//!                   - name: pytorch
//!                     image: "${inputs.image}"
//!                     args: ["--epochs=${inputs.epochs}", "--lr=${inputs.lr}"]
//!     successCondition: object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')
//!     failureCondition: object.status.conditions.exists(c, c.type == 'Failed' && c.status == 'True')
//!     outputs:
//!       completed: object.status.completionTime
//! ```
//!
//! # The template
//!
//! `${inputs.<name>}` in a string value of `manifest` is the node's input
//! `<name>`. A string that is exactly one placeholder takes the input's
//! JSON value with its type (`"${inputs.epochs}"` becomes the number `10`,
//! an object stays an object); inside a longer string the input is
//! interpolated as text (strings as they are, anything else as JSON). So
//! where Kubernetes wants a string (a container's `args`, an env `value`)
//! and the input is a number, write text around it (`--epochs=${inputs.epochs}`):
//! a lone placeholder would give the API server a number. An input the
//! node does not have is a permanent error that names it. Any other
//! `${...}` (a shell's `${HOME}` in a container command) is left as it is.
//!
//! The host decides where the object lives, so the plugin forces
//! `metadata.name` to the host's resource name (deterministic per attempt:
//! a re-run after a crash finds the same object; a `generateName` is
//! dropped), `metadata.namespace` to the workflow's namespace, and adds the
//! host's labels to `metadata.labels` (the host's win over the template's).
//!
//! # Artifacts
//!
//! A task's input and output artifacts (and an archived log) move in the
//! pods the object runs, as in a Pod task: the plugin marks the object's
//! pod specs with the SDK's `pods::mark_pod_specs`, and the host adds the
//! init container that fetches the inputs and runs the main container's
//! `command` under `weft io exec`, which uploads the outputs. The first
//! pod spec reports the outputs; the others get the inputs. `podSpecs`
//! names them; without it a Job's `/spec/template/spec` is marked, and the
//! `Master` then `Worker` replicas of a PyTorchJob (`pytorchReplicaSpecs`)
//! or a TFJob (`tfReplicaSpecs`, `Chief` first) that the object has.
//! `podSpecs: []` marks none.
//!
//! # Which kinds
//!
//! Two gates, both on the plugin's manifest (`weft-plugin.yaml`): the host
//! creates only the kinds of its `resources`, and the plugin refuses, at
//! build time and with a permanent error that names the kind, a template
//! whose kind is not in the plugin config's `allowedKinds` (a list of
//! `{apiVersion, kind}`; without it, [`DEFAULT_KINDS`]). The shipped
//! manifest lists the same kinds in both. An operator who wants another
//! kind adds it to both lists of the plugin's manifest (e.g. in its
//! ConfigMap) and grants the host's service account the RBAC to create,
//! get and delete it.
//!
//! # Conditions
//!
//! The conditions and outputs are [CEL](https://cel.dev), the language of
//! Kubernetes validation rules and of Weft's own `when`, with the object
//! as last observed bound as `object`:
//!
//! ```text
//! object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')
//! has(object.status.succeeded) && object.status.succeeded > 0
//! object.status.jobStatus == 'FAILED'
//! ```
//!
//! All of them are compiled when the resource is built: a syntax error is
//! a permanent error there, naming the field. `timestamp()` and
//! `duration()` are not available (the component is built without the
//! `cel` crate's `chrono` feature, which needs JavaScript on Wasm).
//!
//! Observed objects are often partial: a status without `conditions` yet,
//! a field the controller fills in later. get-task-phase must answer a
//! phase for any object, so **a condition whose evaluation fails (a missing
//! key, a type error) or gives `null` is "not true yet"**, not a failure;
//! `has(...)` guards are good style but not required. A condition that
//! gives anything other than a boolean or `null` (say `object.status.succeeded`
//! without `> 0`) is a mistake in the task, and fails it for good.
//!
//! # Phases
//!
//! | the object                                                  | phase             | reason                    |
//! |-------------------------------------------------------------|-------------------|---------------------------|
//! | no `status` yet (or an empty one)                           | queued            |                           |
//! | `failureCondition` holds                                    | retryable-failure (permanent-failure with `failureRetryable: false`) | `FailureCondition` |
//! | `successCondition` holds, outputs evaluate                  | success           |                           |
//! | `successCondition` holds, an output fails                   | permanent-failure | `InvalidOutputs`          |
//! | a condition gives a non-boolean                             | permanent-failure | `InvalidCondition`        |
//! | being deleted before either condition holds                 | retryable-failure | `System:ResourceDeleted`  |
//! | a status, `runningCondition` absent or holds                | running           |                           |
//! | a status, `runningCondition` does not hold yet              | initializing      |                           |
//!
//! The failure condition is checked first: an object that matches both
//! failed. A failure's message names the condition and adds the object's
//! own words when it has some (`status.message`, or the message of a
//! `Failed=True` / `Succeeded=False` / `Complete=False` condition).
//!
//! # Properties
//!
//! An aborted workflow's object is deleted; a finished one is kept, so its
//! status and logs stay for the user (and its controller's own cleanup,
//! e.g. `ttlSecondsAfterFinished`, applies).

use std::collections::BTreeMap;

use cel::{Context, Program};
use serde::Deserialize;
use serde_json::{Map, Value};
use weft_plugin_sdk::{
    pods, AbortBehaviour, PhaseInfo, PluginError, TaskContext, TaskPlugin, TaskProperties,
};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The plugin.
pub struct K8sResource;

impl TaskPlugin for K8sResource {
    fn properties() -> TaskProperties {
        TaskProperties {
            // An aborted workflow's object must stop.
            abort: AbortBehaviour::Delete,
            // A finished object keeps its status for the user.
            delete_on_finish: false,
        }
    }

    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        build(&ctx)
    }

    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        phase(&ctx, &observed)
    }
}

weft_plugin_sdk::export_task_plugin!(K8sResource);

/// The kinds allowed when the plugin config has no `allowedKinds`; the
/// shipped manifest's `resources` and `config.allowedKinds` list the same.
pub const DEFAULT_KINDS: [(&str, &str); 7] = [
    ("batch/v1", "Job"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"),
    ("ray.io/v1", "RayJob"),
    ("ray.io/v1", "RayCluster"),
    ("tekton.dev/v1", "PipelineRun"),
    ("tekton.dev/v1", "TaskRun"),
];

/// The task's `config`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The template of the object to create.
    pub manifest: Map<String, Value>,
    /// CEL: the task succeeded.
    pub success_condition: String,
    /// CEL: the task failed.
    #[serde(default)]
    pub failure_condition: Option<String>,
    /// CEL: the task runs (without it: as soon as the object has a status).
    #[serde(default)]
    pub running_condition: Option<String>,
    /// Output name → CEL, evaluated on success.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
    /// Whether a failure may be retried (overrides the plugin config's).
    #[serde(default)]
    pub failure_retryable: Option<bool>,
    /// JSON Pointers to the object's pod specs, for artifacts (default:
    /// by kind, [`default_pod_specs`]).
    #[serde(default)]
    pub pod_specs: Option<Vec<String>>,
}

/// The plugin's configuration (the manifest's `config`, as the operator
/// left it).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    /// The kinds a template may have; [`DEFAULT_KINDS`] when absent.
    #[serde(default = "default_kinds")]
    pub allowed_kinds: Vec<Kind>,
    /// Whether a failure may be retried, for tasks that do not say.
    #[serde(default = "yes")]
    pub failure_retryable: bool,
}

/// A kind of Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kind {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

fn default_kinds() -> Vec<Kind> {
    DEFAULT_KINDS
        .iter()
        .map(|(api_version, kind)| Kind {
            api_version: (*api_version).into(),
            kind: (*kind).into(),
        })
        .collect()
}

fn yes() -> bool {
    true
}

impl PluginConfig {
    fn allows(&self, api_version: &str, kind: &str) -> bool {
        self.allowed_kinds
            .iter()
            .any(|k| k.api_version == api_version && k.kind == kind)
    }
}

/// The task's config. serde's errors on a `Value` name no field, so the
/// likeliest mistake, a manifest that is not an object, is named here.
fn task_config(ctx: &TaskContext) -> Result<Config, PluginError> {
    match ctx.config.get("manifest") {
        None | Some(Value::Object(_)) => ctx.config_as(),
        Some(_) => Err(PluginError::permanent(
            "invalid task config: manifest must be an object (the Kubernetes object to create)",
        )),
    }
}

/// The task's plugin config, defaults filled in.
fn plugin_config(ctx: &TaskContext) -> Result<PluginConfig, PluginError> {
    if ctx.plugin_config.is_null() {
        return Ok(PluginConfig {
            allowed_kinds: default_kinds(),
            failure_retryable: true,
        });
    }
    ctx.plugin_config_as()
}

// ---------------------------------------------------------------------------
// CEL

/// One compiled expression and where it came from.
pub struct Expr<'a> {
    /// The config field, e.g. `successCondition` or `outputs.jobId`.
    pub field: String,
    /// The source text.
    pub src: &'a str,
    program: Program,
}

/// Every expression of a task config, compiled.
pub struct Exprs<'a> {
    success: Expr<'a>,
    failure: Option<Expr<'a>>,
    running: Option<Expr<'a>>,
    outputs: Vec<(&'a str, Expr<'a>)>,
}

/// Compiles one expression; a syntax error is permanent and names the field.
fn compile(field: String, src: &str) -> Result<Expr<'_>, PluginError> {
    if src.trim().is_empty() {
        return Err(PluginError::permanent(format!("{field} is empty")));
    }
    match Program::compile(src) {
        Ok(program) => Ok(Expr {
            field,
            src,
            program,
        }),
        Err(e) => {
            let why: Vec<String> = e
                .errors
                .iter()
                .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
                .collect();
            Err(PluginError::permanent(format!(
                "{field} is not valid CEL: {src:?}: {}",
                why.join("; ")
            )))
        }
    }
}

impl Config {
    /// Compiles every condition and output: the first syntax error is a
    /// permanent error that names its field.
    pub fn compile(&self) -> Result<Exprs<'_>, PluginError> {
        Ok(Exprs {
            success: compile("successCondition".into(), &self.success_condition)?,
            failure: self
                .failure_condition
                .as_deref()
                .map(|s| compile("failureCondition".into(), s))
                .transpose()?,
            running: self
                .running_condition
                .as_deref()
                .map(|s| compile("runningCondition".into(), s))
                .transpose()?,
            outputs: self
                .outputs
                .iter()
                .map(|(name, src)| Ok((name.as_str(), compile(format!("outputs.{name}"), src)?)))
                .collect::<Result<_, PluginError>>()?,
        })
    }
}

/// What a condition says about an object.
#[derive(Debug, PartialEq)]
enum Truth {
    /// It holds.
    Holds,
    /// It does not hold, or cannot be evaluated on this (partial) object yet.
    NotYet,
    /// It gave something other than a boolean: the task's mistake.
    Invalid(String),
}

impl Expr<'_> {
    fn truth(&self, scope: &Context) -> Truth {
        match self.program.execute(scope) {
            Ok(cel::Value::Bool(true)) => Truth::Holds,
            // A missing key, a type error on a partial object, or a null
            // field: not true yet. The next observation may differ.
            Ok(cel::Value::Bool(false) | cel::Value::Null) | Err(_) => Truth::NotYet,
            Ok(other) => Truth::Invalid(format!(
                "{} {:?} must give true or false, gave {:?}",
                self.field,
                self.src,
                other.type_of()
            )),
        }
    }

    fn json(&self, scope: &Context) -> Result<Value, String> {
        let v = self
            .program
            .execute(scope)
            .map_err(|e| format!("{} {:?} failed: {e}", self.field, self.src))?;
        v.json().map_err(|_| {
            format!(
                "{} {:?} gave a {:?}, which has no JSON form",
                self.field,
                self.src,
                v.type_of()
            )
        })
    }
}

// ---------------------------------------------------------------------------
// build-resource

/// Builds the object of a task: the template with its inputs substituted,
/// named and placed by the host. Every mistake in the task is a permanent
/// error that names it.
pub fn build(ctx: &TaskContext) -> Result<Value, PluginError> {
    let config = task_config(ctx)?;
    let plugin = plugin_config(ctx)?;
    // Validated now so that a typo fails the task before anything exists.
    config.compile()?;

    let empty = Map::new();
    let inputs = match &ctx.inputs {
        Value::Object(m) => m,
        Value::Null => &empty,
        _ => {
            return Err(PluginError::permanent(
                "the task's inputs must be an object",
            ))
        }
    };
    let mut object = config.manifest;
    for (k, v) in object.iter_mut() {
        substitute(v, inputs, &mut format!("manifest.{k}"))?;
    }

    let field = |name: &str| match object.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(PluginError::permanent(format!(
            "manifest.{name} is required and must be a string"
        ))),
    };
    let (api_version, kind) = (field("apiVersion")?, field("kind")?);
    if !plugin.allows(&api_version, &kind) {
        let allowed: Vec<String> = plugin
            .allowed_kinds
            .iter()
            .map(|k| format!("{} {}", k.api_version, k.kind))
            .collect();
        return Err(PluginError::permanent(format!(
            "kind {kind} ({api_version}) is not allowed; the operator may add it to the \
             k8s-resource plugin's resources and config.allowedKinds (allowed: {})",
            allowed.join(", ")
        )));
    }

    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if metadata.is_null() {
        *metadata = Value::Object(Map::new());
    }
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| PluginError::permanent("manifest.metadata must be an object"))?;
    metadata.remove("generateName");
    metadata.insert("name".into(), ctx.resource_name.clone().into());
    metadata.insert("namespace".into(), ctx.namespace.clone().into());
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if labels.is_null() {
        *labels = Value::Object(Map::new());
    }
    let labels = labels
        .as_object_mut()
        .ok_or_else(|| PluginError::permanent("manifest.metadata.labels must be an object"))?;
    for (k, v) in &ctx.labels {
        labels.insert(k.clone(), v.clone().into());
    }
    let mut object = Value::Object(object);
    let specs = config
        .pod_specs
        .unwrap_or_else(|| default_pod_specs(&object));
    if !specs.is_empty() {
        let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
        pods::mark_pod_specs(&mut object, &specs)
            .map_err(|e| PluginError::permanent(format!("podSpecs: {}", e.message)))?;
    }
    Ok(object)
}

/// The pod specs of the kinds whose layout is known: a Job's template, a
/// PyTorchJob's or TFJob's replicas (the one that reports the outputs
/// first); none for others.
pub fn default_pod_specs(object: &Value) -> Vec<String> {
    let (replicas, roles): (&str, &[&str]) =
        match (object["apiVersion"].as_str(), object["kind"].as_str()) {
            (Some("batch/v1"), Some("Job")) => return vec!["/spec/template/spec".into()],
            (Some("kubeflow.org/v1"), Some("PyTorchJob")) => {
                ("pytorchReplicaSpecs", &["Master", "Worker"])
            }
            (Some("kubeflow.org/v1"), Some("TFJob")) => (
                "tfReplicaSpecs",
                &["Chief", "Master", "Worker", "PS", "Evaluator"],
            ),
            _ => return Vec::new(),
        };
    roles
        .iter()
        .map(|r| format!("/spec/{replicas}/{r}/template/spec"))
        .filter(|p| object.pointer(p).is_some())
        .collect()
}

/// A piece of a template string.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    /// Text to keep, including any `${...}` that is not an input.
    Text(&'a str),
    /// `${inputs.<name>}`: the name.
    Input(&'a str),
}

/// Splits a string into text and `${inputs.<name>}` placeholders (spaces
/// inside the braces allowed).
fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_from = 0;
    let mut at = 0;
    while let Some(start) = s[at..].find("${").map(|i| at + i) {
        let Some(len) = s[start..].find('}') else {
            break;
        };
        let body = s[start + 2..start + len].trim();
        at = start + len + 1;
        if let Some(name) = body.strip_prefix("inputs.") {
            if start > text_from {
                out.push(Piece::Text(&s[text_from..start]));
            }
            out.push(Piece::Input(name));
            text_from = at;
        }
    }
    if text_from < s.len() {
        out.push(Piece::Text(&s[text_from..]));
    }
    out
}

/// Replaces the input placeholders in every string value of `v`. `path`
/// names where `v` is, for errors.
fn substitute(
    v: &mut Value,
    inputs: &Map<String, Value>,
    path: &mut String,
) -> Result<(), PluginError> {
    match v {
        Value::String(s) => {
            if !s.contains("${") {
                return Ok(());
            }
            let lookup = |name: &str| {
                inputs.get(name).ok_or_else(|| {
                    let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
                    PluginError::permanent(format!(
                        "{path}: unknown input {name:?} in ${{inputs.{name}}} (the node's inputs: [{}])",
                        known.join(", ")
                    ))
                })
            };
            let ps = pieces(s);
            if let [Piece::Input(name)] = ps.as_slice() {
                *v = lookup(name)?.clone();
                return Ok(());
            }
            let mut out = String::with_capacity(s.len());
            for p in &ps {
                match p {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Input(name) => match lookup(name)? {
                        Value::String(text) => out.push_str(text),
                        other => out.push_str(&other.to_string()),
                    },
                }
            }
            *s = out;
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                substitute(item, inputs, path)?;
                path.truncate(len);
            }
        }
        Value::Object(m) => {
            for (k, item) in m.iter_mut() {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                substitute(item, inputs, path)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// get-task-phase

/// Maps an observed object to a phase. Answers for any value, however
/// partial: only a task config that does not parse (which build-resource
/// refused already) is an error.
pub fn phase(ctx: &TaskContext, observed: &Value) -> Result<PhaseInfo, PluginError> {
    let config = task_config(ctx)?;
    let plugin = plugin_config(ctx)?;
    let exprs = config.compile()?;
    let retryable = config.failure_retryable.unwrap_or(plugin.failure_retryable);

    let has_status = match &observed["status"] {
        Value::Null => false,
        Value::Object(m) => !m.is_empty(),
        _ => true,
    };
    let deleting = !observed["metadata"]["deletionTimestamp"].is_null();
    if !has_status {
        return Ok(if deleting {
            deleted()
        } else {
            PhaseInfo::queued()
        });
    }

    let mut scope = Context::default();
    if let Err(e) = scope.add_variable("object", observed.clone()) {
        // Every JSON value has a CEL form; this is not the object's fault.
        return Err(PluginError::retryable(format!(
            "cannot give the observed object to CEL: {e}"
        )));
    }
    let mut invalid = None;
    let mut check = |e: &Expr| match e.truth(&scope) {
        Truth::Holds => true,
        Truth::NotYet => false,
        Truth::Invalid(why) => {
            invalid.get_or_insert(why);
            false
        }
    };

    if let Some(failure) = &exprs.failure {
        if check(failure) {
            let mut message = format!("failureCondition {:?} holds", failure.src);
            if let Some(why) = own_words(observed) {
                message.push_str(": ");
                message.push_str(&why);
            }
            return Ok(if retryable {
                PhaseInfo::retryable("FailureCondition", message)
            } else {
                PhaseInfo::permanent("FailureCondition", message)
            });
        }
    }
    if check(&exprs.success) {
        let mut outputs = Map::new();
        for (name, e) in &exprs.outputs {
            match e.json(&scope) {
                Ok(v) => {
                    outputs.insert((*name).into(), v);
                }
                Err(why) => {
                    return Ok(PhaseInfo::permanent(
                        "InvalidOutputs",
                        format!("the successCondition holds, but output {name} failed: {why}"),
                    ));
                }
            }
        }
        return Ok(PhaseInfo::success(
            (!exprs.outputs.is_empty()).then_some(outputs),
        ));
    }
    let running = exprs.running.as_ref().is_none_or(&mut check);
    if let Some(why) = invalid {
        return Ok(PhaseInfo::permanent("InvalidCondition", why));
    }
    if deleting {
        return Ok(deleted());
    }
    Ok(if running {
        PhaseInfo::running()
    } else {
        PhaseInfo::initializing()
    })
}

fn deleted() -> PhaseInfo {
    PhaseInfo::system(
        "ResourceDeleted",
        "the object was deleted before it finished",
    )
}

/// What the object itself says about a failure, if anything: its
/// `status.message`, or the message of the condition that says it failed.
fn own_words(object: &Value) -> Option<String> {
    let status = &object["status"];
    if let Some(m) = status["message"].as_str().filter(|m| !m.is_empty()) {
        return Some(truncate(m, 1024));
    }
    let failed = |c: &&Value| {
        (c["type"] == "Failed" && c["status"] == "True")
            || (matches!(c["type"].as_str(), Some("Succeeded" | "Complete"))
                && c["status"] == "False")
    };
    let c = status["conditions"].as_array()?.iter().find(failed)?;
    let text = match (c["reason"].as_str(), c["message"].as_str()) {
        (Some(r), Some(m)) if !m.is_empty() => format!("{r}: {m}"),
        (_, Some(m)) if !m.is_empty() => m.to_string(),
        (Some(r), _) => r.to_string(),
        _ => return None,
    };
    Some(truncate(&text, 1024))
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests;
