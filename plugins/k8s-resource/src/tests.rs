//! The k8s-resource plugin's logic, natively: building objects from
//! templates, and mapping observed Kubeflow, Ray, Tekton and batch objects
//! to phases through CEL conditions alone.

use super::*;
use serde_json::json;
use weft_plugin_sdk::Phase;

fn ctx(config: Value) -> TaskContext {
    TaskContext {
        workflow: "wf".into(),
        namespace: "team-a".into(),
        node_id: "train".into(),
        attempt: 0,
        task_type: "k8s-resource".into(),
        config,
        inputs: json!({
            "image": "pytorch/pytorch:2",
            "epochs": 10,
            "lr": 0.01,
            "env": {"name": "MODE", "value": "fast"},
            "tag": "v1",
        }),
        resource_name: "wf-train-0".into(),
        labels: [
            ("weft.dev/workflow".to_string(), "wf".to_string()),
            ("weft.dev/node".to_string(), "train".to_string()),
        ]
        .into(),
        plugin_config: json!({
            "allowedKinds": DEFAULT_KINDS
                .iter()
                .map(|(a, k)| json!({"apiVersion": a, "kind": k}))
                .collect::<Vec<_>>(),
            "failureRetryable": true,
        }),
    }
}

fn with_plugin_config(mut c: TaskContext, plugin_config: Value) -> TaskContext {
    c.plugin_config = plugin_config;
    c
}

fn permanent_error(r: Result<Value, PluginError>) -> String {
    let e = r.expect_err("expected an error");
    assert!(!e.retryable, "{e:?} should be permanent");
    e.message
}

/// Asserts a phase and returns the phase info.
fn assert_phase(config: &Value, observed: Value, want: Phase) -> PhaseInfo {
    let p = phase(&ctx(config.clone()), &observed).expect("a phase");
    assert_eq!(p.phase, want, "{observed} -> {p:?}");
    p
}

// ---------------------------------------------------------------------------
// Fixtures: task configs as a user writes them, observed objects as their
// controllers report them.

fn pytorch_config() -> Value {
    json!({
        "manifest": {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "pytorch", "image": "${inputs.image}",
                    "args": ["--epochs", "${inputs.epochs}", "--lr=${inputs.lr}"]}],
            }}}}},
        },
        "successCondition": "object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')",
        "failureCondition": "object.status.conditions.exists(c, c.type == 'Failed' && c.status == 'True')",
        "outputs": {"completed": "object.status.completionTime"},
    })
}

fn pytorch_job(conditions: &[(&str, &str, &str)]) -> Value {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(t, reason, message)| {
            json!({"type": t, "status": "True", "reason": reason, "message": message,
                   "lastTransitionTime": "2024-01-01T00:00:00Z"})
        })
        .collect();
    let mut job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "wf-train-0", "namespace": "team-a"},
        "status": {"conditions": conditions, "replicaStatuses": {"Master": {"active": 1}},
                   "startTime": "2024-01-01T00:00:00Z"},
    });
    if conditions.iter().any(|c| c["type"] == "Succeeded") {
        job["status"]["completionTime"] = "2024-01-01T01:00:00Z".into();
    }
    job
}

fn rayjob_config() -> Value {
    json!({
        "manifest": {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "spec": {"entrypoint": "python train.py --epochs ${inputs.epochs}", "shutdownAfterJobFinishes": true},
        },
        "successCondition": "object.status.jobStatus == 'SUCCEEDED'",
        "failureCondition": "object.status.jobStatus in ['FAILED', 'STOPPED'] || object.status.jobDeploymentStatus == 'Failed'",
        "runningCondition": "object.status.jobStatus == 'RUNNING'",
        "outputs": {
            "jobId": "object.status.jobId",
            "dashboard": "'http://' + object.status.dashboardURL",
        },
    })
}

fn rayjob(deployment: &str, job: Option<&str>) -> Value {
    let mut o = json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "wf-train-0", "namespace": "team-a"},
        "status": {"jobDeploymentStatus": deployment, "dashboardURL": "wf-train-0-head-svc:8265",
                   "rayClusterName": "wf-train-0-raycluster-x7k2p"},
    });
    if let Some(job) = job {
        o["status"]["jobStatus"] = job.into();
        o["status"]["jobId"] = "wf-train-0-abcde".into();
    }
    o
}

fn pipelinerun_config() -> Value {
    json!({
        "manifest": {
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "spec": {"pipelineRef": {"name": "build"}, "params": [{"name": "tag", "value": "${inputs.tag}"}]},
        },
        "successCondition": "object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'True')",
        "failureCondition": "object.status.conditions.exists(c, c.type == 'Succeeded' && c.status == 'False')",
        "outputs": {"results": "object.status.results"},
    })
}

fn pipelinerun(status: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "wf-train-0", "namespace": "team-a"},
        "status": {
            "conditions": [{"type": "Succeeded", "status": status, "reason": reason,
                            "message": format!("Tasks Completed: 1 ({reason})")}],
            "startTime": "2024-01-01T00:00:00Z",
            "results": [{"name": "digest", "value": "sha256:abc"}],
        },
    })
}

// ---------------------------------------------------------------------------
// build-resource

#[test]
fn a_whole_placeholder_keeps_the_inputs_type() {
    let mut config = pytorch_config();
    config["manifest"]["spec"]["replicas"] = "${inputs.epochs}".into();
    config["manifest"]["spec"]["env"] = "${ inputs.env }".into();
    let o = build(&ctx(config)).unwrap();
    assert_eq!(o["spec"]["replicas"], json!(10));
    assert_eq!(o["spec"]["env"], json!({"name": "MODE", "value": "fast"}));
    let c = &o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "pytorch/pytorch:2");
}

#[test]
fn placeholders_inside_a_string_are_interpolated() {
    let mut config = pytorch_config();
    config["manifest"]["spec"]["note"] =
        "${inputs.image} for ${inputs.epochs} epochs, ${inputs.env}".into();
    let o = build(&ctx(config)).unwrap();
    assert_eq!(
        o["spec"]["note"],
        r#"pytorch/pytorch:2 for 10 epochs, {"name":"MODE","value":"fast"}"#
    );
    let c = &o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0];
    // A whole placeholder in a list is typed too (a number in `args`, which
    // the API server would refuse: the docs say to write text around it);
    // a longer string is text.
    assert_eq!(c["args"], json!(["--epochs", 10, "--lr=0.01"]));
}

#[test]
fn other_dollar_braces_are_left_alone() {
    let mut config = pytorch_config();
    config["manifest"]["spec"]["script"] = "echo ${HOME} ${inputs.tag} ${unclosed".into();
    config["manifest"]["spec"]["literal"] = "$(params.tag) {inputs.tag}".into();
    let o = build(&ctx(config)).unwrap();
    assert_eq!(o["spec"]["script"], "echo ${HOME} v1 ${unclosed");
    assert_eq!(o["spec"]["literal"], "$(params.tag) {inputs.tag}");
}

#[test]
fn an_unknown_input_is_a_permanent_error_that_names_it() {
    let mut config = pytorch_config();
    config["manifest"]["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] =
        "${inputs.workers}".into();
    let msg = permanent_error(build(&ctx(config)));
    assert!(msg.contains("\"workers\""), "{msg}");
    assert!(
        msg.contains("manifest.spec.pytorchReplicaSpecs.Master.replicas"),
        "{msg}"
    );
    assert!(msg.contains("epochs"), "lists the known inputs: {msg}");

    let mut config = pytorch_config();
    config["manifest"]["spec"]["args"] = json!(["x", "--n=${inputs.n}"]);
    let msg = permanent_error(build(&ctx(config)));
    assert!(
        msg.contains("manifest.spec.args[1]") && msg.contains("\"n\""),
        "{msg}"
    );
}

#[test]
fn the_host_decides_name_namespace_and_labels() {
    let mut config = pytorch_config();
    config["manifest"]["metadata"] = json!({
        "name": "mine",
        "generateName": "mine-",
        "namespace": "kube-system",
        "labels": {"team": "ml", "weft.dev/node": "spoofed"},
        "annotations": {"note": "kept"},
    });
    let o = build(&ctx(config)).unwrap();
    let m = &o["metadata"];
    assert_eq!(m["name"], "wf-train-0");
    assert_eq!(m["namespace"], "team-a");
    assert!(m.get("generateName").is_none());
    assert_eq!(
        m["labels"],
        json!({"team": "ml", "weft.dev/workflow": "wf", "weft.dev/node": "train"})
    );
    assert_eq!(m["annotations"]["note"], "kept");

    // Without metadata at all (or a null one) it is made.
    for metadata in [None, Some(Value::Null)] {
        let mut config = pytorch_config();
        if let Some(m) = metadata {
            config["manifest"]["metadata"] = m;
        }
        let o = build(&ctx(config)).unwrap();
        assert_eq!(o["metadata"]["name"], "wf-train-0");
        assert_eq!(o["metadata"]["labels"]["weft.dev/workflow"], "wf");
    }
}

#[test]
fn a_kind_that_is_not_allowed_is_refused_by_name() {
    let mut config = pytorch_config();
    config["manifest"]["apiVersion"] = "v1".into();
    config["manifest"]["kind"] = "Secret".into();
    let msg = permanent_error(build(&ctx(config.clone())));
    assert!(msg.contains("kind Secret (v1) is not allowed"), "{msg}");
    assert!(msg.contains("allowedKinds"), "{msg}");

    // The same kind in another version is another kind.
    let mut v1beta1 = pytorch_config();
    v1beta1["manifest"]["apiVersion"] = "kubeflow.org/v1beta1".into();
    let msg = permanent_error(build(&ctx(v1beta1)));
    assert!(msg.contains("PyTorchJob (kubeflow.org/v1beta1)"), "{msg}");

    // The operator's list replaces the default.
    let operator = json!({"allowedKinds": [{"apiVersion": "v1", "kind": "Secret"}]});
    let c = with_plugin_config(ctx(config), operator.clone());
    assert_eq!(build(&c).unwrap()["kind"], "Secret");
    let c = with_plugin_config(ctx(pytorch_config()), operator);
    assert!(permanent_error(build(&c)).contains("PyTorchJob"));

    // Without a plugin config (or without the key) the defaults apply.
    for pc in [Value::Null, json!({})] {
        let c = with_plugin_config(ctx(pytorch_config()), pc);
        assert_eq!(build(&c).unwrap()["kind"], "PyTorchJob");
    }
}

#[test]
fn the_kind_is_checked_after_substitution() {
    let mut config = pytorch_config();
    config["manifest"]["kind"] = "${inputs.tag}".into();
    let msg = permanent_error(build(&ctx(config)));
    assert!(msg.contains("kind v1 (kubeflow.org/v1)"), "{msg}");
}

#[test]
fn a_manifest_needs_api_version_and_kind() {
    for (field, value) in [
        ("apiVersion", Value::Null),
        ("kind", json!("")),
        ("kind", json!(3)),
    ] {
        let mut config = pytorch_config();
        config["manifest"][field] = value;
        let msg = permanent_error(build(&ctx(config)));
        assert!(msg.contains(&format!("manifest.{field}")), "{msg}");
    }
    let mut config = pytorch_config();
    config["manifest"]["metadata"] = json!("x");
    assert!(permanent_error(build(&ctx(config))).contains("manifest.metadata"));
    let mut config = pytorch_config();
    config["manifest"]["metadata"] = json!({"labels": ["a"]});
    assert!(permanent_error(build(&ctx(config))).contains("manifest.metadata.labels"));
}

#[test]
fn a_bad_task_config_is_a_permanent_error() {
    for (config, expect) in [
        (json!({}), "manifest"),
        (json!({"manifest": {}}), "successCondition"),
        (
            json!({"manifest": [], "successCondition": "true"}),
            "manifest",
        ),
        (
            json!({"manifest": {}, "successCondition": "true", "sucessCondition": "true"}),
            "sucessCondition",
        ),
    ] {
        let msg = permanent_error(build(&ctx(config)));
        assert!(msg.contains(expect), "{msg} should name {expect}");
    }
}

#[test]
fn cel_syntax_errors_are_reported_at_build_by_field() {
    for (field, expect) in [
        ("/successCondition", "successCondition"),
        ("/failureCondition", "failureCondition"),
        ("/runningCondition", "runningCondition"),
        ("/outputs/jobId", "outputs.jobId"),
    ] {
        let mut config = rayjob_config();
        *config.pointer_mut(field).unwrap() = "object.status.( == ".into();
        let msg = permanent_error(build(&ctx(config)));
        assert!(msg.starts_with(expect), "{msg} should name {expect}");
        assert!(msg.contains("not valid CEL"), "{msg}");
        assert!(
            msg.contains("object.status.( == "),
            "quotes the source: {msg}"
        );
    }
    let mut config = rayjob_config();
    config["successCondition"] = " ".into();
    assert!(permanent_error(build(&ctx(config))).contains("successCondition is empty"));
}

#[test]
fn the_properties_delete_on_abort_and_keep_finished_objects() {
    let p = K8sResource::properties();
    assert_eq!(p.abort, AbortBehaviour::Delete);
    assert!(!p.delete_on_finish);
}

#[test]
fn the_shipped_manifest_allows_the_default_kinds_in_both_lists() {
    let manifest = include_str!("../weft-plugin.yaml");
    for (api_version, kind) in DEFAULT_KINDS {
        let entry = format!("{{apiVersion: {api_version}, kind: {kind}}}");
        assert_eq!(
            manifest.matches(&entry).count(),
            2,
            "{entry} should be in resources and in config.allowedKinds"
        );
    }
    let entries = manifest.matches("{apiVersion:").count();
    assert_eq!(
        entries,
        2 * DEFAULT_KINDS.len(),
        "no kind beyond the defaults"
    );
}

// ---------------------------------------------------------------------------
// get-task-phase: Kubeflow PyTorchJob

#[test]
fn a_pytorchjob_runs_succeeds_and_reports_outputs() {
    let config = pytorch_config();
    let created = pytorch_job(&[("Created", "PyTorchJobCreated", "created")]);
    assert_phase(&config, created, Phase::Running);
    let running = pytorch_job(&[("Created", "", ""), ("Running", "PyTorchJobRunning", "")]);
    assert_phase(&config, running, Phase::Running);
    let done = pytorch_job(&[
        ("Created", "", ""),
        ("Running", "", ""),
        ("Succeeded", "PyTorchJobSucceeded", "done"),
    ]);
    let p = assert_phase(&config, done, Phase::Success);
    assert_eq!(
        Value::Object(p.outputs.unwrap()),
        json!({"completed": "2024-01-01T01:00:00Z"})
    );
}

#[test]
fn a_failed_pytorchjob_is_retryable_unless_configured_otherwise() {
    let failed = pytorch_job(&[
        ("Created", "", ""),
        (
            "Failed",
            "PyTorchJobFailed",
            "Master replica 0 exited with 1",
        ),
    ]);
    let p = assert_phase(&pytorch_config(), failed.clone(), Phase::RetryableFailure);
    assert_eq!(p.reason.as_deref(), Some("FailureCondition"));
    let msg = p.message.unwrap();
    assert!(msg.contains("failureCondition"), "{msg}");
    assert!(
        msg.contains("PyTorchJobFailed: Master replica 0 exited with 1"),
        "{msg}"
    );

    // The task says so.
    let mut config = pytorch_config();
    config["failureRetryable"] = false.into();
    assert_phase(&config, failed.clone(), Phase::PermanentFailure);

    // The operator says so; a task may still say otherwise.
    let operator = json!({"failureRetryable": false});
    let c = with_plugin_config(ctx(pytorch_config()), operator.clone());
    assert_eq!(phase(&c, &failed).unwrap().phase, Phase::PermanentFailure);
    let mut config = pytorch_config();
    config["failureRetryable"] = true.into();
    let c = with_plugin_config(ctx(config), operator);
    assert_eq!(phase(&c, &failed).unwrap().phase, Phase::RetryableFailure);
}

#[test]
fn failure_wins_when_both_conditions_hold() {
    let both = pytorch_job(&[("Succeeded", "", ""), ("Failed", "", "")]);
    assert_phase(&pytorch_config(), both, Phase::RetryableFailure);
}

// ---------------------------------------------------------------------------
// get-task-phase: Ray RayJob

#[test]
fn a_rayjob_goes_through_its_deployment_and_job_states() {
    let config = rayjob_config();
    // The cluster comes up: no job status yet, runningCondition not true.
    let p = assert_phase(&config, rayjob("Initializing", None), Phase::Initializing);
    assert!(p.message.is_none());
    assert_phase(
        &config,
        rayjob("Running", Some("PENDING")),
        Phase::Initializing,
    );
    assert_phase(&config, rayjob("Running", Some("RUNNING")), Phase::Running);
    let p = assert_phase(
        &config,
        rayjob("Complete", Some("SUCCEEDED")),
        Phase::Success,
    );
    assert_eq!(
        Value::Object(p.outputs.unwrap()),
        json!({"jobId": "wf-train-0-abcde", "dashboard": "http://wf-train-0-head-svc:8265"})
    );
}

#[test]
fn a_failed_rayjob_says_why() {
    let config = rayjob_config();
    let mut failed = rayjob("Failed", Some("FAILED"));
    failed["status"]["message"] = "Job entrypoint command failed with exit code 1".into();
    let p = assert_phase(&config, failed, Phase::RetryableFailure);
    assert!(p.message.unwrap().ends_with("exit code 1"));
    // The deployment failed before any job ran (no jobStatus at all): the
    // `||` still decides, the missing key on its left notwithstanding.
    assert_phase(&config, rayjob("Failed", None), Phase::RetryableFailure);
    assert_phase(
        &config,
        rayjob("Complete", Some("STOPPED")),
        Phase::RetryableFailure,
    );
}

// ---------------------------------------------------------------------------
// get-task-phase: Tekton PipelineRun

#[test]
fn a_pipelinerun_follows_its_succeeded_condition() {
    let config = pipelinerun_config();
    assert_phase(&config, pipelinerun("Unknown", "Running"), Phase::Running);
    let p = assert_phase(&config, pipelinerun("True", "Succeeded"), Phase::Success);
    assert_eq!(
        p.outputs.unwrap()["results"],
        json!([{"name": "digest", "value": "sha256:abc"}])
    );
    let p = assert_phase(
        &config,
        pipelinerun("False", "PipelineRunTimeout"),
        Phase::RetryableFailure,
    );
    let msg = p.message.unwrap();
    assert!(
        msg.contains("PipelineRunTimeout: Tasks Completed: 1 (PipelineRunTimeout)"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------
// get-task-phase: batch Job, with has() guards

#[test]
fn a_batch_job_with_has_guards() {
    let config = json!({
        "manifest": {"apiVersion": "batch/v1", "kind": "Job", "spec": {}},
        "successCondition": "has(object.status.succeeded) && object.status.succeeded > 0",
        "failureCondition": "has(object.status.failed) && object.status.failed > 2",
        "outputs": {"succeeded": "object.status.succeeded"},
    });
    let job = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "status": status});
    assert_phase(&config, job(json!({})), Phase::Queued);
    assert_phase(&config, job(json!({"active": 1})), Phase::Running);
    assert_phase(
        &config,
        job(json!({"active": 1, "failed": 2})),
        Phase::Running,
    );
    assert_phase(&config, job(json!({"failed": 3})), Phase::RetryableFailure);
    let p = assert_phase(&config, job(json!({"succeeded": 1})), Phase::Success);
    assert_eq!(p.outputs.unwrap()["succeeded"], json!(1));
}

// ---------------------------------------------------------------------------
// get-task-phase: partial and garbage objects

#[test]
fn objects_without_a_status_are_queued() {
    for observed in [
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "wf-train-0"}}),
        json!({"status": null}),
        json!({"status": {}}),
        json!({}),
        json!(null),
        json!("garbage"),
        json!(42),
        json!([1, 2]),
    ] {
        for config in [pytorch_config(), rayjob_config(), pipelinerun_config()] {
            assert_phase(&config, observed.clone(), Phase::Queued);
        }
    }
}

#[test]
fn partial_or_strange_statuses_are_not_yet_true() {
    for status in [
        json!({"conditions": "not a list"}),
        json!({"conditions": [{"type": 3}]}),
        json!({"conditions": [null, 1, "x"]}),
        json!({"jobStatus": 7, "jobDeploymentStatus": ["x"]}),
        json!({"jobStatus": null}),
        json!("a string status"),
        json!([{"type": "Succeeded", "status": "True"}]),
        json!(1.5),
    ] {
        let observed = json!({"metadata": {"name": "x"}, "status": status});
        assert_phase(&pytorch_config(), observed.clone(), Phase::Running);
        assert_phase(&pipelinerun_config(), observed.clone(), Phase::Running);
        assert_phase(&rayjob_config(), observed, Phase::Initializing);
    }
}

#[test]
fn a_condition_that_is_not_boolean_fails_the_task() {
    let mut config = pytorch_config();
    config["successCondition"] = "object.status.replicaStatuses".into();
    let p = assert_phase(
        &config,
        pytorch_job(&[("Running", "", "")]),
        Phase::PermanentFailure,
    );
    assert_eq!(p.reason.as_deref(), Some("InvalidCondition"));
    assert!(p.message.unwrap().contains("successCondition"));
    // Not on an object where it cannot be evaluated yet.
    assert_phase(&config, json!({"status": {"x": 1}}), Phase::Running);
}

#[test]
fn an_output_that_fails_is_a_permanent_failure_naming_it() {
    let mut config = pytorch_config();
    config["outputs"]["model"] = "object.status.modelURI".into();
    let done = pytorch_job(&[("Succeeded", "", "")]);
    let p = assert_phase(&config, done, Phase::PermanentFailure);
    assert_eq!(p.reason.as_deref(), Some("InvalidOutputs"));
    let msg = p.message.unwrap();
    assert!(msg.contains("output model"), "{msg}");
    assert!(msg.contains("object.status.modelURI"), "{msg}");
}

#[test]
fn outputs_keep_their_types_and_are_absent_when_not_asked_for() {
    let mut config = pytorch_config();
    config["outputs"] = json!({
        "masters": "object.status.replicaStatuses.Master.active",
        "types": "object.status.conditions.map(c, c.type)",
        "summary": "{'ok': true, 'n': size(object.status.conditions)}",
    });
    let done = pytorch_job(&[("Running", "", ""), ("Succeeded", "", "")]);
    let p = assert_phase(&config, done.clone(), Phase::Success);
    assert_eq!(
        Value::Object(p.outputs.unwrap()),
        json!({"masters": 1, "types": ["Running", "Succeeded"], "summary": {"ok": true, "n": 2}})
    );
    config.as_object_mut().unwrap().remove("outputs");
    assert_eq!(assert_phase(&config, done, Phase::Success).outputs, None);
}

#[test]
fn an_object_deleted_before_it_finished_is_a_system_failure() {
    let mut running = pytorch_job(&[("Running", "", "")]);
    running["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z".into();
    let p = assert_phase(&pytorch_config(), running, Phase::RetryableFailure);
    assert!(p.is_system_failure(), "{p:?}");
    let fresh = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
    assert_phase(&pytorch_config(), fresh, Phase::RetryableFailure);
    // A finished object being deleted keeps its result.
    let mut done = pytorch_job(&[("Succeeded", "", "")]);
    done["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z".into();
    assert_phase(&pytorch_config(), done, Phase::Success);
}

#[test]
fn the_exported_trait_answers_like_the_functions() {
    let c = ctx(pipelinerun_config());
    let built = K8sResource::build_resource(c.clone()).unwrap();
    assert_eq!(built["spec"]["params"][0]["value"], "v1");
    let p = K8sResource::get_task_phase(c, pipelinerun("True", "Succeeded")).unwrap();
    assert_eq!(p.phase, Phase::Success);
}

#[test]
fn pod_specs_are_marked_for_artifacts_by_kind_or_as_the_task_says() {
    let mark = |config: Value| {
        let object = build(&ctx(config)).expect("built");
        object["metadata"]["annotations"][pods::POD_SPECS_ANNOTATION].clone()
    };
    // A PyTorchJob: its Master (which reports the outputs), then Worker.
    let mut config = pytorch_config();
    assert_eq!(
        mark(config.clone()),
        r#"["/spec/pytorchReplicaSpecs/Master/template/spec"]"#
    );
    config["manifest"]["spec"]["pytorchReplicaSpecs"]["Worker"] =
        config["manifest"]["spec"]["pytorchReplicaSpecs"]["Master"].clone();
    assert_eq!(
        mark(config.clone()),
        r#"["/spec/pytorchReplicaSpecs/Master/template/spec","/spec/pytorchReplicaSpecs/Worker/template/spec"]"#
    );
    // A Job: its template.
    let job = json!({"manifest": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}}},
        "successCondition": "object.status.succeeded > 0"});
    assert_eq!(mark(job.clone()), r#"["/spec/template/spec"]"#);
    // The task's own list wins; an empty one marks nothing; a kind of
    // unknown layout is not marked.
    let mut own = config.clone();
    own["podSpecs"] = json!(["/spec/pytorchReplicaSpecs/Worker/template/spec"]);
    assert_eq!(
        mark(own),
        r#"["/spec/pytorchReplicaSpecs/Worker/template/spec"]"#
    );
    let mut none = job.clone();
    none["podSpecs"] = json!([]);
    assert_eq!(mark(none), Value::Null);
    assert_eq!(mark(rayjob_config()), Value::Null);
    // A pointer at no pod spec is the task's mistake, named.
    let mut wrong = job;
    wrong["podSpecs"] = json!(["/spec/template"]);
    let message = permanent_error(build(&ctx(wrong)));
    assert_eq!(
        message,
        "podSpecs: /spec/template: not a pod spec (no containers)"
    );
}
