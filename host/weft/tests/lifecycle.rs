//! A workflow's life after submission, with a real `weft controller`
//! process against the dev cluster (real pods: local processes), driven
//! the ways users drive it: kubectl, the `weft` CLI and the admin API.
//! Output caching, pod GC, exit handlers, retry, suspend/resume,
//! stop/terminate and resubmit, with the controller SIGKILLed in the
//! middle of a retry and of a suspension. One dev cluster per test, or
//! with `WEFT_TEST_CLUSTER=k8s` one kube-apiserver for the file and a
//! namespace per test.

mod common;

use common::{weft, weft_ok};

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::Bed;
use common::{ControllerProcess, kubectl_ok};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};
use weft::admin::pb;
use weft::api::Workflow;
use weft_dag::{NodePhase, WorkflowPhase};

/// A pod task node (YAML flow map) running `script` in `sh -c`.
fn pod(id: &str, deps: &[&str], script: &str, extra: &str) -> String {
    format!(
        "    - id: {id}\n      dependsOn: [{}]\n      task: {{type: pod, config: {{image: busybox:1.36, command: [sh, -c, {script:?}]}}}}\n{extra}",
        deps.join(", ")
    )
}

fn workflow(name: &str, spec: &str, nodes: &[String]) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n{spec}  nodes:\n{}",
        nodes.concat()
    )
}

async fn wait_phase(api: &Api<Workflow>, name: &str, want: WorkflowPhase, secs: u64) -> Workflow {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Some(wf) = api.get_opt(name).await.unwrap()
            && wf.status.as_ref().is_some_and(|s| s.phase == want)
        {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wf = api.get(name).await.unwrap();
    panic!("{name} never reached {want:?}: {:#?}", wf.status);
}

async fn wait_node(api: &Api<Workflow>, name: &str, node: &str, want: NodePhase) {
    for _ in 0..600 {
        let wf = api.get(name).await.unwrap();
        if wf
            .status
            .as_ref()
            .and_then(|s| s.nodes.get(node))
            .is_some_and(|n| n.phase == want)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name}: node {node} never reached {want:?}");
}

async fn pods_of(client: &kube::Client, workflow: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let lp = ListParams::default().labels(&format!("weft.dev/workflow={workflow}"));
    pods.list(&lp).await.unwrap().items
}

fn node_phase(wf: &Workflow, id: &str) -> NodePhase {
    wf.status.as_ref().unwrap().nodes[id].phase
}

/// The Events on a Workflow, as `kubectl get events` prints them.
async fn events(kc: &Path, name: &str) -> String {
    let selector = format!("involvedObject.name={name}");
    kubectl_ok(kc, &["get", "events", "--field-selector", &selector], None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_nodes_reuse_outputs_and_create_no_child() {
    let bed = Bed::start().await;
    let (kc, client) = (bed.kubeconfig.clone(), bed.client.clone());
    let api: Api<Workflow> = Api::default_namespaced(client.clone());
    let controller = bed.controller("cache", &[]);
    controller.metrics().await;
    let cached = |version: &str, max_age: &str| {
        format!(
            "      cache: {{version: '{version}'{max_age}}}\n      inputs: {{x: '${{inputs.x}}'}}\n"
        )
    };
    let three = |name: &str, x: u32, version: &str, max_age: &str| {
        // Each node's own script: equal tasks would share entries.
        let out = |id: &str| {
            format!(
                r#"sleep 1; echo "{{\"v\": \"$WEFT_INPUT_X\", \"by\": \"{id}\"}}" > /dev/termination-log"#
            )
        };
        let c = cached(version, max_age);
        workflow(
            name,
            &format!("  inputs: {{x: {x}}}\n"),
            &[
                pod("a", &[], &out("a"), &c),
                pod("b", &["a"], &out("b"), &c),
                pod("c", &["b"], &out("c"), &c),
            ],
        )
    };
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&three("first", 1, "1", "")),
    )
    .await;
    let first = wait_phase(&api, "first", WorkflowPhase::Succeeded, 120).await;
    assert_eq!(pods_of(&client, "first").await.len(), 3);

    // The same inputs again: nothing runs, and it is faster.
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&three("second", 1, "1", "")),
    )
    .await;
    let second = wait_phase(&api, "second", WorkflowPhase::Succeeded, 120).await;
    assert!(
        pods_of(&client, "second").await.is_empty(),
        "no child for cached nodes"
    );
    let status = second.status.clone().unwrap();
    for id in ["a", "b", "c"] {
        let n = &status.nodes[id];
        assert!(n.cached, "{id}: {n:?}");
        assert_eq!(n.cached_from.as_deref(), Some("first"));
        assert_eq!(n.outputs.as_ref().unwrap()["v"], "1");
        assert!(n.message.as_deref().unwrap().contains("cached"), "{n:?}");
    }
    let took = |wf: &Workflow| {
        let s = wf.status.as_ref().unwrap();
        let at = |t: &Option<String>| humantime::parse_rfc3339(t.as_deref().unwrap()).unwrap();
        at(&s.finished_at)
            .duration_since(at(&s.started_at))
            .unwrap()
    };
    assert!(
        took(&second) < took(&first),
        "{:?} vs {:?}",
        took(&second),
        took(&first)
    );
    // The admin API's view says so too.
    let exec = weft::admin::service::execution(&second);
    assert!(exec.nodes.iter().all(|n| n.cached), "{:?}", exec.nodes);

    // A changed input, a new cache version and an entry past maxAge miss.
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&three("changed", 2, "1", "")),
    )
    .await;
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&three("version", 1, "2", "")),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&three("aged", 1, "1", ", maxAge: 1s")),
    )
    .await;
    for name in ["changed", "version", "aged"] {
        wait_phase(&api, name, WorkflowPhase::Succeeded, 120).await;
        assert_eq!(
            pods_of(&client, name).await.len(),
            3,
            "{name} ran every node"
        );
    }

    // A failed node is never cached: its second run runs it again.
    let failing = |name: &str| {
        let c = "      cache: {version: '1'}\n";
        workflow(name, "", &[pod("bad", &[], "exit 3", c)])
    };
    for name in ["fail1", "fail2"] {
        kubectl_ok(&kc, &["create", "-f", "-"], Some(&failing(name))).await;
        wait_phase(&api, name, WorkflowPhase::Failed, 120).await;
        assert_eq!(pods_of(&client, name).await.len(), 1, "{name} ran its node");
    }

    // The cache, as kubectl and `weft cache list` show it.
    let tc = kubectl_ok(
        &kc,
        &["get", "taskcache", "weft-cache-pod", "-o", "json"],
        None,
    )
    .await;
    let tc: serde_json::Value = serde_json::from_str(&tc).unwrap();
    let entries = tc["spec"]["entries"].as_object().unwrap();
    // changed's and version's entries; aged rewrote first's keys with a
    // maxAge of 1 s, so later writes collect them.
    for wf in ["changed", "version"] {
        let n = entries.values().filter(|v| v["workflow"] == wf).count();
        assert_eq!(n, 3, "{wf}: {entries:#?}");
    }
    assert!(entries.values().all(|v| v["node"] != "bad"));
    let listed = weft_ok(&kc, &["cache", "list"]).await;
    assert!(
        listed.contains("version") && listed.lines().count() >= 7,
        "{listed}"
    );
    let m = controller.metrics().await;
    assert!(
        common::sample(
            &m,
            "weft_cache_lookups_total{task_type=\"pod\",result=\"hit\"}"
        )
        .is_some_and(|v| v >= 3.0),
        "{m}"
    );

    // Resubmitted through the CLI: with --memoized the new run reads the
    // cache (no pod), without it every cached node runs again.
    for (flag, want) in [(Some("--memoized"), 0), (None, 3)] {
        let mut args = vec!["resubmit", "changed"];
        args.extend(flag);
        let said = weft_ok(&kc, &args).await;
        let new = said
            .split_whitespace()
            .find_map(|w| {
                let n = w.strip_prefix(bed.ns.as_str())?.strip_prefix('/')?;
                Some(n.trim_end_matches(':'))
            })
            .unwrap_or_else(|| panic!("no new name in {said:?}"))
            .to_string();
        assert!(new.starts_with("changed-"), "{said}");
        wait_phase(&api, &new, WorkflowPhase::Succeeded, 120).await;
        assert_eq!(pods_of(&client, &new).await.len(), want, "{flag:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_handlers_pod_gc_stop_and_terminate() {
    let bed = Bed::start().await;
    let (kc, client) = (bed.kubeconfig.clone(), bed.client.clone());
    let api: Api<Workflow> = Api::default_namespaced(client.clone());
    let (controller, port) = start(&bed, "exit");
    controller.metrics().await;
    let exit = "  onExit:\n    - id: notify\n      inputs: {phase: '${workflow.phase}', why: '${workflow.message}'}\n      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo exit sees $WEFT_INPUT_PHASE: $WEFT_INPUT_WHY']}}\n";
    let gc = "  podGC: {strategy: OnPodCompletion}\n";

    // After success (and with pod GC: no pod left, node statuses whole).
    let ok = r#"echo "{\"n\": 1}" > /dev/termination-log"#;
    let spec = format!("{gc}{exit}");
    let yaml = workflow(
        "good",
        &spec,
        &[pod("one", &[], ok, ""), pod("two", &["one"], ok, "")],
    );
    kubectl_ok(&kc, &["create", "-f", "-"], Some(&yaml)).await;
    let wf = wait_phase(&api, "good", WorkflowPhase::Succeeded, 120).await;
    let s = wf.status.clone().unwrap();
    assert_eq!(
        s.on_exit.as_ref().unwrap().nodes["notify"].phase,
        NodePhase::Succeeded
    );
    for id in ["one", "two"] {
        assert_eq!(s.nodes[id].outputs.as_ref().unwrap()["n"], 1);
        assert!(s.nodes[id].resource.is_some());
    }
    for _ in 0..100 {
        if pods_of(&client, "good").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        pods_of(&client, "good").await.is_empty(),
        "podGC OnPodCompletion"
    );
    assert!(events(&kc, "good").await.contains("RunningExitHandler"));

    // After a failure: the exit node sees the failed node's message.
    let yaml = workflow("bad", exit, &[pod("boom", &[], "echo kaput; exit 3", "")]);
    kubectl_ok(&kc, &["create", "-f", "-"], Some(&yaml)).await;
    let wf = wait_phase(&api, "bad", WorkflowPhase::Failed, 120).await;
    let notify = &wf.status.unwrap().on_exit.unwrap().nodes["notify"];
    let pod_name = &notify.resource.as_ref().unwrap().name;
    let log = kubectl_ok(&kc, &["logs", pod_name], None).await;
    assert!(log.contains("exit sees Failed: node boom failed"), "{log}");

    // `weft stop` runs the exit handler; terminate (admin API) does not.
    let long = |name: &str| workflow(name, exit, &[pod("sleep", &[], "sleep 120", "")]);
    kubectl_ok(&kc, &["create", "-f", "-"], Some(&long("stopped"))).await;
    kubectl_ok(&kc, &["create", "-f", "-"], Some(&long("terminated"))).await;
    wait_node(&api, "stopped", "sleep", NodePhase::Running).await;
    wait_node(&api, "terminated", "sleep", NodePhase::Running).await;
    let said = weft_ok(&kc, &["stop", "stopped"]).await;
    assert!(said.contains("stop requested"), "{said}");
    let mut admin = common::admin_client(port).await;
    admin
        .terminate_execution(pb::ExecutionActionRequest {
            id: id(&bed.ns, "terminated"),
        })
        .await
        .unwrap();
    let stopped = wait_phase(&api, "stopped", WorkflowPhase::Aborted, 120).await;
    let s = stopped.status.unwrap();
    assert_eq!(s.nodes["sleep"].phase, NodePhase::Aborted);
    assert_eq!(
        s.on_exit.unwrap().nodes["notify"].phase,
        NodePhase::Succeeded
    );
    assert!(s.message.unwrap().contains("spec.shutdown: Stop"));
    let terminated = wait_phase(&api, "terminated", WorkflowPhase::Aborted, 120).await;
    let s = terminated.status.unwrap();
    assert!(s.on_exit.is_none(), "no exit handler after terminate");
    assert!(s.message.unwrap().contains("Terminate"));
    let pods = pods_of(&client, "terminated").await;
    assert!(
        !pods.iter().any(|p| p.name_any().contains("notify")),
        "no exit pod"
    );
    // Stopping what ended is refused, by name.
    let out = weft(&kc, &["stop", "terminated"]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("workflow {}/terminated already ended", bed.ns)),
        "{out:?}"
    );
    let ev = events(&kc, "stopped").await;
    assert!(
        ev.contains("StopRequested") && ev.contains("through the weft CLI"),
        "{ev}"
    );
}

/// A controller process that also serves the admin API (no middleware);
/// its port.
fn start(bed: &Bed, identity: &str) -> (ControllerProcess, u16) {
    let port = common::free_port();
    let config = bed.path(&format!("{identity}-admin.yaml"));
    std::fs::write(
        &config,
        format!("listen: 127.0.0.1:{port}\nmiddleware: []\n"),
    )
    .unwrap();
    let args = [
        "--admin-config",
        config.to_str().unwrap(),
        "--workflow-events",
        "all",
        // Workflows here run side by side on two reconcile workers.
        "--concurrent-reconciles",
        "2",
        // Plugin instances made on the caller's path (the other tests'
        // controllers keep the default, a spare prepared ahead).
        "--plugin-spares",
        "0",
        // and a used instance's memory given back, not kept for the next.
        "--plugin-keep-resident",
        "0",
    ];
    let c = bed.controller(identity, &args);
    (c, port)
}

fn id(ns: &str, name: &str) -> Option<pb::ExecutionId> {
    Some(pb::ExecutionId {
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_suspend_survive_a_controller_kill() {
    let bed = Bed::start().await;
    let (kc, client) = (bed.kubeconfig.clone(), bed.client.clone());
    let api: Api<Workflow> = Api::default_namespaced(client.clone());
    let mut controller = bed.controller("actions-1", &[]);
    controller.metrics().await;

    // Five nodes; the third fails once (a marker file says it ran before).
    let marker = bed.path("n3-ran");
    let flaky = format!("test -f {0} && exit 0; touch {0}; exit 1", marker.display());
    let nodes: Vec<String> = (1..=5)
        .map(|i| {
            let deps: Vec<String> = (i > 1).then(|| format!("n{}", i - 1)).into_iter().collect();
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            let script = if i == 3 { flaky.as_str() } else { "echo ok" };
            pod(&format!("n{i}"), &deps, script, "")
        })
        .collect();
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&workflow("five", "", &nodes)),
    )
    .await;
    wait_phase(&api, "five", WorkflowPhase::Failed, 120).await;
    let before: Vec<(String, String)> = pods_of(&client, "five")
        .await
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    assert_eq!(before.len(), 3, "{before:?}");
    // Retrying a missing node is refused by name; then the retry is asked
    // and the controller killed before it can act.
    let out = weft(&kc, &["retry", "five", "--node", "n9"]).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no node \"n9\""),
        "{out:?}"
    );
    controller.kill();
    let said = weft_ok(&kc, &["retry", "five"]).await;
    assert!(said.contains("retry r"), "{said}");
    let controller = bed.controller("actions-2", &[]);
    controller.metrics().await;
    let wf = wait_phase(&api, "five", WorkflowPhase::Succeeded, 120).await;
    let s = wf.status.unwrap();
    assert_eq!(s.retries.len(), 1);
    assert_eq!(s.retries[0].nodes, ["n3", "n4", "n5"]);
    let after: Vec<(String, String)> = pods_of(&client, "five")
        .await
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    for p in before
        .iter()
        .filter(|(n, _)| n.contains("-n1-") || n.contains("-n2-"))
    {
        assert!(after.contains(p), "{p:?} was recreated: {after:?}");
    }
    let mut names: Vec<&str> = after.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "five-n1-0",
            "five-n2-0",
            "five-n3-0",
            "five-n3-1",
            "five-n4-0",
            "five-n5-0"
        ]
    );
    assert!(events(&kc, "five").await.contains("WorkflowRetried"));
    // Asking again for a workflow that succeeded is refused.
    let out = weft(&kc, &["retry", "five"]).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only a Failed or Aborted"),
        "{out:?}"
    );

    // Suspend holds a 10-node chain at its current node, across a kill.
    let chain: Vec<String> = (1..=10)
        .map(|i| {
            let deps: Vec<String> = (i > 1).then(|| format!("c{}", i - 1)).into_iter().collect();
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            pod(&format!("c{i}"), &deps, "sleep 1", "")
        })
        .collect();
    kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&workflow("chain", "", &chain)),
    )
    .await;
    // While c3's pod runs (its Running status may be held with the next
    // change: --status-hold), suspend.
    let c3 = Some("chain-c3-0");
    let mut tries = 0;
    while !pods_of(&client, "chain")
        .await
        .iter()
        .any(|p| p.metadata.name.as_deref() == c3)
    {
        tries += 1;
        assert!(tries < 1200, "chain-c3-0 never created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    weft_ok(&kc, &["suspend", "chain"]).await;
    wait_node(&api, "chain", "c3", NodePhase::Succeeded).await;
    let mut controller = controller;
    controller.kill();
    let (controller, port) = start(&bed, "actions-3");
    controller.metrics().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let wf = api.get("chain").await.unwrap();
    assert_eq!(node_phase(&wf, "c4"), NodePhase::Pending, "held at c3");
    let shown = kubectl_ok(
        &kc,
        &[
            "get",
            "workflow",
            "chain",
            "-o",
            "jsonpath={.status.suspended}",
        ],
        None,
    )
    .await;
    assert_eq!(shown, "true");
    let mut admin = common::admin_client(port).await;
    let e = admin
        .resume_execution(pb::ExecutionActionRequest {
            id: id(&bed.ns, "chain"),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(e.id.unwrap().name, "chain");
    wait_phase(&api, "chain", WorkflowPhase::Succeeded, 120).await;
    assert_eq!(pods_of(&client, "chain").await.len(), 10);
    let ev = events(&kc, "chain").await;
    assert!(
        ev.contains("WorkflowSuspended") && ev.contains("WorkflowResumed"),
        "{ev}"
    );

    // The admin API refuses to retry what succeeded, as the CLI does.
    let refused = admin
        .retry_execution(pb::RetryExecutionRequest {
            id: id(&bed.ns, "five"),
            node_id: "n4".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused}");
    assert!(
        refused.message().contains("only a Failed or Aborted"),
        "{refused}"
    );

    // Resubmit: a new workflow with the same spec, through the admin API.
    let e = admin
        .resubmit_execution(pb::ResubmitExecutionRequest {
            id: id(&bed.ns, "five"),
            memoized: false,
        })
        .await
        .unwrap()
        .into_inner();
    let new = e.id.unwrap().name;
    assert!(new.starts_with("five-"), "{new}");
    wait_phase(&api, &new, WorkflowPhase::Succeeded, 120).await;
    assert_eq!(pods_of(&client, &new).await.len(), 5);
}
