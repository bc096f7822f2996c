//! build-resource: a task's config and inputs as a SparkApplication,
//! every key checked (a typo must not vanish in the API server's pruning).

use serde_json::{json, Map, Value};
use weft_plugin_sdk::{PluginError, TaskContext};

use crate::{API_VERSION, KIND};

/// Spec fields the plugin builds itself.
pub(super) const BUILT: &[&str] = &[
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
pub(super) const PASSED: &[&str] = &[
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
pub(super) const WEFT: &[&str] = &["inputsAs", "annotations"];

/// The fields both `driver` and `executor` have.
pub(super) const POD_FIELDS: &[&str] = &[
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

pub(super) const DRIVER_ONLY: &[&str] = &[
    "kubernetesMaster",
    "podName",
    "serviceAnnotations",
    "serviceLabels",
];

pub(super) const EXECUTOR_ONLY: &[&str] = &["instances", "deleteOnTermination"];

pub(super) const DEPS: &[&str] = &[
    "jars",
    "files",
    "pyFiles",
    "packages",
    "excludePackages",
    "repositories",
    "archives",
];

pub(super) const DYNAMIC_ALLOCATION: &[&str] = &[
    "enabled",
    "initialExecutors",
    "minExecutors",
    "maxExecutors",
    "shuffleTrackingEnabled",
    "shuffleTrackingTimeout",
];

pub(super) const RESTART_POLICY: &[&str] = &[
    "type",
    "onFailureRetries",
    "onFailureRetryInterval",
    "onSubmissionFailureRetries",
    "onSubmissionFailureRetryInterval",
];

/// Quantities Kubernetes writes as strings, which YAML makes numbers of.
pub(super) const QUANTITIES: &[&str] = &[
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
pub(super) fn check_keys(
    map: &Map<String, Value>,
    path: &str,
    known: &[&str],
) -> Result<(), PluginError> {
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
pub(super) fn section(
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
pub(super) fn pod_section(
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
pub(super) fn whole_number(
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
pub(super) fn string_map(
    v: Option<&Value>,
    field: &str,
) -> Result<Map<String, Value>, PluginError> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(text(v))))
            .collect()),
        Some(_) => Err(PluginError::permanent(format!("{field} must be a map"))),
    }
}

pub(super) fn optional_str<'a>(
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

pub(super) fn required_str<'a>(
    config: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, PluginError> {
    optional_str(config, key)?
        .ok_or_else(|| PluginError::permanent(format!("{key} is required in the task config")))
}

/// The task's value of `key`, else the plugin config's, else an error.
pub(super) fn with_default(
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
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replaces `{{inputs.<name>}}` (spaces inside the braces allowed).
pub(super) fn substitute(s: &str, inputs: &Map<String, Value>) -> String {
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
