//! The spark plugin through the real component (`target/plugins/spark.wasm`,
//! built by `make guests`): what it builds must pass the Spark operator's
//! own CRD schema (tests/fixtures/crds), and the fixture table of observed
//! SparkApplications (tests/fixtures/spark/observed, shared with the
//! plugin's native unit tests) must map to its phases.
//!
//! The CRD's `openAPIV3Schema` is checked as JSON Schema draft 4 (what
//! OpenAPI v3's schema objects are a dialect of), made as strict as the API
//! server with `fieldValidation=Strict`: an object schema that does not
//! preserve unknown fields refuses fields it does not list, where the API
//! server would otherwise prune them without a word. `x-kubernetes-*` keys
//! are extensions the validator ignores; `int-or-string` fields already
//! carry their `anyOf: [integer, string]`, and `nullable` becomes a `null`
//! type.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_plugin::{
    EngineConfig, FailureKind, Plugin, PluginEngine, TaskContext, TaskPlugin,
    plugin::AbortBehaviour, registry::load_file,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The real component, loaded with its manifest (and so its default config).
fn spark() -> Arc<TaskPlugin> {
    let path = root().join("target/plugins/spark.wasm");
    assert!(
        path.is_file(),
        "{} is missing: build the guests first with `make guests`",
        path.display()
    );
    let cache = root().join("target/weft-test-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(cache),
        ..EngineConfig::default()
    })
    .expect("engine");
    match load_file(&engine, &path) {
        Ok((Plugin::Task(p), _)) => p,
        Ok((other, _)) => panic!("spark is not a task plugin: {other:?}"),
        Err(e) => panic!("spark failed to load: {e}"),
    }
}

fn ctx(config: Value, inputs: Value) -> TaskContext {
    TaskContext::for_attempt(
        "wf",
        "3f1c9a4e-1111-2222-3333-444455556666",
        "team-a",
        "train",
        0,
        "spark",
        config,
        inputs,
    )
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The operator's example `name` (tests/fixtures/spark).
fn example(name: &str) -> Value {
    yaml_file(&root().join("tests/fixtures/spark").join(name))
}

/// The CRD's v1beta2 schema, made strict, as a validator.
fn crd_validator() -> jsonschema::Validator {
    let crd =
        yaml_file(&root().join("tests/fixtures/crds/sparkoperator.k8s.io_sparkapplications.yaml"));
    assert_eq!(crd["spec"]["names"]["kind"], "SparkApplication");
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta2")
        .expect("the CRD serves v1beta2");
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    strict(&mut schema);
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&schema)
        .expect("the CRD's schema is a valid draft 4 schema")
}

/// OpenAPI v3 (Kubernetes' structural dialect) to strict JSON Schema.
fn strict(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if obj.get("nullable") == Some(&Value::Bool(true))
        && let Some(Value::String(t)) = obj.get("type").cloned()
    {
        obj.insert("type".into(), json!([t, "null"]));
    }
    if obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && !obj.contains_key("anyOf")
    {
        obj.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    let preserves = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if obj.contains_key("properties") && !obj.contains_key("additionalProperties") && !preserves {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = obj.get_mut(key) {
            props.values_mut().for_each(strict);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = obj.get_mut(key) {
            strict(sub);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = obj.get_mut(key) {
            subs.iter_mut().for_each(strict);
        }
    }
}

/// Every schema violation of `obj`, as `path: message` lines.
fn violations(validator: &jsonschema::Validator, obj: &Value) -> Vec<String> {
    validator
        .iter_errors(obj)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn assert_valid(validator: &jsonschema::Validator, what: &str, obj: &Value) {
    let errors = violations(validator, obj);
    assert!(
        errors.is_empty(),
        "{what} does not pass the CRD schema:\n  {}\n{obj:#}",
        errors.join("\n  ")
    );
}

/// The task configs the test builds: the operator's two examples as they
/// are (a task's config is the spec, in the operator's words), and configs
/// that reach every way the plugin shapes a field.
fn task_configs() -> Vec<(&'static str, Value, Value)> {
    let spark_pi = example("spark-pi.yaml")["spec"].clone();
    let python = example("spark-pi-python.yaml")["spec"].clone();
    let mut python_defaults = python.clone();
    for key in ["image", "sparkVersion"] {
        python_defaults.as_object_mut().unwrap().remove(key);
    }
    python_defaults["driver"]
        .as_object_mut()
        .unwrap()
        .remove("serviceAccount");
    python_defaults["pythonVersion"] = json!(3);
    let mut pi_args = spark_pi.clone();
    pi_args["arguments"] = json!(["{{inputs.n}}"]);
    let mut pi_conf = spark_pi.clone();
    pi_conf["inputsAs"] = "conf".into();
    vec![
        ("spark-pi", spark_pi, json!({})),
        ("spark-pi-python", python, json!({})),
        (
            "python with the plugin's defaults",
            python_defaults,
            json!({}),
        ),
        (
            "inputs as arguments",
            pi_args,
            json!({"n": 5000, "who": "world", "opts": {"a": [1, 2]}}),
        ),
        (
            "inputs as conf",
            pi_conf,
            json!({"n": 5000, "flag": true, "opts": {"a": [1, 2]}}),
        ),
        (
            "dynamic allocation and the rest",
            json!({
                "type": "Java",
                "mode": "cluster",
                "mainApplicationFile": "s3a://jobs/etl.jar",
                "mainClass": "com.acme.Etl",
                "arguments": ["--day", 20261122, true],
                "sparkConf": {"spark.sql.shuffle.partitions": 64, "spark.eventLog.enabled": true},
                "hadoopConf": {"fs.s3a.path.style.access": "true"},
                "deps": {
                    "jars": ["s3a://jobs/lib.jar"],
                    "packages": ["org.apache.hadoop:hadoop-aws:3.4.1"],
                    "excludePackages": ["com.amazonaws:aws-java-sdk-bundle"],
                    "repositories": ["https://repo.example.com/maven"],
                    "files": ["s3a://jobs/app.conf"],
                },
                "driver": {
                    "cores": 2,
                    "coreLimit": 2,
                    "coreRequest": "1500m",
                    "memory": "2g",
                    "memoryOverhead": 512,
                    "env": {"MODE": "fast", "N": 3},
                    "envVars": {"A": "b"},
                    "javaOptions": "-XX:+UseG1GC",
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    "sidecars": [{
                        "name": "proxy",
                        "image": "envoyproxy/envoy:v1.31",
                        "resources": {"limits": {"cpu": 1, "memory": "128Mi"}},
                    }],
                    "tolerations": [{"key": "spark", "operator": "Exists", "effect": "NoSchedule"}],
                    "annotations": {"prometheus.io/scrape": "true"},
                },
                "executor": {
                    "instances": 2,
                    "cores": 4,
                    "memory": "8g",
                    "env": [{"name": "X", "value": "y"}],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    "deleteOnTermination": false,
                    "labels": {"tier": "batch", "generation": 2},
                },
                "dynamicAllocation": {
                    "enabled": true,
                    "initialExecutors": 2,
                    "minExecutors": 1,
                    "maxExecutors": 10,
                    "shuffleTrackingEnabled": true,
                    "shuffleTrackingTimeout": 60000,
                },
                "restartPolicy": {"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 10, "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 20},
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "10Gi"}}],
                "nodeSelector": {"pool": "spark"},
                "imagePullPolicy": "Always",
                "imagePullSecrets": ["registry-creds"],
                "timeToLiveSeconds": 3600,
                "annotations": {"team": "a"},
            }),
            json!({"day": "2026-11-22"}),
        ),
        (
            "the least an R task says",
            json!({"type": "R", "mainApplicationFile": "local:///opt/app/main.R"}),
            json!({}),
        ),
    ]
}

#[test]
fn every_built_application_passes_the_crd_schema() {
    let validator = crd_validator();
    let spark = spark();
    for (name, config, inputs) in task_configs() {
        let (app, _) = spark
            .build_resource(&ctx(config, inputs))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(app["apiVersion"], "sparkoperator.k8s.io/v1beta2", "{name}");
        assert_eq!(app["kind"], "SparkApplication", "{name}");
        assert_eq!(app["metadata"]["name"], "wf-train-0", "{name}");
        assert_eq!(app["metadata"]["namespace"], "team-a", "{name}");
        assert_eq!(
            app["metadata"]["ownerReferences"][0]["kind"], "Workflow",
            "{name}"
        );
        for role in ["driver", "executor"] {
            assert_eq!(
                app["spec"][role]["labels"]["weft.dev/node"], "train",
                "{name}: {role}"
            );
        }
        assert_valid(&validator, name, &app);
    }
}

#[test]
fn the_operators_examples_come_out_as_they_went_in() {
    let spark = spark();
    for file in ["spark-pi.yaml", "spark-pi-python.yaml"] {
        let want = example(file)["spec"].clone();
        let (app, _) = spark.build_resource(&ctx(want.clone(), json!({}))).unwrap();
        let mut got = app["spec"].clone();
        assert_eq!(got["restartPolicy"], json!({"type": "Never"}), "{file}");
        got.as_object_mut().unwrap().remove("restartPolicy");
        for role in ["driver", "executor"] {
            let labels = got[role]["labels"].as_object_mut().unwrap();
            for key in ["weft.dev/workflow", "weft.dev/node", "weft.dev/attempt"] {
                assert!(labels.remove(key).is_some(), "{file}: {role} lacks {key}");
            }
            if labels.is_empty() {
                got[role].as_object_mut().unwrap().remove("labels");
            }
        }
        assert_eq!(got, want, "{file}: the spec is the example's plus Weft's");
    }
}

/// Breaks a valid application in one way.
type Breaks = fn(&mut Value);

#[test]
fn the_schema_refuses_broken_applications() {
    let validator = crd_validator();
    // The examples as the operator ships them pass: the strict schema is not
    // stricter than the operator.
    for file in ["spark-pi.yaml", "spark-pi-python.yaml"] {
        assert_valid(&validator, file, &example(file));
    }
    let spark = spark();
    let (good, _) = spark
        .build_resource(&ctx(example("spark-pi.yaml")["spec"].clone(), json!({})))
        .unwrap();
    assert_valid(&validator, "spark-pi", &good);
    let broken: [(&str, Breaks, &str); 7] = [
        (
            "cores as a string",
            |a| a["spec"]["driver"]["cores"] = "1".into(),
            "/spec/driver/cores",
        ),
        (
            "no executors",
            |a| a["spec"]["executor"]["instances"] = 0.into(),
            "/spec/executor/instances",
        ),
        (
            "an unknown type",
            |a| a["spec"]["type"] = "Rust".into(),
            "/spec/type",
        ),
        (
            "a typo the API server would prune",
            |a| a["spec"]["driver"]["memroy"] = "1g".into(),
            "/spec/driver",
        ),
        (
            "no sparkVersion",
            |a| {
                a["spec"].as_object_mut().unwrap().remove("sparkVersion");
            },
            "/spec",
        ),
        (
            "a restart policy of another operator",
            |a| a["spec"]["restartPolicy"]["type"] = "Sometimes".into(),
            "/spec/restartPolicy/type",
        ),
        (
            "a memory quantity as an object",
            |a| a["spec"]["executor"]["memory"] = json!({"gb": 1}),
            "/spec/executor/memory",
        ),
    ];
    for (what, breaks, path) in broken {
        let mut app = good.clone();
        breaks(&mut app);
        let errors = violations(&validator, &app);
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{path}:"))),
            "{what}: the schema should refuse it at {path}, said {errors:?}"
        );
    }
}

#[test]
fn bad_configs_are_permanent_errors_naming_the_field() {
    let spark = spark();
    let mut typo = example("spark-pi.yaml")["spec"].clone();
    typo["driver"]["memroy"] = "1g".into();
    let cases = [
        (typo, "unknown key driver.memroy"),
        (
            json!({"mainApplicationFile": "local:///a.jar"}),
            "type is required",
        ),
        (json!({"type": "Scala"}), "mainApplicationFile is required"),
        (
            json!({"type": "Scala", "mainApplicationFile": "local:///a.jar", "retries": 3}),
            "unknown key retries",
        ),
    ];
    for (config, want) in cases {
        let err = spark.build_resource(&ctx(config, json!({}))).unwrap_err();
        assert_eq!(err.kind(), FailureKind::User, "{err}");
        assert!(!err.retryable(), "{err}");
        assert!(err.to_string().contains(want), "{err} lacks {want:?}");
    }
}

#[test]
fn properties_delete_on_abort_and_keep_finished_applications() {
    let p = spark().properties();
    assert_eq!(p.abort, AbortBehaviour::Delete);
    assert!(!p.delete_on_finish);
}

#[test]
fn every_observed_application_fixture_maps_to_its_phase() {
    let spark = spark();
    let dir = root().join("tests/fixtures/spark/observed");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in &entries {
        let name = path.file_name().unwrap().to_string_lossy();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (info, _) = spark
            .get_task_phase(&ctx(json!({}), json!({})), &case["observed"])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = serde_json::to_value(&info).unwrap();
        let expect = &case["expect"];
        assert_eq!(got["phase"], expect["phase"], "{name}: {got}");
        assert_eq!(got["reason"], expect["reason"], "{name}: {got}");
        assert_eq!(got["outputs"], expect["outputs"], "{name}: {got}");
        if let Some(s) = expect["messageContains"].as_str() {
            let msg = got["message"].as_str().unwrap_or_default();
            assert!(msg.contains(s), "{name}: message {msg:?} lacks {s:?}");
        }
        let system = expect["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("System:"));
        assert_eq!(info.failure_kind() == FailureKind::System, system, "{name}");
        let names: Vec<&str> = info.log_links.iter().map(|l| l.name.as_str()).collect();
        let want: Vec<&str> = expect["logLinks"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(names, want, "{name}: links");
        let links: Map<String, Value> = info
            .log_links
            .iter()
            .map(|l| (l.name.clone(), Value::String(l.uri.clone())))
            .collect();
        for (link, uri) in expect["links"].as_object().into_iter().flatten() {
            assert_eq!(links.get(link), Some(uri), "{name}: {link}");
        }
    }
    assert!(
        entries.len() >= 25,
        "only {} fixtures in {}",
        entries.len(),
        dir.display()
    );
}
