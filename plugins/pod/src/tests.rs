//! The pod plugin's logic, natively: building Pods, mapping observed Pods
//! to phases, and the fixture table of observed Pods that the host's test
//! also drives through the real component.

use super::*;
use serde_json::json;

fn ctx(config: Value, inputs: Value) -> TaskContext {
    TaskContext {
        workflow: "wf".into(),
        namespace: "team-a".into(),
        node_id: "train".into(),
        attempt: 0,
        task_type: "pod".into(),
        config,
        inputs,
        resource_name: "wf-train-0".into(),
        labels: [("weft.dev/workflow".to_string(), "wf".to_string())].into(),
        plugin_config: json!({
            "imagePullGracePeriod": "3m",
            "logLinkTemplate": "kubectl logs -n {namespace} {name} -c {container}",
        }),
    }
}

/// An observed Pod, built up the way the kubelet reports one.
struct PodBuilder(Value);

fn pod() -> PodBuilder {
    PodBuilder(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "wf-train-0", "namespace": "team-a", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "alpine:3"}]},
    }))
}

impl PodBuilder {
    fn phase(mut self, phase: &str) -> Self {
        self.0["status"]["phase"] = phase.into();
        self
    }
    fn reason(mut self, reason: &str, message: &str) -> Self {
        self.0["status"]["reason"] = reason.into();
        self.0["status"]["message"] = message.into();
        self
    }
    fn created(mut self, at: &str) -> Self {
        self.0["metadata"]["creationTimestamp"] = at.into();
        self
    }
    fn condition(mut self, kind: &str, status: &str, reason: &str, at: &str) -> Self {
        let c = json!({"type": kind, "status": status, "reason": reason, "message": format!("{reason}!"), "lastTransitionTime": at});
        match self.0["status"]["conditions"].as_array_mut() {
            Some(cs) => cs.push(c),
            None => self.0["status"]["conditions"] = json!([c]),
        }
        self
    }
    fn scheduled(self) -> Self {
        self.condition("PodScheduled", "True", "", "2020-01-01T00:00:01Z")
    }
    fn container(mut self, list: &str, name: &str, state: Value) -> Self {
        let s = json!({"name": name, "ready": false, "restartCount": 0, "image": "alpine:3", "state": state});
        match self.0["status"][list].as_array_mut() {
            Some(cs) => cs.push(s),
            None => self.0["status"][list] = json!([s]),
        }
        self
    }
    fn waiting(self, name: &str, reason: &str) -> Self {
        self.container(
            "containerStatuses",
            name,
            json!({"waiting": {"reason": reason, "message": format!("{reason} happened")}}),
        )
    }
    fn exited(self, name: &str, code: i64, reason: &str, message: &str) -> Self {
        self.container(
            "containerStatuses",
            name,
            json!({"terminated": {"exitCode": code, "reason": reason, "message": message}}),
        )
    }
    fn running(self, name: &str) -> Self {
        self.container(
            "containerStatuses",
            name,
            json!({"running": {"startedAt": "2020-01-01T00:00:05Z"}}),
        )
    }
    fn sidecar(mut self, name: &str) -> Self {
        self.0["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": name, "image": "envoy"}));
        self
    }
    fn map(self) -> PhaseInfo {
        pod_phase(&ctx(json!({}), json!({})), &self.0)
    }
}

fn assert_phase(info: &PhaseInfo, phase: Phase, reason: Option<&str>) {
    assert_eq!(info.phase, phase, "{info:?}");
    assert_eq!(info.reason.as_deref(), reason, "{info:?}");
}

use weft_plugin_sdk::Phase;

// --- build-resource -------------------------------------------------------

#[test]
fn a_container_becomes_a_pod_with_inputs_as_env_and_args() {
    let pod = build_pod(&ctx(
        json!({"container": {"image": "alpine:3", "command": ["sh", "-c"], "args": ["echo {{inputs.who}} {{ inputs.n }} {{inputs.missing}}"], "env": {"MODE": "fast"}}}),
        json!({"who": "world", "n": 3, "the-list": [1, 2]}),
    ))
    .unwrap();
    assert_eq!(pod["apiVersion"], "v1");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], "wf-train-0");
    assert_eq!(pod["metadata"]["namespace"], "team-a");
    assert_eq!(pod["metadata"]["labels"]["weft.dev/workflow"], "wf");
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["name"], "main");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(
        c["args"][0], "echo world 3 {{inputs.missing}}",
        "unknown inputs stay as written"
    );
    let env = c["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "MODE", "value": "fast"})));
    assert!(env.contains(&json!({"name": "WEFT_INPUT_WHO", "value": "world"})));
    assert!(env.contains(&json!({"name": "WEFT_INPUT_N", "value": "3"})));
    assert!(env.contains(&json!({"name": "WEFT_INPUT_THE_LIST", "value": "[1,2]"})));
}

#[test]
fn shorthand_and_pod_spec_are_accepted() {
    let pod = build_pod(&ctx(
        json!({"image": "alpine:3", "command": ["true"], "annotations": {"a": "b"}}),
        json!({}),
    ))
    .unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "alpine:3");
    assert_eq!(pod["spec"]["containers"][0]["name"], "main");
    assert_eq!(pod["metadata"]["annotations"]["a"], "b");
    let pod = build_pod(&ctx(
        json!({"podSpec": {"containers": [{"name": "app", "image": "a"}, {"image": "b"}], "restartPolicy": "Always"}}),
        json!({"x": "y"}),
    ))
    .unwrap();
    assert_eq!(
        pod["spec"]["restartPolicy"], "Never",
        "tasks never restart in place"
    );
    assert_eq!(pod["spec"]["containers"][0]["name"], "app");
    assert_eq!(pod["spec"]["containers"][1]["name"], "c1");
    assert_eq!(
        pod["spec"]["containers"][1]["env"][0]["name"],
        "WEFT_INPUT_X"
    );
}

#[test]
fn bad_configs_are_permanent_errors_that_say_why() {
    for (config, needle) in [
        (json!({"container": {"command": ["x"]}}), "needs an image"),
        (
            json!({"podSpec": {"containers": []}}),
            "at least one container",
        ),
        (json!({"podSpec": 1}), "podSpec must be an object"),
        (json!({"container": 3}), "container must be an object"),
        (
            json!({"image": "a", "env": 3}),
            "env must be a list or a map",
        ),
        (json!([1]), "must be an object"),
    ] {
        let e = build_pod(&ctx(config, json!({}))).unwrap_err();
        assert!(!e.retryable);
        assert!(e.message.contains(needle), "{e}");
    }
}

#[test]
fn env_names_are_upper_case_and_safe() {
    assert_eq!(env_name("rows"), "WEFT_INPUT_ROWS");
    assert_eq!(env_name("my-input.v2"), "WEFT_INPUT_MY_INPUT_V2");
}

#[test]
fn properties_delete_on_abort_and_keep_finished_pods() {
    let p = Pod::properties();
    assert_eq!(p.abort, AbortBehaviour::Delete);
    assert!(!p.delete_on_finish);
}

// --- get-task-phase -------------------------------------------------------

#[test]
fn anything_without_a_status_is_queued() {
    assert_phase(&pod().map(), Phase::Queued, None);
    let info = pod_phase(&ctx(json!({}), json!({})), &json!("not even an object"));
    assert_phase(&info, Phase::Queued, None);
}

#[test]
fn unschedulable_waits_for_resources_with_the_schedulers_words() {
    let info = pod()
        .phase("Pending")
        .condition(
            "PodScheduled",
            "False",
            "Unschedulable",
            "2020-01-01T00:00:01Z",
        )
        .map();
    assert_phase(&info, Phase::WaitingForResources, Some("Unschedulable"));
    assert_eq!(info.message.as_deref(), Some("Unschedulable!"));
}

#[test]
fn scheduled_and_creating_is_initializing_with_a_log_link() {
    let info = pod()
        .phase("Pending")
        .scheduled()
        .waiting("main", "ContainerCreating")
        .map();
    assert_phase(&info, Phase::Initializing, None);
    assert_eq!(
        info.log_links[0].uri,
        "kubectl logs -n team-a wf-train-0 -c main"
    );
}

#[test]
fn image_pull_trouble_is_initializing_within_the_grace_period() {
    let info = pod()
        .created("2999-01-01T00:00:00Z")
        .phase("Pending")
        .scheduled()
        .waiting("main", "ErrImagePull")
        .map();
    assert_phase(&info, Phase::Initializing, Some("ErrImagePull"));
    assert!(info.message.unwrap().contains("container main"));
}

#[test]
fn image_pull_trouble_past_the_grace_period_is_permanent() {
    let info = pod()
        .phase("Pending")
        .scheduled()
        .waiting("main", "ImagePullBackOff")
        .map();
    assert_phase(&info, Phase::PermanentFailure, Some("ImagePullBackOff"));
    assert!(info
        .message
        .unwrap()
        .contains("180s image pull grace period"));
}

#[test]
fn the_grace_period_counts_from_scheduling_not_creation() {
    // Created long ago but scheduled "now" (in 2999): still within grace.
    let info = pod()
        .phase("Pending")
        .condition("PodScheduled", "True", "", "2999-01-01T00:00:00Z")
        .waiting("main", "ImagePullBackOff")
        .map();
    assert_phase(&info, Phase::Initializing, Some("ImagePullBackOff"));
}

#[test]
fn bad_specs_are_permanent() {
    for reason in [
        "CreateContainerConfigError",
        "InvalidImageName",
        "CreateContainerError",
    ] {
        let info = pod()
            .phase("Pending")
            .scheduled()
            .waiting("main", reason)
            .map();
        assert_phase(&info, Phase::PermanentFailure, Some(reason));
    }
}

#[test]
fn running_is_running() {
    let info = pod().phase("Running").scheduled().running("main").map();
    assert_phase(&info, Phase::Running, None);
    assert_eq!(info.log_links.len(), 1);
}

#[test]
fn success_returns_the_termination_message_as_outputs() {
    let info = pod()
        .phase("Succeeded")
        .exited("main", 0, "Completed", "{\"rows\": 42}\n")
        .map();
    assert_phase(&info, Phase::Success, None);
    assert_eq!(info.outputs, json!({"rows": 42}).as_object().cloned());
}

#[test]
fn success_with_plain_text_has_no_outputs_but_says_it() {
    let info = pod()
        .phase("Succeeded")
        .exited("main", 0, "Completed", "done")
        .map();
    assert_phase(&info, Phase::Success, None);
    assert_eq!(info.outputs, None);
    assert_eq!(info.message.as_deref(), Some("done"));
}

#[test]
fn success_with_broken_json_outputs_is_permanent() {
    for message in ["{\"rows\": 4", "{} trailing"] {
        let info = pod()
            .phase("Succeeded")
            .exited("main", 0, "Completed", message)
            .map();
        assert_phase(&info, Phase::PermanentFailure, Some("InvalidOutputs"));
    }
}

#[test]
fn a_non_zero_exit_is_retryable_with_code_and_reason() {
    let info = pod()
        .phase("Failed")
        .exited("main", 3, "Error", "boom")
        .map();
    assert_phase(&info, Phase::RetryableFailure, Some("Error"));
    assert_eq!(
        info.message.as_deref(),
        Some("container main exited with code 3 (Error): boom")
    );
}

#[test]
fn oom_killed_is_retryable_as_oom_killed() {
    let info = pod()
        .phase("Failed")
        .exited("main", 137, "OOMKilled", "")
        .map();
    assert_phase(&info, Phase::RetryableFailure, Some("OOMKilled"));
    assert!(info.message.unwrap().contains("137"));
}

#[test]
fn the_main_container_decides_before_sidecars() {
    let info = pod()
        .sidecar("proxy")
        .phase("Failed")
        .exited("proxy", 1, "Error", "")
        .exited("main", 2, "Error", "")
        .map();
    assert!(info
        .message
        .unwrap()
        .contains("container main exited with code 2"));
    // The main container is done while the sidecar still runs.
    let info = pod()
        .sidecar("proxy")
        .phase("Running")
        .running("proxy")
        .exited("main", 0, "Completed", "{\"ok\": true}")
        .map();
    assert_phase(&info, Phase::Success, None);
    assert_eq!(info.outputs, json!({"ok": true}).as_object().cloned());
    let info = pod()
        .sidecar("proxy")
        .phase("Running")
        .running("proxy")
        .exited("main", 1, "Error", "")
        .map();
    assert_phase(&info, Phase::RetryableFailure, Some("Error"));
}

#[test]
fn a_failed_init_container_is_named() {
    let info = pod()
        .phase("Pending")
        .scheduled()
        .container(
            "initContainerStatuses",
            "fetch",
            json!({"terminated": {"exitCode": 1, "reason": "Error"}}),
        )
        .map();
    assert_phase(&info, Phase::RetryableFailure, Some("InitContainerFailed"));
    assert!(info.message.unwrap().contains("init container fetch"));
}

#[test]
fn a_failed_init_container_says_what_it_said() {
    let info = pod()
        .phase("Pending")
        .scheduled()
        .container(
            "initContainerStatuses",
            "weft-io",
            json!({"terminated": {"exitCode": 65, "reason": "Error",
                "message": "input artifact data: download refused by the store: HTTP 404"}}),
        )
        .map();
    assert_eq!(
        info.message.as_deref(),
        Some("init container weft-io exited with code 65 (Error): input artifact data: download refused by the store: HTTP 404")
    );
}

#[test]
fn platform_failures_are_system_failures() {
    for (reason, expect) in [
        ("Evicted", "System:Evicted"),
        ("Preempting", "System:Preempting"),
        ("NodeLost", "System:NodeLost"),
        ("Terminated", "System:NodeShutdown"),
        ("Shutdown", "System:NodeShutdown"),
    ] {
        let info = pod().phase("Failed").reason(reason, "").map();
        assert_phase(&info, Phase::RetryableFailure, Some(expect));
    }
    let info = pod()
        .phase("Failed")
        .condition(
            "DisruptionTarget",
            "True",
            "DeletionByTaintManager",
            "2020-01-01T00:01:00Z",
        )
        .exited("main", 143, "Error", "")
        .map();
    assert_phase(
        &info,
        Phase::RetryableFailure,
        Some("System:DeletionByTaintManager"),
    );
    let info = pod().phase("Unknown").map();
    assert_phase(&info, Phase::RetryableFailure, Some("System:NodeLost"));
}

#[test]
fn deadline_exceeded_is_the_tasks_own_permanent_failure() {
    let info = pod()
        .phase("Failed")
        .reason(
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
        .map();
    assert_phase(&info, Phase::PermanentFailure, Some("DeadlineExceeded"));
}

#[test]
fn a_pod_deleted_before_it_finished_is_a_system_failure() {
    let mut p = pod().phase("Running").running("main");
    p.0["metadata"]["deletionTimestamp"] = "2020-01-01T00:02:00Z".into();
    assert_phase(&p.map(), Phase::RetryableFailure, Some("System:PodDeleted"));
    // Once finished, deleting it changes nothing.
    let mut p = pod().phase("Succeeded").exited("main", 0, "Completed", "");
    p.0["metadata"]["deletionTimestamp"] = "2020-01-01T00:02:00Z".into();
    assert_phase(&p.map(), Phase::Success, None);
}

#[test]
fn without_a_template_there_is_no_log_link() {
    let mut c = ctx(json!({}), json!({}));
    c.plugin_config = json!({});
    let info = pod_phase(&c, &pod().phase("Running").0);
    assert!(info.log_links.is_empty());
}

#[test]
fn timestamps_and_durations_parse() {
    assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:01Z"), Some(1000));
    assert_eq!(
        parse_rfc3339_millis("2024-02-29T12:00:00Z"),
        Some(1_709_208_000_000)
    );
    assert_eq!(
        parse_rfc3339_millis("2024-02-29T12:00:00.123456Z"),
        Some(1_709_208_000_000)
    );
    assert_eq!(parse_rfc3339_millis("yesterday"), None);
    assert_eq!(parse_duration_millis("3m"), Some(180_000));
    assert_eq!(parse_duration_millis("1m30s"), Some(90_000));
    assert_eq!(parse_duration_millis("250ms"), Some(250));
    assert_eq!(parse_duration_millis("3 parsecs"), None);
    assert_eq!(parse_duration_millis(""), None);
}

/// `tests/fixtures/pods/*.json` at the repository root: one observed Pod
/// per file with the phase the plugin must make of it. The host's
/// `pod_plugin` test runs the same table through the component.
#[test]
fn the_fixture_table() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/pods");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let info = pod_phase(&ctx(json!({}), json!({})), &case["observed"]);
        let got = serde_json::to_value(&info).unwrap();
        let expect = &case["expect"];
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(got["phase"], expect["phase"], "{name}: {got}");
        assert_eq!(got["reason"], expect["reason"], "{name}: {got}");
        assert_eq!(got["outputs"], expect["outputs"], "{name}: {got}");
        if let Some(s) = expect["messageContains"].as_str() {
            assert!(
                got["message"].as_str().unwrap_or_default().contains(s),
                "{name}: {got}"
            );
        }
        if !matches!(
            expect["phase"].as_str(),
            Some("queued" | "waiting-for-resources")
        ) {
            assert!(!info.log_links.is_empty(), "{name}: no log link");
        }
        n += 1;
    }
    assert!(n >= 14, "only {n} fixtures");
}
