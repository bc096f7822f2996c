//! The controller end to end: the embedded dev cluster over HTTP, the real
//! pod plugin component, real local processes.

mod common;

use std::time::Duration;

use common::{Env, node};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use weft_dag::{NodePhase, WorkflowPhase};

fn sh(cmd: &str) -> String {
    format!(
        "{{type: pod, config: {{image: busybox, command: [sh, -c, {:?}]}}}}",
        cmd
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_is_never_exceeded() {
    let env = Env::start().await;
    let nodes: String = (0..6)
        .map(|i| format!("  - {{id: n{i}, task: {}}}\n", sh("sleep 0.4")))
        .collect();
    env.submit("par", &format!("parallelism: 2\nnodes:\n{nodes}"))
        .await;
    // Sample the running pods while the workflow runs.
    let mut max_running = 0;
    loop {
        let pods = env.pods_of("par").await;
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        max_running = max_running.max(running);
        let wf = env.workflows().get("par").await.unwrap();
        if wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
            assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Succeeded);
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(
        max_running <= 2,
        "{max_running} pods ran at once with parallelism 2"
    );
    assert_eq!(
        max_running, 2,
        "the limit was never reached: the nodes ran one by one"
    );
    assert_eq!(
        env.pods_of("par").await.len(),
        6,
        "one pod per node, no duplicates"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_is_a_system_failure_retried_on_the_system_budget() {
    let env = Env::start().await;
    env.submit(
        "evict",
        &format!("nodes:\n  - {{id: work, retries: {{limit: 0, systemLimit: 1, backoff: 1s}}, task: {}}}\n", sh("sleep 1")),
    )
    .await;
    // Wait until the first attempt's pod runs (as the pod shows it: the
    // node's sub-phase is a minor change its status may show up to a
    // second later), then take it away (as a node loss would).
    for _ in 0..300 {
        let pod = env.pods().get_opt("evict-work-0").await.unwrap();
        let phase = pod.and_then(|p| p.status).and_then(|s| s.phase);
        if phase.as_deref() == Some("Running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.pods()
        .delete("evict-work-0", &DeleteParams::default())
        .await
        .unwrap();
    let wf = env.finish("evict", 60).await;
    let work = node(&wf, "work");
    assert_eq!(
        wf.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{:?}",
        wf.status
    );
    assert_eq!(
        (work.system_failures, work.user_failures),
        (1, 0),
        "{work:?}"
    );
    assert!(
        env.pods_of("evict")
            .await
            .iter()
            .any(|p| p.name_any() == "evict-work-1")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_failures_use_their_own_budget() {
    let env = Env::start().await;
    env.submit(
        "fails",
        &format!(
            "nodes:\n  - {{id: f, retries: {{limit: 1, backoff: 1s}}, task: {}}}\n",
            sh("exit 4")
        ),
    )
    .await;
    let wf = env.finish("fails", 60).await;
    let f = node(&wf, "f");
    assert_eq!(f.phase, NodePhase::Failed);
    assert_eq!(
        (f.attempts, f.user_failures, f.system_failures),
        (2, 2, 0),
        "{f:?}"
    );
    assert!(
        f.message.as_deref().unwrap().contains("exited with code 4"),
        "{f:?}"
    );
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(env.client.clone(), &env.ns);
    // Events follow the status write that ends the round: poll briefly.
    let mut reasons: Vec<String> = Vec::new();
    for _ in 0..50 {
        reasons = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("fails"))
            .filter_map(|e| e.reason)
            .collect();
        if reasons.iter().any(|r| r == "NodeFailed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reasons.iter().any(|r| r == "NodeRetrying"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "NodeFailed"), "{reasons:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_timeout_and_workflow_deadline_stop_running_pods() {
    let env = Env::start().await;
    env.submit(
        "timeout",
        &format!(
            "nodes:\n  - {{id: slow, timeout: 1s, task: {}}}\n",
            sh("sleep 60")
        ),
    )
    .await;
    env.submit(
        "deadline",
        &format!(
            "activeDeadline: 2s\nnodes:\n  - {{id: slow, task: {}}}\n",
            sh("sleep 60")
        ),
    )
    .await;
    let wf = env.finish("timeout", 60).await;
    let slow = node(&wf, "slow");
    assert_eq!(slow.phase, NodePhase::Failed);
    assert_eq!(slow.reason.as_deref(), Some("TimedOut"), "{slow:?}");
    let wf = env.finish("deadline", 60).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    assert!(
        wf.status
            .as_ref()
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("active deadline")
    );
    assert_eq!(node(&wf, "slow").phase, NodePhase::Aborted);
    // Both pods are deleted (aborted), not left running for a minute.
    for name in ["timeout-slow-0", "deadline-slow-0"] {
        let mut gone = false;
        for _ in 0..100 {
            if env.pods().get_opt(name).await.unwrap().is_none() {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "{name} was not stopped");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_after_executable_nodes_complete_runs_the_independent_branch() {
    let env = Env::start().await;
    env.submit(
        "after",
        &format!(
            "failurePolicy: FailAfterExecutableNodesComplete\nnodes:\n  - {{id: bad, task: {}}}\n  - {{id: down, dependsOn: [bad], task: {}}}\n  - {{id: other, task: {}}}\n  - {{id: other2, dependsOn: [other], task: {}}}\n",
            sh("exit 1"),
            sh("true"),
            sh("sleep 0.5"),
            sh("true")
        ),
    )
    .await;
    let wf = env.finish("after", 60).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    assert_eq!(node(&wf, "other2").phase, NodePhase::Succeeded);
    assert_eq!(node(&wf, "down").phase, NodePhase::Skipped);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_gate_waits_for_the_annotation() {
    let env = Env::start().await;
    env.submit(
        "approve",
        &format!("nodes:\n  - {{id: ok, gate: {{approval: {{message: ship it?}}}}}}\n  - {{id: ship, dependsOn: [ok], task: {}}}\n", sh("true")),
    )
    .await;
    let wf = env
        .wait_for("approve", 30, |wf| {
            wf.status
                .as_ref()
                .and_then(|s| s.nodes.get("ok"))
                .is_some_and(|n| n.task_phase.as_deref() == Some("waiting-for-approval"))
        })
        .await;
    assert_eq!(node(&wf, "ok").message.as_deref(), Some("ship it?"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        env.pods_of("approve").await.is_empty(),
        "nothing runs before the approval"
    );
    let patch = serde_json::json!({"metadata": {"annotations": {"approve.weft.dev/ok": "true"}}});
    env.workflows()
        .patch("approve", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let wf = env.finish("approve", 30).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_delete_stop_and_clean_up_children() {
    let env = Env::start().await;
    let spec = format!(
        "nodes:\n  - {{id: long, task: {}}}\n  - {{id: next, dependsOn: [long], task: {}}}\n",
        sh("sleep 60"),
        sh("true")
    );
    env.submit("aborted", &spec).await;
    env.submit("deleted", &spec).await;
    for name in ["aborted", "deleted"] {
        env.wait_for(name, 30, |wf| {
            wf.status
                .as_ref()
                .and_then(|s| s.nodes.get("long"))
                .is_some_and(|n| n.task_phase.as_deref() == Some("running"))
        })
        .await;
    }
    let patch = serde_json::json!({"spec": {"abort": true}});
    env.workflows()
        .patch("aborted", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let wf = env.finish("aborted", 30).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Aborted);
    assert_eq!(node(&wf, "long").phase, NodePhase::Aborted);
    assert_eq!(node(&wf, "next").phase, NodePhase::Skipped);

    env.workflows()
        .delete("deleted", &DeleteParams::default())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..200 {
        let wf_gone = env.workflows().get_opt("deleted").await.unwrap().is_none();
        let pods: Vec<Pod> = env.pods_of("deleted").await;
        let aborted_pods: Vec<Pod> = env.pods_of("aborted").await;
        if wf_gone && pods.is_empty() && aborted_pods.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gone,
        "the deleted workflow or the children of either were left behind"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_workflow_fails_with_every_problem_and_creates_nothing() {
    let env = Env::start().await;
    env.submit(
        "invalid",
        &format!(
            "nodes:\n  - {{id: a, dependsOn: [c], task: {}}}\n  - {{id: b, dependsOn: [a], task: {{type: no-such-type}}}}\n  - {{id: c, dependsOn: [b], when: '1 +', task: {}}}\n",
            sh("true"),
            sh("true")
        ),
    )
    .await;
    let wf = env.finish("invalid", 30).await;
    let status = wf.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let msg = status.message.unwrap();
    assert!(msg.contains("cycle: "), "{msg}");
    assert!(
        msg.contains("node b: task.type: no plugin serves task type \"no-such-type\""),
        "{msg}"
    );
    assert!(msg.contains("node c: when: invalid CEL"), "{msg}");
    assert!(env.pods_of("invalid").await.is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_get_and_metrics_show_what_happened() {
    let env = Env::start().await;
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(env.client.clone(), &env.ns);
    let reasons_of = |name: &'static str| {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap().items;
            list.iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .filter_map(|e| e.reason.clone())
                .collect::<Vec<String>>()
        }
    };
    // By default a healthy workflow's success is no Event (an API write
    // an operator does not need); a failure is.
    env.submit(
        "quiet",
        &format!("nodes:\n  - {{id: a, task: {}}}\n", sh("true")),
    )
    .await;
    env.submit(
        "loud",
        &format!("nodes:\n  - {{id: a, task: {}}}\n", sh("exit 3")),
    )
    .await;
    env.finish("quiet", 30).await;
    env.finish("loud", 30).await;
    let mut failed = Vec::new();
    for _ in 0..50 {
        failed = reasons_of("loud").await;
        if failed.iter().any(|r| r == "WorkflowFailed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(failed.iter().any(|r| r == "WorkflowFailed"), "{failed:?}");
    assert_eq!(reasons_of("quiet").await, Vec::<String>::new());

    // `--workflow-events all`: its success too.
    env.ctx
        .set_workflow_events(weft::controller::WorkflowEvents::All);
    env.submit(
        "seen",
        &format!(
            "nodes:\n  - {{id: a, task: {}}}\n  - {{id: b, dependsOn: [a], task: {}}}\n",
            sh("true"),
            sh("true")
        ),
    )
    .await;
    env.finish("seen", 30).await;

    // The Event follows the status write that ended the workflow.
    let mut reasons: Vec<String> = Vec::new();
    for _ in 0..50 {
        reasons = reasons_of("seen").await;
        if reasons.iter().any(|r| r == "WorkflowSucceeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        reasons.iter().any(|r| r == "WorkflowSucceeded"),
        "{reasons:?}"
    );

    // `weft get -o mermaid|dot` against the cluster, in the kubeconfig
    // context's namespace.
    let kc = env.dir.path().join("kubeconfig");
    for (format, needle) in [("mermaid", "n0 --> n1"), ("dot", "\"a\" -> \"b\"")] {
        let out = common::weft(&kc, &["get", "seen", "-o", format]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(needle) && text.contains("Succeeded"),
            "{text}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_probes_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let metrics = std::sync::Arc::new(weft::controller::metrics::Metrics::default());
    metrics.plugin_call("pod", "build-resource", Duration::from_micros(40));
    metrics.transition("Pending", "Running");
    let ready = std::sync::Arc::new(weft::serve::Readiness::default());
    let addr = weft::serve::serve("127.0.0.1:0".parse().unwrap(), metrics, ready.clone())
        .await
        .unwrap();
    let get = |path: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
    assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
    ready.set_ready();
    assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
    let m = get("/metrics").await;
    assert!(
        m.contains(
            "weft_plugin_call_duration_seconds_count{plugin=\"pod\",call=\"build-resource\"} 1"
        ),
        "{m}"
    );
    assert!(
        m.contains("weft_node_transitions_total{from=\"Pending\",to=\"Running\"} 1"),
        "{m}"
    );
    assert!(m.contains("weft_round_latency_seconds"), "{m}");
}

/// A Workflow the controller cannot decode (here `parallelism: "lots"`) is
/// reported once — a Warning Event on it, a metric, one log line — and
/// skipped, while the next Workflow runs. The API server refuses such an
/// object through the CRD's schema, so it gets in the way a real one can:
/// stored under an older, looser CRD, then the CRD is updated (stored
/// objects are not validated again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_workflow_is_reported_once_and_never_stalls_the_rest() {
    let (_dir, _cluster, kubeconfig, client) = common::dev_cluster().await;
    let bad = "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {name: lots}\nspec:\n  parallelism: lots\n  nodes:\n    - {id: a, task: {type: pod, config: {image: busybox, command: [\"true\"]}}}\n";
    let refused = common::kubectl(&kubeconfig, &["create", "-f", "-"], Some(bad)).await;
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("spec.parallelism"),
        "{err}"
    );
    let mut loose =
        serde_json::to_value(<weft::api::Workflow as kube::CustomResourceExt>::crd()).unwrap();
    loose["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let out = common::kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&loose.to_string())).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::kubectl(&kubeconfig, &["create", "-f", "-"], Some(bad)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    weft::runtime::install_crd(&client).await.unwrap();
    let controller = common::ControllerProcess::start(&kubeconfig, "undecodable", &[]);
    controller.metrics().await;
    let good = bad
        .replace("name: lots", "name: fine")
        .replace("  parallelism: lots\n", "");
    let out = common::kubectl(&kubeconfig, &["create", "-f", "-"], Some(&good)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let workflows: kube::Api<weft::api::Workflow> =
        kube::Api::namespaced(client.clone(), "default");
    let mut phase = None;
    for _ in 0..600 {
        phase = workflows.get("fine").await.unwrap().status.map(|s| s.phase);
        if phase.as_ref().is_some_and(|p| p.is_terminal()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        phase,
        Some(weft_dag::WorkflowPhase::Succeeded),
        "{}",
        controller.log()
    );
    // Let a few watch cycles pass: still one report.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = common::kubectl(&kubeconfig, &["get", "events", "-o", "json"], None).await;
    let events: serde_json::Value = serde_json::from_slice(&events.stdout).unwrap();
    let about: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "lots")
        .collect();
    assert_eq!(about.len(), 1, "{about:#?}");
    assert_eq!(about[0]["reason"], "InvalidWorkflow");
    assert_eq!(about[0]["type"], "Warning");
    let message = about[0]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.parallelism: invalid type: string \"lots\""),
        "{message}"
    );
    let lines = controller
        .log()
        .lines()
        .filter(|l| l.contains("does not decode"))
        .count();
    assert_eq!(lines, 1, "{}", controller.log());
    let m = controller.metrics().await;
    assert_eq!(
        common::sample(&m, "weft_workflows_undecodable_total"),
        Some(1.0),
        "{m}"
    );
    let raw = common::kubectl(
        &kubeconfig,
        &["get", "workflow", "lots", "-o", "json"],
        None,
    )
    .await;
    let raw: serde_json::Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert!(raw["status"].is_null(), "{raw}");
}

/// `--status-hold` (5 s here, so a loaded machine still ends the short
/// task within it): a task that starts and ends within the hold costs its
/// Workflow one status write (a watch never sees it Running, only
/// Succeeded); a longer one is shown Running, with its pod, within the
/// hold and before it ends. Each made exactly one pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_task_writes_its_status_once_and_a_long_one_shows_running_within_the_hold() {
    let env = Env::start().await;
    let hold = Duration::from_secs(5);
    env.ctx.set_status_hold(hold);
    let status_writes = || {
        common::sample(
            &env.ctx.metrics.render(),
            "weft_api_writes_total{kind=\"status\"}",
        )
        .unwrap_or(0.0)
    };
    let seen = common::runs::statuses(env.workflows(), &["quick"]);
    let before = status_writes();
    env.submit(
        "quick",
        &format!("nodes:\n  - {{id: a, task: {}}}\n", sh("true")),
    )
    .await;
    let seen = seen.await.unwrap();
    let phases: Vec<_> = seen["quick"].iter().map(|s| s.phase).collect();
    assert_eq!(phases, [WorkflowPhase::Succeeded], "{seen:#?}");
    // The watch may bring the write before its answer is counted.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while status_writes() - before < 1.0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status_writes() - before, 1.0, "status writes of quick");
    assert_eq!(env.pods_of("quick").await.len(), 1);

    let seen = common::runs::statuses(env.workflows(), &["slow"]);
    let created = std::time::Instant::now();
    env.submit(
        "slow",
        &format!("nodes:\n  - {{id: a, task: {}}}\n", sh("sleep 10")),
    )
    .await;
    let running = env
        .wait_for("slow", 30, |wf| {
            wf.status.as_ref().is_some_and(|s| {
                s.phase == WorkflowPhase::Running
                    && s.nodes.get("a").is_some_and(|n| n.resource.is_some())
            })
        })
        .await;
    let shown = created.elapsed();
    assert!(
        shown < hold + Duration::from_secs(3),
        "Running shown after {shown:?}"
    );
    assert_eq!(node(&running, "a").phase, NodePhase::Running);
    let pods = env.pods_of("slow").await;
    assert_eq!(pods.len(), 1);
    let pod = node(&running, "a").resource.as_ref().unwrap().name.clone();
    assert_eq!(pod, common::name(&pods[0]));
    let seen = seen.await.unwrap();
    let last = seen["slow"].last().unwrap();
    assert_eq!(last.phase, WorkflowPhase::Succeeded, "{seen:#?}");
    assert_eq!(seen["slow"][0].phase, WorkflowPhase::Running, "{seen:#?}");
    assert_eq!(env.pods_of("slow").await.len(), 1);
    env.stop().await;
}

/// `--status-hold` over a chain: nodes that start and succeed within the
/// hold are written together (outputs passed along intact, one pod per
/// attempt), while a failure is written at once: a watch sees the
/// retrying node before the chain goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_within_the_hold_is_written_together_and_a_failure_at_once() {
    let env = Env::start().await;
    env.ctx.set_status_hold(Duration::from_secs(5));
    let out = |v: &str| sh(&format!("echo '{{\"v\": {v}}}' > /dev/termination-log"));
    let seen = common::runs::statuses(env.workflows(), &["chain"]);
    let marker = env.path("failed-once");
    let flaky = sh(&format!(
        "[ -e {m} ] || {{ touch {m}; exit 3; }}; echo '{{\"v\": 3}}' > /dev/termination-log",
        m = marker.display()
    ));
    let spec = format!(
        "nodes:\n  - {{id: a, task: {}}}\n  - {{id: b, dependsOn: [a], inputs: {{x: '${{nodes.a.outputs.v}}'}}, task: {}}}\n  - {{id: c, dependsOn: [b], retries: {{limit: 1, backoff: 1s}}, task: {flaky}}}\n  - {{id: d, dependsOn: [c], inputs: {{x: '${{nodes.c.outputs.v}}'}}, task: {}}}\n",
        out("1"),
        out("2"),
        out("4"),
    );
    env.submit("chain", &spec).await;
    let seen = seen.await.unwrap();
    let statuses = &seen["chain"];
    let last = statuses.last().unwrap();
    assert_eq!(last.phase, WorkflowPhase::Succeeded, "{statuses:#?}");
    for (id, v) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
        let outputs = last.nodes[id].outputs.as_ref().expect("outputs");
        assert_eq!(outputs["v"], v, "{id}: {outputs:?}");
    }
    let retrying = statuses.iter().position(|s| {
        s.nodes
            .get("c")
            .is_some_and(|c| c.phase == NodePhase::Retrying)
    });
    let retrying = retrying.unwrap_or_else(|| panic!("c never seen Retrying: {statuses:#?}"));
    let c = &statuses[retrying].nodes["c"];
    assert_eq!((c.attempts, c.user_failures), (0, 1), "{c:?}");
    // Before it: at most the chain's start; after it: the end.
    assert!(statuses.len() <= retrying + 3, "{statuses:#?}");
    let mut pods: Vec<String> = env
        .pods_of("chain")
        .await
        .iter()
        .map(common::name)
        .collect();
    pods.sort();
    assert_eq!(
        pods,
        [
            "chain-a-0",
            "chain-b-0",
            "chain-c-0",
            "chain-c-1",
            "chain-d-0"
        ]
    );
    env.stop().await;
}
