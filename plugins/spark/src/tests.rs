//! The spark plugin's logic, natively: building SparkApplications, the
//! errors of bad configs, and the fixture table of observed applications
//! that the host's test also drives through the real component.

use super::*;
use serde_json::json;
use weft_plugin_sdk::Phase;

/// The plugin config of `weft-plugin.yaml`.
fn plugin_config() -> Value {
    json!({
        "image": "docker.io/apache/spark:4.0.4",
        "sparkVersion": "4.0.4",
        "serviceAccount": "spark-operator-spark",
        "driverLogLinkTemplate": "kubectl logs -n {namespace} {driverPod}",
        "uiLinkTemplate": "{webUIAddress}",
    })
}

fn ctx(config: Value, inputs: Value) -> TaskContext {
    TaskContext {
        workflow: "wf".into(),
        namespace: "team-a".into(),
        node_id: "train".into(),
        attempt: 0,
        task_type: "spark".into(),
        config,
        inputs,
        resource_name: "wf-train-0".into(),
        labels: [
            ("weft.dev/workflow".to_string(), "wf".to_string()),
            ("weft.dev/node".to_string(), "train".to_string()),
        ]
        .into(),
        plugin_config: plugin_config(),
    }
}

fn build(config: Value, inputs: Value) -> Value {
    build_application(&ctx(config, inputs)).unwrap_or_else(|e| panic!("{e}"))
}

fn build_err(config: Value) -> PluginError {
    let e = build_application(&ctx(config, json!({}))).unwrap_err();
    assert!(!e.retryable, "{e}");
    e
}

/// The security context of the operator's examples.
fn restricted() -> Value {
    json!({
        "capabilities": {"drop": ["ALL"]},
        "runAsGroup": 185,
        "runAsUser": 185,
        "runAsNonRoot": true,
        "allowPrivilegeEscalation": false,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// `tests/fixtures/spark/spark-pi.yaml` as a task config.
fn spark_pi() -> Value {
    json!({
        "type": "Scala",
        "mode": "cluster",
        "image": "docker.io/apache/spark:4.0.4",
        "imagePullPolicy": "IfNotPresent",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
        "arguments": ["5000"],
        "sparkVersion": "4.0.4",
        "driver": {
            "labels": {"version": "4.0.0"},
            "cores": 1,
            "memory": "512m",
            "serviceAccount": "spark-operator-spark",
            "securityContext": restricted(),
        },
        "executor": {
            "labels": {"version": "4.0.0"},
            "instances": 1,
            "cores": 1,
            "memory": "512m",
            "securityContext": restricted(),
        },
    })
}

// --- build-resource -------------------------------------------------------

#[test]
fn spark_pi_becomes_the_operators_example_plus_weft() {
    let app = build(spark_pi(), json!({}));
    assert_eq!(app["apiVersion"], "sparkoperator.k8s.io/v1beta2");
    assert_eq!(app["kind"], "SparkApplication");
    assert_eq!(app["metadata"]["name"], "wf-train-0");
    assert_eq!(app["metadata"]["namespace"], "team-a");
    assert_eq!(app["metadata"]["labels"]["weft.dev/workflow"], "wf");
    let spec = &app["spec"];
    assert_eq!(spec["type"], "Scala");
    assert_eq!(spec["mode"], "cluster");
    assert_eq!(spec["image"], "docker.io/apache/spark:4.0.4");
    assert_eq!(spec["imagePullPolicy"], "IfNotPresent");
    assert_eq!(spec["mainClass"], "org.apache.spark.examples.SparkPi");
    assert_eq!(spec["arguments"], json!(["5000"]));
    assert_eq!(spec["sparkVersion"], "4.0.4");
    assert_eq!(spec["restartPolicy"], json!({"type": "Never"}));
    for role in ["driver", "executor"] {
        let pod = &spec[role];
        assert_eq!(pod["cores"], 1, "{role}");
        assert_eq!(pod["memory"], "512m", "{role}");
        assert_eq!(pod["securityContext"], restricted(), "{role}");
        assert_eq!(
            pod["labels"],
            json!({"version": "4.0.0", "weft.dev/workflow": "wf", "weft.dev/node": "train"}),
            "{role}"
        );
    }
    assert_eq!(spec["driver"]["serviceAccount"], "spark-operator-spark");
    assert_eq!(spec["executor"]["instances"], 1);
    assert!(spec.get("sparkConf").is_none());
}

#[test]
fn spark_pi_python_uses_the_plugin_defaults() {
    // spark-pi-python.yaml, leaving image, sparkVersion and the driver's
    // service account to the plugin config.
    let app = build(
        json!({
            "type": "Python",
            "pythonVersion": 3,
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
            "driver": {"cores": 1, "memory": "512m", "securityContext": restricted()},
            "executor": {"instances": 1, "cores": 1, "memory": "512m", "securityContext": restricted()},
        }),
        json!({}),
    );
    let spec = &app["spec"];
    assert_eq!(spec["type"], "Python");
    assert_eq!(
        spec["pythonVersion"], "3",
        "YAML's number 3 becomes the CRD's \"3\""
    );
    assert_eq!(spec["mode"], "cluster");
    assert_eq!(spec["image"], "docker.io/apache/spark:4.0.4");
    assert_eq!(spec["sparkVersion"], "4.0.4");
    assert_eq!(spec["driver"]["serviceAccount"], "spark-operator-spark");
    assert!(spec.get("mainClass").is_none());
    assert!(spec.get("arguments").is_none());
    assert_eq!(spec["executor"]["labels"]["weft.dev/node"], "train");
}

#[test]
fn the_task_wins_over_the_plugin_defaults_and_host_labels_win_over_the_task() {
    let mut config = spark_pi();
    config["image"] = "ghcr.io/acme/spark:3.5.1".into();
    config["sparkVersion"] = "3.5.1".into();
    config["driver"]["serviceAccount"] = "team-a-spark".into();
    config["driver"]["labels"]["weft.dev/node"] = "forged".into();
    let spec = build(config, json!({}))["spec"].clone();
    assert_eq!(spec["image"], "ghcr.io/acme/spark:3.5.1");
    assert_eq!(spec["sparkVersion"], "3.5.1");
    assert_eq!(spec["driver"]["serviceAccount"], "team-a-spark");
    assert_eq!(spec["driver"]["labels"]["weft.dev/node"], "train");
}

#[test]
fn dynamic_allocation_deps_confs_and_the_rest() {
    let spec = build(
        json!({
            "type": "Java",
            "mode": "client",
            "mainApplicationFile": "s3a://jobs/etl.jar",
            "mainClass": "com.acme.Etl",
            "arguments": ["--day", 20261122, true],
            "sparkConf": {"spark.sql.shuffle.partitions": 64, "spark.eventLog.enabled": true},
            "hadoopConf": {"fs.s3a.path.style.access": "true"},
            "deps": {"jars": ["s3a://jobs/lib.jar"], "packages": ["org.apache.hadoop:hadoop-aws:3.4.1"]},
            "driver": {"cores": 2, "coreLimit": 2, "memory": "2g", "env": {"MODE": "fast", "N": 3}},
            "executor": {"instances": 2, "cores": 4, "memory": "8g", "memoryOverhead": "1g", "env": [{"name": "X", "value": "y"}]},
            "dynamicAllocation": {"enabled": true, "initialExecutors": 2, "minExecutors": 1, "maxExecutors": 10},
            "restartPolicy": {"type": "OnFailure", "onFailureRetries": 2, "onSubmissionFailureRetries": 1},
            "timeToLiveSeconds": 3600,
            "annotations": {"team": "a", "cost-center": 42},
        }),
        json!({}),
    )["spec"]
        .clone();
    assert_eq!(spec["mode"], "client");
    assert_eq!(spec["arguments"], json!(["--day", "20261122", "true"]));
    assert_eq!(
        spec["sparkConf"],
        json!({"spark.sql.shuffle.partitions": "64", "spark.eventLog.enabled": "true"})
    );
    assert_eq!(spec["hadoopConf"]["fs.s3a.path.style.access"], "true");
    assert_eq!(
        spec["deps"]["packages"][0],
        "org.apache.hadoop:hadoop-aws:3.4.1"
    );
    assert_eq!(spec["driver"]["coreLimit"], "2");
    assert_eq!(
        spec["driver"]["env"],
        json!([{"name": "MODE", "value": "fast"}, {"name": "N", "value": "3"}])
    );
    assert_eq!(
        spec["executor"]["env"],
        json!([{"name": "X", "value": "y"}])
    );
    assert_eq!(
        spec["dynamicAllocation"],
        json!({"enabled": true, "initialExecutors": 2, "minExecutors": 1, "maxExecutors": 10})
    );
    assert_eq!(spec["restartPolicy"]["type"], "OnFailure");
    assert_eq!(spec["timeToLiveSeconds"], 3600);
    let app = build(
        json!({"type": "R", "mainApplicationFile": "local:///app.R", "annotations": {"n": 1}}),
        json!({}),
    );
    assert_eq!(app["metadata"]["annotations"]["n"], "1");
    assert_eq!(
        app["spec"]["driver"]["serviceAccount"],
        "spark-operator-spark"
    );
    assert!(
        app["spec"]["executor"].is_object(),
        "the CRD requires executor"
    );
}

#[test]
fn inputs_become_arguments_by_default() {
    let mut config = spark_pi();
    config["arguments"] = json!([
        "{{inputs.partitions}}",
        "--who={{ inputs.who }}",
        "{{inputs.missing}}"
    ]);
    let spec = build(
        config,
        json!({"partitions": 10, "who": "world", "opts": {"a": [1]}}),
    )["spec"]
        .clone();
    assert_eq!(
        spec["arguments"],
        json!([
            "10",
            "--who=world",
            "{{inputs.missing}}",
            "--opts={\"a\":[1]}",
            "--partitions=10",
            "--who=world",
        ])
    );
    assert!(spec.get("sparkConf").is_none());
}

#[test]
fn inputs_become_spark_conf_or_nothing_on_request() {
    let mut config = spark_pi();
    config["inputsAs"] = "conf".into();
    config["sparkConf"] = json!({"spark.weft.input.n": "from config", "spark.ui.enabled": "false"});
    let spec = build(
        config.clone(),
        json!({"n": 3, "name": "x", "cfg": {"k": true}}),
    )["spec"]
        .clone();
    assert_eq!(spec["arguments"], json!(["5000"]), "arguments untouched");
    assert_eq!(
        spec["sparkConf"],
        json!({
            "spark.ui.enabled": "false",
            "spark.weft.input.n": "3",
            "spark.weft.input.name": "x",
            "spark.weft.input.cfg": "{\"k\":true}",
        })
    );
    config["inputsAs"] = "none".into();
    config["arguments"] = json!(["{{inputs.n}}"]);
    let spec = build(config, json!({"n": 3}))["spec"].clone();
    assert_eq!(spec["arguments"], json!(["3"]));
    assert_eq!(spec["sparkConf"]["spark.weft.input.n"], "from config");
}

#[test]
fn bad_configs_are_permanent_errors_that_name_the_field() {
    let without = |key: &str| {
        let mut c = spark_pi();
        c.as_object_mut().unwrap().remove(key);
        c
    };
    let with = |path: &[&str], v: Value| {
        let mut c = spark_pi();
        let mut at = &mut c;
        for p in &path[..path.len() - 1] {
            at = &mut at[*p];
        }
        at[path[path.len() - 1]] = v;
        c
    };
    let cases: Vec<(Value, &str)> = vec![
        (json!([1]), "must be an object"),
        (without("type"), "type is required"),
        (without("mainApplicationFile"), "mainApplicationFile is required"),
        (with(&["mainApplicationFile"], "  ".into()), "mainApplicationFile is required"),
        (with(&["type"], "Rust".into()), "type must be one of Scala, Java, Python or R, not \"Rust\""),
        (with(&["mode"], "local".into()), "mode must be cluster or client"),
        (with(&["image"], 4.into()), "image must be a string"),
        (with(&["mainClas"], "x".into()), "unknown key mainClas in the task config"),
        (with(&["failureRetries"], 3.into()), "unknown key failureRetries"),
        (with(&["driver", "memroy"], "1g".into()), "unknown key driver.memroy"),
        (with(&["executor", "podName"], "x".into()), "unknown key executor.podName"),
        (with(&["deps", "pyfiles"], json!([])), "unknown key deps.pyfiles"),
        (with(&["dynamicAllocation", "maxExecutor"], 3.into()), "unknown key dynamicAllocation.maxExecutor"),
        (with(&["restartPolicy", "retries"], 3.into()), "unknown key restartPolicy.retries"),
        (with(&["driver", "cores"], 0.5.into()), "driver.cores must be a whole number of at least 1, not 0.5 (for a fraction of a core, set coreRequest"),
        (with(&["executor", "instances"], 0.into()), "executor.instances must be a whole number of at least 1"),
        (with(&["executor", "memory"], json!({"gb": 1})), "executor.memory must be a quantity"),
        (with(&["driver", "env"], "A=b".into()), "driver.env must be a list or a map"),
        (with(&["driver", "labels"], json!(["a"])), "driver.labels must be a map"),
        (with(&["driver"], "big".into()), "driver must be an object"),
        (with(&["deps"], json!({"jars": "a.jar"})), "deps.jars must be a list of strings"),
        (with(&["dynamicAllocation"], json!({"enabled": "yes"})), "dynamicAllocation.enabled must be true or false"),
        (with(&["dynamicAllocation"], json!({"minExecutors": 5, "maxExecutors": 2})), "minExecutors (5) is more than maxExecutors (2)"),
        (with(&["dynamicAllocation"], json!({"maxExecutors": -1})), "dynamicAllocation.maxExecutors must be a whole number"),
        (with(&["arguments"], "5000".into()), "arguments must be a list"),
        (with(&["arguments"], json!(["a", ["b"]])), "arguments[1] must be a string"),
        (with(&["sparkConf"], json!(["a"])), "sparkConf must be a map"),
        (with(&["inputsAs"], "env".into()), "inputsAs must be arguments, conf or none, not \"env\""),
        (with(&["annotations"], "a=b".into()), "annotations must be a map"),
    ];
    for (config, want) in cases {
        let e = build_err(config.clone());
        assert!(e.message.contains(want), "{config}: {e:?} lacks {want:?}");
    }
    let e = build_err(with(&["driver", "memroy"], "1g".into()));
    assert!(
        e.message.contains("memory"),
        "the known keys are listed: {e}"
    );
}

#[test]
fn image_and_spark_version_are_required_without_plugin_defaults() {
    let mut c = ctx(
        json!({"type": "Scala", "mainApplicationFile": "local:///a.jar"}),
        json!({}),
    );
    c.plugin_config = json!({});
    let e = build_application(&c).unwrap_err();
    assert!(!e.retryable);
    assert!(e.message.starts_with("image is required"), "{e}");
    c.config["image"] = "spark:4".into();
    let e = build_application(&c).unwrap_err();
    assert!(e.message.starts_with("sparkVersion is required"), "{e}");
    c.config["sparkVersion"] = "4.0.0".into();
    let app = build_application(&c).unwrap();
    assert!(app["spec"]["driver"].get("serviceAccount").is_none());
}

#[test]
fn properties_delete_on_abort_and_keep_finished_applications() {
    let p = Spark::properties();
    assert_eq!(p.abort, AbortBehaviour::Delete);
    assert!(!p.delete_on_finish);
}

// --- get-task-phase -------------------------------------------------------

fn phase_of(observed: Value) -> PhaseInfo {
    application_phase(&ctx(json!({}), json!({})), &observed)
}

#[test]
fn long_error_messages_are_cut() {
    let info = phase_of(
        json!({"status": {"applicationState": {"state": "FAILED", "errorMessage": "x".repeat(5000)}}}),
    );
    assert_eq!(info.phase, Phase::RetryableFailure);
    assert!(info.message.unwrap().len() < 1100);
}

#[test]
fn links_follow_the_templates_and_only_when_filled() {
    let app = json!({
        "metadata": {"name": "wf-train-0", "namespace": "team-a"},
        "status": {"applicationState": {"state": "RUNNING"}, "driverInfo": {"podName": "d", "webUIServiceName": "svc", "webUIPort": 4040}},
    });
    let mut c = ctx(json!({}), json!({}));
    c.plugin_config["driverLogLinkTemplate"] =
        "https://logs.example.com/{namespace}/{name}/{driverPod}".into();
    c.plugin_config["uiLinkTemplate"] =
        "https://proxy.example.com/{namespace}/{webUIServiceName}:{webUIPort}".into();
    let info = application_phase(&c, &app);
    let links: Vec<(&str, &str)> = info
        .log_links
        .iter()
        .map(|l| (l.name.as_str(), l.uri.as_str()))
        .collect();
    assert_eq!(
        links,
        [
            (
                "Driver logs",
                "https://logs.example.com/team-a/wf-train-0/d"
            ),
            ("Spark UI", "https://proxy.example.com/team-a/svc:4040"),
        ]
    );
    // The default UI template needs an address, which this status lacks.
    let info = phase_of(app);
    assert_eq!(info.log_links.len(), 1, "{info:?}");
    // No templates, no links.
    c.plugin_config = json!({"driverLogLinkTemplate": ""});
    assert!(
        application_phase(&c, &json!({"status": {"driverInfo": {"podName": "d"}}}))
            .log_links
            .is_empty()
    );
}

/// `tests/fixtures/spark/observed/*.json` at the repository root: one
/// observed SparkApplication per file with the phase the plugin must make of
/// it. The host's `spark` test runs the same table through the component.
#[test]
fn the_fixture_table() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/spark/observed"
    );
    let mut n = 0;
    let mut states = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let info = phase_of(case["observed"].clone());
        check_case(&name, &case["expect"], &info);
        if let Some(s) = case["observed"]["status"]["applicationState"]["state"].as_str() {
            states.insert(s.to_string());
        }
        n += 1;
    }
    assert!(n >= 25, "only {n} fixtures");
    for state in [
        "",
        "NEW",
        "SUBMITTED",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "SUBMISSION_FAILED",
        "PENDING_RERUN",
        "INVALIDATING",
        "SUCCEEDING",
        "FAILING",
        "UNKNOWN",
        "SUSPENDING",
        "SUSPENDED",
        "RESUMING",
    ] {
        assert!(states.contains(state), "no fixture for state {state:?}");
    }
}

/// One fixture's expectations against an answer (the host's test does the same).
fn check_case(name: &str, expect: &Value, info: &PhaseInfo) {
    let got = serde_json::to_value(info).unwrap();
    assert_eq!(got["phase"], expect["phase"], "{name}: {got}");
    assert_eq!(got["reason"], expect["reason"], "{name}: {got}");
    assert_eq!(got["outputs"], expect["outputs"], "{name}: {got}");
    if let Some(s) = expect["messageContains"].as_str() {
        let msg = got["message"].as_str().unwrap_or_default();
        assert!(msg.contains(s), "{name}: message {msg:?} lacks {s:?}");
    }
    let names: Vec<&str> = info.log_links.iter().map(|l| l.name.as_str()).collect();
    let want: Vec<&str> = expect["logLinks"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(names, want, "{name}: links");
    for (link, uri) in expect["links"].as_object().into_iter().flatten() {
        let got = info
            .log_links
            .iter()
            .find(|l| l.name == *link)
            .map(|l| l.uri.as_str());
        assert_eq!(got, uri.as_str(), "{name}: {link}");
    }
}
