//! Flyte's spark plugin as a Weft component: a task runs as one
//! `SparkApplication` of the [Kubeflow Spark operator], and the
//! application's state says where the task stands.
//!
//! [Kubeflow Spark operator]: https://github.com/kubeflow/spark-operator
//!
//! # Task config
//!
//! The fields of the operator's `SparkApplication.spec`
//! (`sparkoperator.k8s.io/v1beta2`), with the operator's camelCase names:
//!
//! | key                   | notes                                                                   |
//! |-----------------------|-------------------------------------------------------------------------|
//! | `type`                | required: `Scala`, `Java`, `Python` or `R`                              |
//! | `mode`                | `cluster` (default) or `client`                                         |
//! | `image`               | required unless the plugin config has a default `image`                 |
//! | `mainApplicationFile` | required, e.g. `local:///opt/spark/examples/jars/spark-examples.jar`    |
//! | `mainClass`           | the JVM entry point                                                     |
//! | `arguments`           | a list; numbers and booleans become strings                             |
//! | `sparkVersion`        | required unless the plugin config has a default `sparkVersion`          |
//! | `sparkConf`, `hadoopConf` | maps; values that are not strings become strings (objects as JSON) |
//! | `deps`                | `jars`, `files`, `pyFiles`, `packages`, `excludePackages`, `repositories`, `archives` |
//! | `driver`, `executor`  | the operator's pod specs (`cores`, `coreLimit`, `memory`, `instances`, `serviceAccount`, `labels`, `env`, ...) |
//! | `dynamicAllocation`   | `enabled`, `initialExecutors`, `minExecutors`, `maxExecutors`, `shuffleTrackingEnabled`, `shuffleTrackingTimeout` |
//! | `restartPolicy`       | default `{type: Never}`: Weft retries the node, so the operator should not |
//!
//! and, passed through as written: `imagePullPolicy`, `imagePullSecrets`,
//! `pythonVersion`, `sparkConfigMap`, `hadoopConfigMap`, `nodeSelector`,
//! `volumes`, `timeToLiveSeconds`, `batchScheduler`,
//! `batchSchedulerOptions`, `memoryOverheadFactor`, `monitoring`,
//! `proxyUser`, `sparkUIOptions`, `driverIngressOptions`,
//! `driverPodDisruptionBudget`. Weft's own keys: `inputsAs` (below) and
//! `annotations` (copied onto the SparkApplication).
//!
//! A key the plugin does not know, at the top level or directly inside
//! `driver`, `executor`, `deps`, `dynamicAllocation` or `restartPolicy`,
//! is a permanent error that names it: the API server would prune it
//! silently, and a typo such as `driver.memroy` must not vanish. The
//! operator's `failureRetries`, `retryInterval` and `suspend` are refused
//! the same way: Weft owns retries and the lifecycle.
//!
//! In `driver` and `executor`, `cores`, `instances` (and the executor
//! counts of `dynamicAllocation`) must be whole numbers of at least 1
//! (fractions of a core go in `coreRequest`, e.g. `"500m"`); quantities
//! (`coreLimit`, `coreRequest`, `memory`, `memoryOverhead`, `memoryLimit`)
//! and label values may be given as numbers; `env` may be a Kubernetes list
//! or a `{NAME: value}` map. The driver's `serviceAccount` defaults to the
//! plugin config's. Both get the host's labels on top of their own, so
//! their Pods can be traced to the task.
//!
//! # Inputs
//!
//! `{{inputs.<name>}}` in `arguments` is replaced by the input's text
//! (strings as they are, anything else as JSON). Then, per `inputsAs`:
//!
//! - `arguments` (the default): every input is appended to `arguments` as
//!   `--<name>=<value>`, in the order of the names;
//! - `conf`: every input becomes the Spark property
//!   `spark.weft.input.<name>` in `sparkConf` (read it with
//!   `spark.conf.get("spark.weft.input.n")`), replacing an entry of the
//!   config with the same key;
//! - `none`: only the `{{inputs.<name>}}` substitutions.
//!
//! # The SparkApplication
//!
//! Named `ctx.resource_name` (deterministic per attempt, so a re-run finds
//! the same application), in the workflow's namespace, with the host's
//! labels. [`build_application`] is public so the host's tests can check
//! what it builds against the operator's CRD schema.
//!
//! # Phases
//!
//! | `status.applicationState.state`  | phase             | reason                   |
//! |----------------------------------|-------------------|--------------------------|
//! | absent, `""`, `NEW`              | queued            |                          |
//! | `SUBMITTED`                      | initializing      |                          |
//! | `RUNNING`                        | running           |                          |
//! | `SUCCEEDING`                     | running           | `SparkSucceeding`        |
//! | `FAILING`                        | running           | `SparkFailing`           |
//! | `COMPLETED`                      | success           |                          |
//! | `FAILED`                         | retryable-failure | `SparkFailed`            |
//! | `SUBMISSION_FAILED`              | retryable-failure | `SparkSubmissionFailed`  |
//! | `PENDING_RERUN`, `INVALIDATING`, `RESUMING` | queued | the state in CamelCase  |
//! | `SUSPENDING`, `SUSPENDED`        | waiting-for-resources | `SparkSuspended`     |
//! | `UNKNOWN`                        | running           | `DriverStateUnknown`     |
//! | any other state                  | running           | `UnrecognisedState`      |
//! | deleted before it finished       | retryable-failure | `System:ApplicationDeleted` |
//!
//! Why these:
//!
//! - `FAILED` is the user's job failing (an exception, an OOM-killed driver,
//!   a failed executor budget): a retryable failure, so the node's retries
//!   apply, as for a Pod that exits non-zero.
//! - `SUBMISSION_FAILED` is retryable too (Flyte's spark plugin does the
//!   same). Its usual causes are a ResourceQuota that refused the driver
//!   Pod, an API server hiccup or a missing service account; the first two
//!   pass, and the plugin cannot tell them apart from the operator's text.
//!   Spec errors that are certain are refused earlier, by build-resource
//!   and by the API server's schema check on create. Also, with
//!   `restartPolicy: Never` the operator moves a `SUBMISSION_FAILED`
//!   application to `FAILED` at its next reconcile: mapping the two states
//!   differently would make the outcome depend on which one the host saw.
//! - `UNKNOWN` is reported while the driver Pod's state is briefly unknown
//!   (a node that stopped reporting): the operator resolves it, so the task
//!   keeps running rather than failing on a blip.
//! - `FAILING`/`SUCCEEDING` are the operator's last steps before
//!   `FAILED`/`COMPLETED`: still running, the verdict comes next.
//!
//! `status.applicationState.errorMessage` is carried into the message of
//! every phase that has one. Never an error: any object, however partial,
//! gets a phase.
//!
//! # Outputs and links
//!
//! A `COMPLETED` application's outputs are `applicationId`
//! (`status.sparkApplicationId`), `executionAttempts`, `submissionAttempts`
//! and `driverPod`, those the operator reported. Links: `Driver logs` from
//! the plugin config's `driverLogLinkTemplate` once the driver Pod is
//! known (`status.driverInfo.podName`), and `Spark UI` from
//! `uiLinkTemplate` while the operator reports the UI's address
//! (`status.driverInfo.webUIIngressAddress`, else `webUIAddress`). A
//! template whose placeholder has no value yet gives no link.

use serde_json::{json, Map, Value};
use weft_plugin_sdk::{
    AbortBehaviour, PhaseInfo, PluginError, TaskContext, TaskPlugin, TaskProperties,
};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The kind's API version.
pub const API_VERSION: &str = "sparkoperator.k8s.io/v1beta2";
/// The kind.
pub const KIND: &str = "SparkApplication";

/// The plugin.
pub struct Spark;

impl TaskPlugin for Spark {
    fn properties() -> TaskProperties {
        TaskProperties {
            // Deleting the SparkApplication makes the operator's owner
            // references take the driver, and the driver's the executors:
            // an aborted workflow's cluster capacity comes back.
            abort: AbortBehaviour::Delete,
            // A finished application keeps its status (the error message,
            // the application id) and its driver Pod keeps the logs, for
            // the user; the Workflow's owner reference removes it with the
            // workflow, and `timeToLiveSeconds` can remove it sooner.
            delete_on_finish: false,
        }
    }

    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        build_application(&ctx)
    }

    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(application_phase(&ctx, &observed))
    }
}

weft_plugin_sdk::export_task_plugin!(Spark);

// ---------------------------------------------------------------------------
// build-resource

/// Spec fields the plugin builds itself.
const BUILT: &[&str] = &[
    "type",
    "mode",
    "image",
    "mainApplicationFile",
    "mainClass",
    "arguments",
    "sparkVersion",
    "sparkConf",
    "hadoopConf",
    "deps",
    "driver",
    "executor",
    "dynamicAllocation",
    "restartPolicy",
];

/// Spec fields copied as written (the API server checks their shape).
const PASSED: &[&str] = &[
    "imagePullPolicy",
    "imagePullSecrets",
    "pythonVersion",
    "sparkConfigMap",
    "hadoopConfigMap",
    "nodeSelector",
    "volumes",
    "timeToLiveSeconds",
    "batchScheduler",
    "batchSchedulerOptions",
    "memoryOverheadFactor",
    "monitoring",
    "proxyUser",
    "sparkUIOptions",
    "driverIngressOptions",
    "driverPodDisruptionBudget",
];

/// Weft's own keys, not part of the spec.
const WEFT: &[&str] = &["inputsAs", "annotations"];

/// The fields both `driver` and `executor` have.
const POD_FIELDS: &[&str] = &[
    "affinity",
    "annotations",
    "configMaps",
    "coreLimit",
    "coreRequest",
    "cores",
    "dnsConfig",
    "env",
    "envFrom",
    "envSecretKeyRefs",
    "envVars",
    "gpu",
    "hostAliases",
    "hostNetwork",
    "image",
    "initContainers",
    "javaOptions",
    "labels",
    "lifecycle",
    "memory",
    "memoryLimit",
    "memoryOverhead",
    "nodeSelector",
    "podSecurityContext",
    "ports",
    "priorityClassName",
    "schedulerName",
    "secrets",
    "securityContext",
    "serviceAccount",
    "shareProcessNamespace",
    "sidecars",
    "template",
    "terminationGracePeriodSeconds",
    "tolerations",
    "volumeMounts",
];
const DRIVER_ONLY: &[&str] = &[
    "kubernetesMaster",
    "podName",
    "serviceAnnotations",
    "serviceLabels",
];
const EXECUTOR_ONLY: &[&str] = &["instances", "deleteOnTermination"];
const DEPS: &[&str] = &[
    "jars",
    "files",
    "pyFiles",
    "packages",
    "excludePackages",
    "repositories",
    "archives",
];
const DYNAMIC_ALLOCATION: &[&str] = &[
    "enabled",
    "initialExecutors",
    "minExecutors",
    "maxExecutors",
    "shuffleTrackingEnabled",
    "shuffleTrackingTimeout",
];
const RESTART_POLICY: &[&str] = &[
    "type",
    "onFailureRetries",
    "onFailureRetryInterval",
    "onSubmissionFailureRetries",
    "onSubmissionFailureRetryInterval",
];
/// Quantities Kubernetes writes as strings, which YAML makes numbers of.
const QUANTITIES: &[&str] = &[
    "coreLimit",
    "coreRequest",
    "memory",
    "memoryOverhead",
    "memoryLimit",
];

/// Builds the SparkApplication of a task. A config that cannot make one is
/// a permanent error that names the field.
pub fn build_application(ctx: &TaskContext) -> Result<Value, PluginError> {
    let config = ctx
        .config
        .as_object()
        .ok_or_else(|| PluginError::permanent("the task config must be an object"))?;
    let known: Vec<&str> = BUILT.iter().chain(PASSED).chain(WEFT).copied().collect();
    check_keys(config, "", &known)?;

    let mut spec = Map::new();
    let kind = required_str(config, "type")?;
    if !["Scala", "Java", "Python", "R"].contains(&kind) {
        return Err(PluginError::permanent(format!(
            "type must be one of Scala, Java, Python or R, not {kind:?}"
        )));
    }
    spec.insert("type".into(), kind.into());
    let mode = optional_str(config, "mode")?.unwrap_or("cluster");
    if !["cluster", "client"].contains(&mode) {
        return Err(PluginError::permanent(format!(
            "mode must be cluster or client, not {mode:?}"
        )));
    }
    spec.insert("mode".into(), mode.into());
    spec.insert(
        "image".into(),
        with_default(
            ctx,
            config,
            "image",
            "a container image for the driver and the executors",
        )?
        .into(),
    );
    spec.insert(
        "mainApplicationFile".into(),
        required_str(config, "mainApplicationFile")?.into(),
    );
    if let Some(class) = optional_str(config, "mainClass")? {
        spec.insert("mainClass".into(), class.into());
    }
    spec.insert(
        "sparkVersion".into(),
        with_default(
            ctx,
            config,
            "sparkVersion",
            "the Spark version of the image",
        )?
        .into(),
    );
    for &key in PASSED {
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            let v = match (key, v) {
                // `pythonVersion: 3` in YAML is a number; the CRD wants "3".
                ("pythonVersion", Value::Number(n)) => Value::String(n.to_string()),
                _ => v.clone(),
            };
            spec.insert(key.into(), v);
        }
    }

    let inputs = ctx.inputs.as_object().cloned().unwrap_or_default();
    let mut arguments = match config.get("arguments") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Array(_) | Value::Object(_) | Value::Null => Err(PluginError::permanent(
                    format!("arguments[{i}] must be a string, a number or a boolean"),
                )),
                v => Ok(Value::String(substitute(&text(v), &inputs))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(PluginError::permanent("arguments must be a list")),
    };
    let mut spark_conf = string_map(config.get("sparkConf"), "sparkConf")?;
    match optional_str(config, "inputsAs")?.unwrap_or("arguments") {
        "arguments" => {
            for (k, v) in &inputs {
                arguments.push(Value::String(format!("--{k}={}", text(v))));
            }
        }
        "conf" => {
            for (k, v) in &inputs {
                spark_conf.insert(format!("spark.weft.input.{k}"), Value::String(text(v)));
            }
        }
        "none" => {}
        other => {
            return Err(PluginError::permanent(format!(
                "inputsAs must be arguments, conf or none, not {other:?}"
            )))
        }
    }
    if !arguments.is_empty() {
        spec.insert("arguments".into(), Value::Array(arguments));
    }
    if !spark_conf.is_empty() {
        spec.insert("sparkConf".into(), Value::Object(spark_conf));
    }
    let hadoop_conf = string_map(config.get("hadoopConf"), "hadoopConf")?;
    if !hadoop_conf.is_empty() {
        spec.insert("hadoopConf".into(), Value::Object(hadoop_conf));
    }
    if let Some(deps) = section(config, "deps", DEPS)? {
        for (k, v) in &deps {
            let ok = v
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string));
            if !ok {
                return Err(PluginError::permanent(format!(
                    "deps.{k} must be a list of strings"
                )));
            }
        }
        spec.insert("deps".into(), Value::Object(deps));
    }

    let service_account = ctx.plugin_config["serviceAccount"]
        .as_str()
        .filter(|s| !s.is_empty());
    let driver_fields: Vec<&str> = POD_FIELDS.iter().chain(DRIVER_ONLY).copied().collect();
    let mut driver = section(config, "driver", &driver_fields)?.unwrap_or_default();
    pod_section(ctx, &mut driver, "driver")?;
    if let Some(sa) = service_account {
        driver.entry("serviceAccount").or_insert(sa.into());
    }
    spec.insert("driver".into(), Value::Object(driver));
    let executor_fields: Vec<&str> = POD_FIELDS.iter().chain(EXECUTOR_ONLY).copied().collect();
    let mut executor = section(config, "executor", &executor_fields)?.unwrap_or_default();
    pod_section(ctx, &mut executor, "executor")?;
    whole_number(&mut executor, "executor", "instances", 1)?;
    spec.insert("executor".into(), Value::Object(executor));

    if let Some(mut dynamic) = section(config, "dynamicAllocation", DYNAMIC_ALLOCATION)? {
        for key in ["initialExecutors", "minExecutors", "maxExecutors"] {
            whole_number(&mut dynamic, "dynamicAllocation", key, 0)?;
        }
        whole_number(
            &mut dynamic,
            "dynamicAllocation",
            "shuffleTrackingTimeout",
            0,
        )?;
        for key in ["enabled", "shuffleTrackingEnabled"] {
            if dynamic.get(key).is_some_and(|v| !v.is_boolean()) {
                return Err(PluginError::permanent(format!(
                    "dynamicAllocation.{key} must be true or false"
                )));
            }
        }
        let min = dynamic.get("minExecutors").and_then(Value::as_u64);
        let max = dynamic.get("maxExecutors").and_then(Value::as_u64);
        if let (Some(min), Some(max)) = (min, max) {
            if min > max {
                return Err(PluginError::permanent(format!(
                    "dynamicAllocation.minExecutors ({min}) is more than maxExecutors ({max})"
                )));
            }
        }
        spec.insert("dynamicAllocation".into(), Value::Object(dynamic));
    }
    let restart = section(config, "restartPolicy", RESTART_POLICY)?
        .unwrap_or_else(|| Map::from_iter([("type".to_string(), Value::from("Never"))]));
    spec.insert("restartPolicy".into(), Value::Object(restart));

    let mut metadata = json!({
        "name": ctx.resource_name,
        "namespace": ctx.namespace,
        "labels": ctx.labels,
    });
    match config.get("annotations") {
        None | Some(Value::Null) => {}
        Some(a @ Value::Object(_)) => {
            metadata["annotations"] = Value::Object(string_map(Some(a), "annotations")?)
        }
        Some(_) => return Err(PluginError::permanent("annotations must be a map")),
    }
    Ok(json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": spec,
    }))
}

/// Refuses keys outside `known`, naming the first such key.
fn check_keys(map: &Map<String, Value>, path: &str, known: &[&str]) -> Result<(), PluginError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => {
            let mut names: Vec<&str> = known.to_vec();
            names.sort_unstable();
            names.dedup();
            let (field, of) = if path.is_empty() {
                (k.clone(), "the task config".to_string())
            } else {
                (format!("{path}.{k}"), path.to_string())
            };
            Err(PluginError::permanent(format!(
                "unknown key {field} in the task config; the keys of {of} are: {}",
                names.join(", ")
            )))
        }
    }
}

/// An optional object of the config whose keys must be among `known`.
fn section(
    config: &Map<String, Value>,
    key: &str,
    known: &[&str],
) -> Result<Option<Map<String, Value>>, PluginError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => {
            check_keys(m, key, known)?;
            Ok(Some(m.clone()))
        }
        Some(_) => Err(PluginError::permanent(format!("{key} must be an object"))),
    }
}

/// `driver` or `executor`: numbers where the CRD has integers, strings
/// where it has quantities, env as a list, and the host's labels.
fn pod_section(
    ctx: &TaskContext,
    pod: &mut Map<String, Value>,
    name: &str,
) -> Result<(), PluginError> {
    whole_number(pod, name, "cores", 1)?;
    for &key in QUANTITIES {
        match pod.get(key) {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Number(n)) => {
                let s = n.to_string();
                pod.insert(key.into(), s.into());
            }
            Some(_) => {
                return Err(PluginError::permanent(format!(
                    "{name}.{key} must be a quantity such as \"1\", \"500m\" or \"512m\""
                )))
            }
        }
    }
    match pod.get("env") {
        None | Some(Value::Null) | Some(Value::Array(_)) => {}
        Some(Value::Object(map)) => {
            let list = map
                .iter()
                .map(|(k, v)| json!({"name": k, "value": text(v)}))
                .collect();
            pod.insert("env".into(), Value::Array(list));
        }
        Some(_) => {
            return Err(PluginError::permanent(format!(
                "{name}.env must be a list or a map"
            )))
        }
    }
    let mut labels = string_map(pod.get("labels"), &format!("{name}.labels"))?;
    for (k, v) in &ctx.labels {
        labels.insert(k.clone(), v.clone().into());
    }
    if !labels.is_empty() {
        pod.insert("labels".into(), Value::Object(labels));
    }
    Ok(())
}

/// Checks that `section.key`, when set, is a whole number of at least `min`.
fn whole_number(
    map: &mut Map<String, Value>,
    section: &str,
    key: &str,
    min: u64,
) -> Result<(), PluginError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n >= min && n <= i32::MAX as u64) => Ok(()),
        Some(v) if key == "shuffleTrackingTimeout" && v.as_u64().is_some() => Ok(()),
        Some(v) => {
            let hint = if key == "cores" {
                " (for a fraction of a core, set coreRequest, e.g. \"500m\")"
            } else {
                ""
            };
            Err(PluginError::permanent(format!(
                "{section}.{key} must be a whole number of at least {min}, not {v}{hint}"
            )))
        }
    }
}

/// A map of strings: other scalars become their text, objects and lists JSON.
fn string_map(v: Option<&Value>, field: &str) -> Result<Map<String, Value>, PluginError> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(text(v))))
            .collect()),
        Some(_) => Err(PluginError::permanent(format!("{field} must be a map"))),
    }
}

fn optional_str<'a>(
    config: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, PluginError> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(PluginError::permanent(format!("{key} must be a string"))),
    }
}

fn required_str<'a>(config: &'a Map<String, Value>, key: &str) -> Result<&'a str, PluginError> {
    optional_str(config, key)?
        .ok_or_else(|| PluginError::permanent(format!("{key} is required in the task config")))
}

/// The task's value of `key`, else the plugin config's, else an error.
fn with_default(
    ctx: &TaskContext,
    config: &Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<String, PluginError> {
    if let Some(v) = optional_str(config, key)? {
        return Ok(v.into());
    }
    match ctx.plugin_config[key]
        .as_str()
        .filter(|s| !s.trim().is_empty())
    {
        Some(v) => Ok(v.into()),
        None => Err(PluginError::permanent(format!(
            "{key} is required in the task config ({what}): the plugin config has no default"
        ))),
    }
}

/// Strings as they are, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replaces `{{inputs.<name>}}` (spaces inside the braces allowed).
fn substitute(s: &str, inputs: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let key = rest[start + 2..start + len].trim();
        match key.strip_prefix("inputs.").and_then(|k| inputs.get(k)) {
            Some(v) => {
                out.push_str(&rest[..start]);
                out.push_str(&text(v));
            }
            None => out.push_str(&rest[..start + len + 2]),
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------
// get-task-phase

/// Maps an observed SparkApplication to a phase. Answers for any value,
/// however partial: an object without a status is queued.
pub fn application_phase(ctx: &TaskContext, app: &Value) -> PhaseInfo {
    let status = &app["status"];
    let state = status["applicationState"]["state"]
        .as_str()
        .unwrap_or_default();
    let error = truncate(
        status["applicationState"]["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .trim(),
        1024,
    );
    let said = |default: &str| non_empty(&error, default);
    let deleted = !app["metadata"]["deletionTimestamp"].is_null();

    let info = match state {
        "COMPLETED" => PhaseInfo::success(outputs(status)),
        "FAILED" => PhaseInfo::retryable("SparkFailed", said("the Spark application failed")),
        "SUBMISSION_FAILED" => PhaseInfo::retryable(
            "SparkSubmissionFailed",
            said("the Spark operator could not submit the application"),
        ),
        _ if deleted => PhaseInfo::system(
            "ApplicationDeleted",
            "the SparkApplication was deleted before it finished",
        ),
        "" | "NEW" => PhaseInfo::queued(),
        "SUBMITTED" => PhaseInfo::initializing()
            .with_message(said("submitted; waiting for the driver to start")),
        "RUNNING" => PhaseInfo::running().with_message(running_message(status)),
        "SUCCEEDING" => PhaseInfo::running()
            .with_reason("SparkSucceeding")
            .with_message(said(
                "the driver succeeded; the operator is completing the application",
            )),
        "FAILING" => PhaseInfo::running()
            .with_reason("SparkFailing")
            .with_message(said(
                "the driver failed; the operator is failing the application",
            )),
        "PENDING_RERUN" => PhaseInfo::queued()
            .with_reason("PendingRerun")
            .with_message(said("the operator will submit the application again")),
        "INVALIDATING" => PhaseInfo::queued()
            .with_reason("Invalidating")
            .with_message(said(
                "the spec changed; the operator is restarting the application",
            )),
        "RESUMING" => PhaseInfo::queued()
            .with_reason("Resuming")
            .with_message(said("the operator is resuming the application")),
        "SUSPENDING" | "SUSPENDED" => {
            PhaseInfo::waiting_for_resources(said("the application is suspended"))
                .with_reason("SparkSuspended")
        }
        "UNKNOWN" => PhaseInfo::running()
            .with_reason("DriverStateUnknown")
            .with_message(said(
                "the driver pod's state is unknown for now; the Spark operator is finding out",
            )),
        other => PhaseInfo::running()
            .with_reason("UnrecognisedState")
            .with_message(format!(
                "the Spark operator reports state {:?}, which this plugin does not know{}",
                truncate(other, 64),
                if error.is_empty() {
                    String::new()
                } else {
                    format!(": {error}")
                }
            )),
    };
    with_links(ctx, app, info)
}

fn non_empty(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_string()
    } else {
        s.to_string()
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// "the driver is running; executors: 2 RUNNING, 1 PENDING".
fn running_message(status: &Value) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for state in status["executorState"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(Value::as_str)
    {
        match counts.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => counts.push((state, 1)),
        }
    }
    if counts.is_empty() {
        return "the driver is running".into();
    }
    counts.sort_unstable();
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("the driver is running; executors: {}", parts.join(", "))
}

/// What a completed application reported about itself.
fn outputs(status: &Value) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    if let Some(id) = status["sparkApplicationId"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        out.insert("applicationId".into(), id.into());
    }
    for key in ["executionAttempts", "submissionAttempts"] {
        if let Some(n) = status[key].as_u64() {
            out.insert(key.into(), n.into());
        }
    }
    if let Some(pod) = status["driverInfo"]["podName"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        out.insert("driverPod".into(), pod.into());
    }
    (!out.is_empty()).then_some(out)
}

/// The driver's log link and the Spark UI link, those the status allows.
fn with_links(ctx: &TaskContext, app: &Value, mut info: PhaseInfo) -> PhaseInfo {
    let driver = &app["status"]["driverInfo"];
    let name = app["metadata"]["name"]
        .as_str()
        .unwrap_or(&ctx.resource_name);
    let namespace = app["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(&ctx.namespace);
    let ui = driver["webUIIngressAddress"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| driver["webUIAddress"].as_str().filter(|s| !s.is_empty()))
        .map(|a| {
            if a.contains("://") {
                a.to_string()
            } else {
                format!("http://{a}")
            }
        })
        .unwrap_or_default();
    let port = driver["webUIPort"]
        .as_u64()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let vars: [(&str, &str); 6] = [
        ("namespace", namespace),
        ("name", name),
        ("driverPod", driver["podName"].as_str().unwrap_or_default()),
        ("webUIAddress", &ui),
        (
            "webUIServiceName",
            driver["webUIServiceName"].as_str().unwrap_or_default(),
        ),
        ("webUIPort", &port),
    ];
    for (link, key) in [
        ("Driver logs", "driverLogLinkTemplate"),
        ("Spark UI", "uiLinkTemplate"),
    ] {
        if let Some(uri) = ctx.plugin_config[key].as_str().and_then(|t| fill(t, &vars)) {
            info = info.with_log_link(link, uri);
        }
    }
    info
}

/// The template with its placeholders filled in; none when a placeholder it
/// uses has no value (yet), or when the template is empty.
fn fill(template: &str, vars: &[(&str, &str)]) -> Option<String> {
    if template.trim().is_empty() {
        return None;
    }
    let mut out = template.to_string();
    for (key, value) in vars {
        let placeholder = format!("{{{key}}}");
        if out.contains(&placeholder) {
            if value.is_empty() {
                return None;
            }
            out = out.replace(&placeholder, value);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
