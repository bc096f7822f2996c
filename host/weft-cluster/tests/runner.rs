//! The local runner (kubelet role), observed the way a controller observes
//! a real kubelet: through the pod's status, its events and its logs.

mod common;

use common::*;
use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use serde_json::json;

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

async fn finished(pods: &Api<Pod>, name: &str) -> Pod {
    eventually(&format!("pod {name} to finish"), || async {
        let p = pods.get(name).await.ok()?;
        let phase = p.status.as_ref()?.phase.clone()?;
        (phase == "Succeeded" || phase == "Failed").then_some(p)
    })
    .await
}

fn terminated(p: &Pod) -> k8s_openapi::api::core::v1::ContainerStateTerminated {
    p.status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .expect("terminated")
}

#[tokio::test]
async fn exit_codes_termination_messages_and_events() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams::default();
    pods.create(&pp, &pod(json!({"metadata": {"name": "ok"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "alpine:3", "command": ["sh", "-c", "printf '{\"rows\": 42}' > /dev/termination-log"]}]}})))
        .await
        .unwrap();
    pods.create(
        &pp,
        &pod(
            json!({"metadata": {"name": "bad"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "alpine:3", "command": ["sh", "-c", "echo boom >&2; exit 3"],
         "terminationMessagePolicy": "FallbackToLogsOnError"}]}}),
        ),
    )
    .await
    .unwrap();
    pods.create(&pp, &pod(json!({"metadata": {"name": "missing"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "alpine:3", "command": ["/no/such/binary"]}]}})))
        .await
        .unwrap();

    let ok = finished(&pods, "ok").await;
    assert_eq!(
        ok.status.as_ref().unwrap().phase.as_deref(),
        Some("Succeeded")
    );
    let term = terminated(&ok);
    assert_eq!(term.exit_code, 0);
    assert_eq!(term.message.as_deref(), Some("{\"rows\": 42}"));
    assert_eq!(
        ok.spec.as_ref().unwrap().node_name.as_deref(),
        Some("weft-dev")
    );

    let bad = finished(&pods, "bad").await;
    assert_eq!(
        bad.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );
    let term = terminated(&bad);
    assert_eq!(term.exit_code, 3);
    assert_eq!(term.reason.as_deref(), Some("Error"));
    assert_eq!(
        term.message.as_deref(),
        Some("boom"),
        "falls back to the log on error"
    );

    let missing = finished(&pods, "missing").await;
    assert_eq!(
        missing.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );

    let events: Api<Event> = Api::namespaced(t.client.clone(), "default");
    let evs = events
        .list(&ListParams::default().fields("involvedObject.name=ok"))
        .await
        .unwrap();
    assert!(
        evs.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ImageNotPulled")
                && e.message.as_deref().unwrap_or("").contains("not pulled")),
        "an event says the image was not pulled"
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn logs_whole_and_followed() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "talk"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "command": ["sh", "-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"]}]}})))
        .await
        .unwrap();
    let stream = eventually("log available", || async {
        pods.log_stream(
            "talk",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .ok()
    })
    .await;
    let lines: Vec<String> = stream.lines().try_collect().await.unwrap();
    assert_eq!(
        lines,
        ["line 1", "line 2", "line 3", "line 4", "line 5"],
        "follow ends when the container does"
    );
    finished(&pods, "talk").await;
    let all = pods.logs("talk", &LogParams::default()).await.unwrap();
    assert_eq!(all.lines().count(), 5);
    let last = pods
        .logs(
            "talk",
            &LogParams {
                tail_lines: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(last, "line 4\nline 5\n");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn on_failure_restarts_until_success() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    // Fails twice, then succeeds; $HOME is the pod's directory and survives restarts.
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "flaky"}, "spec": {"restartPolicy": "OnFailure", "containers": [
        {"name": "c", "image": "alpine:3", "command": ["sh", "-c",
         "n=$(cat $HOME/n 2>/dev/null || echo 0); echo $((n+1)) > $HOME/n; echo attempt $n; [ $n -ge 2 ]"]}]}})))
        .await
        .unwrap();
    let p = finished(&pods, "flaky").await;
    let st = &p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        p.status.as_ref().unwrap().phase.as_deref(),
        Some("Succeeded")
    );
    assert_eq!(st.restart_count, 2);
    assert_eq!(
        st.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    let logs = pods.logs("flaky", &LogParams::default()).await.unwrap();
    assert_eq!(logs.trim(), "attempt 2");
    let prev = pods
        .logs(
            "flaky",
            &LogParams {
                previous: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(prev.trim(), "attempt 1");

    // Never: one failure is final.
    pods.create(
        &PostParams::default(),
        &pod(
            json!({"metadata": {"name": "once"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "alpine:3", "command": ["false"]}]}}),
        ),
    )
    .await
    .unwrap();
    let p = finished(&pods, "once").await;
    assert_eq!(
        p.status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count,
        0
    );
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn active_deadline_kills_the_pod() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "slow"}, "spec": {
        "restartPolicy": "Never", "activeDeadlineSeconds": 1, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "alpine:3", "command": ["sleep", "300"]}]}})),
    )
    .await
    .unwrap();
    let p = finished(&pods, "slow").await;
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    let term = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(term.exit_code, 128 + 15, "stopped by SIGTERM");
    t.cluster.shutdown().await;
}

fn pid_alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

async fn running_pid(pods: &Api<Pod>, name: &str) -> i32 {
    eventually("container running", || async {
        let p = pods.get(name).await.ok()?;
        let st = p.status?.container_statuses?.into_iter().next()?;
        st.state?.running?;
        st.container_id?.strip_prefix("weft://")?.parse().ok()
    })
    .await
}

#[tokio::test]
async fn deletion_sends_sigterm_then_sigkill() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams::default();
    // Exits on SIGTERM.
    pods.create(&pp, &pod(json!({"metadata": {"name": "polite"}, "spec": {"containers": [
        {"name": "c", "image": "alpine:3", "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}]}})))
        .await
        .unwrap();
    // Ignores SIGTERM: needs the SIGKILL after the grace period.
    pods.create(&pp, &pod(json!({"metadata": {"name": "stubborn"}, "spec": {"terminationGracePeriodSeconds": 1, "containers": [
        {"name": "c", "image": "alpine:3", "command": ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]}]}})))
        .await
        .unwrap();
    let polite = running_pid(&pods, "polite").await;
    let stubborn = running_pid(&pods, "stubborn").await;
    assert!(pid_alive(polite) && pid_alive(stubborn));

    pods.delete("polite", &DeleteParams::default())
        .await
        .unwrap();
    pods.delete("stubborn", &DeleteParams::default())
        .await
        .unwrap();
    // Graceful: the pod is still there, marked for deletion, until the runner stops it.
    for name in ["polite", "stubborn"] {
        eventually("pod gone", || async {
            pods.get_opt(name).await.unwrap().is_none().then_some(())
        })
        .await;
    }
    eventually("processes gone", || async {
        (!pid_alive(polite) && !pid_alive(stubborn)).then_some(())
    })
    .await;
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn env_from_configmap_secret_and_downward_api() {
    let t = start_with(with_runner).await;
    let ns = "default";
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"MODE": "fast", "LEVEL": "3"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), ns);
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "envy", "labels": {"team": "weft"}}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "alpine:3",
            "command": ["sh", "-c", "echo $MODE $CFG_LEVEL $TOKEN $POD $TEAM $GREETING; pwd"],
            "workingDir": "/tmp",
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "MODE"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
                {"name": "GREETING", "value": "hi-$(POD)"}]}]}})))
        .await
        .unwrap();
    finished(&pods, "envy").await;
    let out = pods.logs("envy", &LogParams::default()).await.unwrap();
    assert_eq!(out, "fast 3 s3cret envy weft hi-envy\n/tmp\n");

    // Secret and ConfigMap volumes hold their keys as files (items rename).
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "files"}, "spec": {
        "restartPolicy": "Never",
        "volumes": [{"name": "creds", "secret": {"secretName": "creds"}},
                    {"name": "cfg", "configMap": {"name": "settings", "items": [{"key": "MODE", "path": "sub/mode"}]}}],
        "containers": [{"name": "c", "image": "alpine:3",
            "command": ["sh", "-c", "cat /etc/creds/token; echo; cat /etc/cfg/sub/mode; ls /etc/cfg"],
            "volumeMounts": [{"name": "creds", "mountPath": "/etc/creds", "readOnly": true},
                             {"name": "cfg", "mountPath": "/etc/cfg"}]}]}})))
        .await
        .unwrap();
    finished(&pods, "files").await;
    let out = pods.logs("files", &LogParams::default()).await.unwrap();
    assert_eq!(out, "s3cret\nfastsub\n");

    // A missing ConfigMap holds the container in CreateContainerConfigError.
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "lost"}, "spec": {"containers": [
        {"name": "c", "image": "alpine:3", "command": ["true"],
         "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "x"}}}]}]}})))
        .await
        .unwrap();
    let reason = eventually("config error", || async {
        let p = pods.get("lost").await.ok()?;
        p.status?.container_statuses?[0]
            .state
            .clone()?
            .waiting?
            .reason
    })
    .await;
    assert_eq!(reason, "CreateContainerConfigError");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn init_containers_share_empty_dir_volumes() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "staged"}, "spec": {
        "restartPolicy": "Never",
        "volumes": [{"name": "work", "emptyDir": {}}],
        "initContainers": [{"name": "fetch", "image": "alpine:3", "command": ["sh", "-c", "echo fetched > /work/data"],
                            "volumeMounts": [{"name": "work", "mountPath": "/work"}]}],
        "containers": [{"name": "use", "image": "alpine:3", "command": ["cat", "/data/data"],
                        "volumeMounts": [{"name": "work", "mountPath": "/data"}]}]}})))
        .await
        .unwrap();
    let p = finished(&pods, "staged").await;
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(
        status.init_container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap()
            .exit_code,
        0
    );
    let out = pods
        .logs(
            "staged",
            &LogParams {
                container: Some("use".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out, "fetched\n");
    t.cluster.shutdown().await;
}

#[tokio::test]
async fn simulated_pods_complete_without_a_process() {
    let t = start_with(with_runner).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "sim", "annotations": {
            "weft.dev/simulate": "true", "weft.dev/simulate-duration": "200ms",
            "weft.dev/simulate-exit-code": "4", "weft.dev/simulate-termination-message": "simulated"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "does-not-exist:1", "command": ["/nope"]}]}})))
        .await
        .unwrap();
    let p = finished(&pods, "sim").await;
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Failed"));
    let term = terminated(&p);
    assert_eq!(term.exit_code, 4);
    assert_eq!(term.message.as_deref(), Some("simulated"));
    assert!(p.name_any() == "sim");
    t.cluster.shutdown().await;
}
