//! Sub-workflow and dynamic nodes as users drive them: templates and
//! Workflows created with kubectl against the dev cluster, the controller
//! running each child as a Workflow of its own. One dev cluster for the
//! file.

mod common;

use std::path::Path;

use kube::{Api, ResourceExt};
use serde_json::json;
use weft::api::Workflow;
use weft_dag::WorkflowPhase;

/// A template `name` whose one node `node` is `body` (YAML flow), with an
/// integer input `v` and the output `r` of that node.
fn template(name: &str, node: &str, body: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: WorkflowTemplate\nmetadata: {{name: {name}}}\nspec:\n  inputs: {{v: {{type: integer}}}}\n  outputs: {{r: '${{nodes.{node}.outputs.r}}'}}\n  nodes:\n    - {body}\n---\n"
    )
}

fn workflow(name: &str, nodes: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n{nodes}"
    )
}

const ADD_ONE: &str = r#"{id: calc, inputs: {v: '${inputs.v}'}, task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo "{\"r\": $((WEFT_INPUT_V + 1))}" > /dev/termination-log']}}}"#;
const FAIL: &str = r#"{id: calc, task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo disk full >&2; exit 3']}}}"#;
const HOLD: &str = "{id: calc, gate: {approval: {}}}";

fn call(node: &str, template: &str) -> String {
    format!("{{id: {node}, workflow: {{templateRef: {template}, inputs: {{v: '${{inputs.v}}'}}}}}}")
}

async fn get(api: &Api<Workflow>, name: &str) -> Workflow {
    api.get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn phase(wf: &Workflow) -> Option<WorkflowPhase> {
    wf.status.as_ref().map(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_workflows_nest_fail_abort_and_dynamic_nodes_fan_out() {
    let env = common::Env::start().await;
    let kc = env.dir.path().join("kubeconfig");
    let api = env.workflows();
    let mut templates = String::new();
    for (name, node, body) in [
        ("leaf", "calc", ADD_ONE.to_string()),
        ("mid", "down", call("down", "leaf")),
        ("leaf-fail", "calc", FAIL.to_string()),
        ("mid-fail", "down", call("down", "leaf-fail")),
        ("leaf-hold", "calc", HOLD.to_string()),
        ("mid-hold", "down", call("down", "leaf-hold")),
        ("selfish", "again", call("again", "selfish")),
    ] {
        templates.push_str(&template(name, node, &body));
    }
    common::kubectl_ok(&kc, &["apply", "-f", "-"], Some(&templates)).await;

    // Three levels: top -> mid -> leaf; the leaf's output comes back up.
    let top = |name: &str, mid: &str| {
        workflow(
            name,
            &format!(
                "  inputs: {{v: 40}}\n  outputs: {{r: '${{nodes.call.outputs.r}}'}}\n  nodes:\n    - {}\n",
                call("call", mid)
            ),
        )
    };
    common::kubectl_ok(&kc, &["create", "-f", "-"], Some(&top("chain", "mid"))).await;
    let done = env.finish("chain", 90).await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        status.phase,
        WorkflowPhase::Succeeded,
        "{:?}",
        status.message
    );
    assert_eq!(
        serde_json::Value::Object(status.outputs.unwrap()),
        json!({"r": 41})
    );
    let child = get(&api, "chain-call-0").await;
    let grandchild = get(&api, "chain-call-0-down-0").await;
    assert_eq!(child.owner_references()[0].name, "chain");
    assert_eq!(grandchild.owner_references()[0].name, "chain-call-0");
    assert_eq!(grandchild.labels()["weft.dev/depth"], "2");
    assert_eq!(child.status.unwrap().template.unwrap().name, "mid");
    let node = &status.nodes["call"];
    assert_eq!(node.resource.as_ref().unwrap().name, "chain-call-0");

    // A failing leaf fails both parents; the top's message names the path.
    common::kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&top("broken", "mid-fail")),
    )
    .await;
    let done = env.finish("broken", 90).await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let msg = status.message.unwrap();
    for part in [
        "node call failed: workflow broken-call-0 failed: node down failed: workflow broken-call-0-down-0 failed: node calc failed",
        "disk full",
    ] {
        assert!(msg.contains(part), "{part} in {msg}");
    }
    for name in ["broken-call-0", "broken-call-0-down-0"] {
        assert_eq!(
            phase(&get(&api, name).await),
            Some(WorkflowPhase::Failed),
            "{name}"
        );
    }

    // Aborting the top aborts every descendant.
    common::kubectl_ok(&kc, &["create", "-f", "-"], Some(&top("held", "mid-hold"))).await;
    let leaf = "held-call-0-down-0";
    for _ in 0..300 {
        if let Ok(wf) = api.get(leaf).await
            && phase(&wf) == Some(WorkflowPhase::Running)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let patch = r#"{"spec": {"abort": true}}"#;
    common::kubectl_ok(
        &kc,
        &["patch", "workflow", "held", "--type=merge", "-p", patch],
        None,
    )
    .await;
    for name in ["held", "held-call-0", leaf] {
        let wf = env.finish(name, 30).await;
        assert_eq!(phase(&wf), Some(WorkflowPhase::Aborted), "{name}");
    }

    // A template that launches itself is refused when a workflow starts it.
    common::kubectl_ok(&kc, &["create", "-f", "-"], Some(&top("loop", "selfish"))).await;
    let status = env.finish("loop", 30).await.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let msg = status.message.unwrap();
    assert!(
        msg.contains(
            "node call: workflow.templateRef: templates launch themselves: selfish -> selfish"
        ),
        "{msg}"
    );
    assert!(api.get_opt("loop-call-0").await.unwrap().is_none());

    dynamic_nodes(&env, &kc).await;

    // Nesting is bounded: with a limit of 1, the mid level may not start
    // the leaf, and the message says why.
    env.ctx.set_max_depth(1);
    common::kubectl_ok(&kc, &["create", "-f", "-"], Some(&top("deep", "mid"))).await;
    let status = env.finish("deep", 60).await.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let msg = status.message.unwrap();
    assert!(
        msg.contains("a child workflow here would be nested 2 deep, more than the limit of 1 (--max-workflow-depth)"),
        "{msg}"
    );
    assert!(api.get_opt("deep-call-0-down-0").await.unwrap().is_none());
    env.stop().await;
}

/// A dynamic task emits a 50-node fan-out (ids and inputs; the nodes run
/// `defaultTask`): all 50 run and their outputs are gathered. A generated
/// cycle fails the node with the validator's message.
async fn dynamic_nodes(env: &common::Env, kc: &Path) {
    let fan = r#"  nodes:
    - id: gen
      dynamic:
        task:
          type: pod
          config:
            image: busybox:1.36
            command: [sh, -c]
            args:
              - |
                { printf '{"nodes": ['; i=0
                  while [ $i -lt 50 ]; do
                    [ $i -gt 0 ] && printf ','
                    printf '{"id": "n%d", "inputs": {"v": %d}}' $i $i; i=$((i+1))
                  done; printf ']}'; } > /dev/termination-log
        defaultTask:
          type: pod
          config:
            image: busybox:1.36
            command: [sh, -c, 'echo "{\"sq\": $((WEFT_INPUT_V * WEFT_INPUT_V))}" > /dev/termination-log']
    - id: report
      dependsOn: [gen]
      inputs: {n49: '${nodes.gen.outputs.n49.sq}'}
      task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo "{\"n49\": $WEFT_INPUT_N49}" > /dev/termination-log']}}
"#;
    common::kubectl_ok(kc, &["create", "-f", "-"], Some(&workflow("fan", fan))).await;
    let status = env.finish("fan", 120).await.status.unwrap();
    assert_eq!(
        status.phase,
        WorkflowPhase::Succeeded,
        "{:?}",
        status.message
    );
    let gathered = status.nodes["gen"].outputs.clone().unwrap();
    assert_eq!(gathered.len(), 50);
    for i in [0u64, 7, 49] {
        assert_eq!(gathered[&format!("n{i}")], json!({"sq": i * i}));
    }
    assert_eq!(
        status.nodes["report"].outputs.clone().unwrap()["n49"],
        json!(2401)
    );
    let child = env.workflows().get("fan-gen-0").await.unwrap();
    let child_status = child.status.unwrap();
    assert_eq!(child_status.nodes.len(), 50);
    assert_eq!(child_status.progress.as_deref(), Some("50/50"));

    let cycle = r#"  nodes:
    - id: gen
      dynamic:
        task:
          type: pod
          config:
            image: busybox:1.36
            command: [sh, -c]
            args:
              - |
                printf '%s' '{"nodes": [{"id": "a", "dependsOn": ["b"]}, {"id": "b", "dependsOn": ["a"]}]}' > /dev/termination-log
        defaultTask: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'true']}}
"#;
    common::kubectl_ok(kc, &["create", "-f", "-"], Some(&workflow("cyclic", cycle))).await;
    let status = env.finish("cyclic", 60).await.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let node = &status.nodes["gen"];
    let msg = node.message.clone().unwrap();
    assert!(
        msg.starts_with("the generated workflow is invalid:\n"),
        "{msg}"
    );
    assert!(msg.contains("dependsOn: cycle: "), "{msg}");
    assert_eq!(node.reason.as_deref(), Some("InvalidDynamicWorkflow"));
    assert!(
        env.workflows()
            .get_opt("cyclic-gen-0")
            .await
            .unwrap()
            .is_none()
    );
}
