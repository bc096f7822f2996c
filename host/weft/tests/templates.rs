//! WorkflowTemplates as users drive them: templates and launches created
//! with kubectl against the dev cluster, the controller resolving them.
//! One dev cluster for the file.

mod common;

use kube::ResourceExt;
use serde_json::json;

/// A template whose workflow waits at a gate, so a launch can be held
/// running while the template changes. `factor` is what the node
/// multiplies by: the test edits it.
fn template(factor: u32) -> String {
    format!(
        r#"apiVersion: weft.dev/v1alpha1
kind: WorkflowTemplate
metadata:
  name: scale
spec:
  inputs:
    num: {{type: integer, description: the number to scale}}
    label: {{type: string, default: plain}}
  outputs:
    scaled: '${{nodes.calc.outputs.scaled}}'
    label: '${{inputs.label}}'
  nodes:
    - id: hold
      gate: {{approval: {{message: let it go}}}}
    - id: calc
      dependsOn: [hold]
      inputs: {{num: '${{inputs.num}}'}}
      task:
        type: pod
        config:
          image: busybox:1.36
          command: [sh, -c]
          args: ['echo "{{\"scaled\": $((WEFT_INPUT_NUM * {factor}))}}" > /dev/termination-log']
"#
    )
}

fn launch(name: &str, template: &str, inputs: serde_json::Value) -> String {
    let doc = json!({
        "apiVersion": "weft.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"workflowTemplateRef": {"name": template, "inputs": inputs}}
    });
    serde_yaml::to_string(&doc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_launch_with_their_inputs_and_keep_the_spec_they_started_with() {
    let env = common::Env::start().await;
    let kc = env.dir.path().join("kubeconfig");
    common::kubectl_ok(&kc, &["apply", "-f", "-"], Some(&template(2))).await;
    let stdin = format!(
        "{}---\n{}",
        launch("launch-a", "scale", json!({"num": 2})),
        launch("launch-b", "scale", json!({"num": 5, "label": "b"}))
    );
    common::kubectl_ok(&kc, &["create", "-f", "-"], Some(&stdin)).await;
    let waiting = |wf: &weft::api::Workflow| {
        wf.status
            .as_ref()
            .and_then(|s| s.nodes.get("hold"))
            .is_some_and(|n| n.phase == weft_dag::NodePhase::Running)
    };
    let a = env.wait_for("launch-a", 30, waiting).await;
    env.wait_for("launch-b", 30, waiting).await;
    // The status names the template version it started from.
    let rv = common::kubectl_ok(
        &kc,
        &[
            "get",
            "workflowtemplate",
            "scale",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        None,
    )
    .await;
    let status = a.status.clone().unwrap();
    let record = status.template.clone().expect("status.template");
    assert_eq!(record.name, "scale");
    assert_eq!(record.resource_version.as_deref(), Some(rv.as_str()));
    assert_eq!(
        serde_json::Value::Object(status.inputs.clone().unwrap()),
        json!({"num": 2, "label": "plain"})
    );
    assert_eq!(status.resolved_spec.as_ref().unwrap().nodes.len(), 2);

    // The template changes while both run: they keep what they started with.
    common::kubectl_ok(&kc, &["apply", "-f", "-"], Some(&template(10))).await;
    for name in ["launch-a", "launch-b"] {
        common::kubectl_ok(
            &kc,
            &["annotate", "workflow", name, "approve.weft.dev/hold=true"],
            None,
        )
        .await;
    }
    let a = env.finish("launch-a", 60).await;
    let b = env.finish("launch-b", 60).await;
    let outputs = |wf: &weft::api::Workflow| {
        let s = wf.status.as_ref().unwrap();
        assert_eq!(
            s.phase,
            weft_dag::WorkflowPhase::Succeeded,
            "{:?}",
            s.message
        );
        serde_json::Value::Object(s.outputs.clone().unwrap())
    };
    assert_eq!(outputs(&a), json!({"scaled": 4, "label": "plain"}));
    assert_eq!(outputs(&b), json!({"scaled": 10, "label": "b"}));

    // A new launch runs the new version.
    common::kubectl_ok(
        &kc,
        &["create", "-f", "-"],
        Some(&launch("launch-c", "scale", json!({"num": 3}))),
    )
    .await;
    common::kubectl_ok(
        &kc,
        &[
            "annotate",
            "workflow",
            "launch-c",
            "approve.weft.dev/hold=true",
        ],
        None,
    )
    .await;
    let c = env.finish("launch-c", 60).await;
    assert_eq!(outputs(&c), json!({"scaled": 30, "label": "plain"}));
    assert_ne!(
        c.status
            .as_ref()
            .unwrap()
            .template
            .as_ref()
            .unwrap()
            .resource_version,
        Some(rv)
    );

    // Bad launches fail with messages naming the input, and start nothing.
    let missing = format!(
        "workflowTemplateRef: WorkflowTemplate \"nope\" not found in namespace {}",
        env.ns
    );
    let bad = [
        (
            "no-n",
            "scale",
            json!({}),
            "inputs.num: required input (integer) is missing",
        ),
        (
            "typed-n",
            "scale",
            json!({"num": "two"}),
            "workflowTemplateRef.inputs.num: expected integer, got string \"two\"",
        ),
        (
            "extra",
            "scale",
            json!({"num": 1, "size": 3}),
            "workflowTemplateRef.inputs.size: is not an input of template scale (it declares: label, num)",
        ),
        ("no-template", "nope", json!({}), missing.as_str()),
    ];
    for (name, template, inputs, want) in bad {
        common::kubectl_ok(
            &kc,
            &["create", "-f", "-"],
            Some(&launch(name, template, inputs)),
        )
        .await;
        let wf = env.finish(name, 30).await;
        let s = wf.status.unwrap();
        assert_eq!(s.phase, weft_dag::WorkflowPhase::Failed, "{name}");
        let msg = s.message.unwrap_or_default();
        assert!(msg.contains(want), "{name}: {msg}");
        assert!(env.pods_of(name).await.is_empty(), "{name} started pods");
        // What a user reads with kubectl describe. The Event is posted
        // after the status is written: polled (once failed on
        // kube-apiserver, read a moment too early).
        let selector = format!("involvedObject.name={name}");
        let mut events = String::new();
        for _ in 0..100 {
            events = common::kubectl_ok(
                &kc,
                &[
                    "get",
                    "events",
                    "--field-selector",
                    &selector,
                    "-o",
                    "jsonpath={.items[*].message}",
                ],
                None,
            )
            .await;
            if events.contains(want) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(events.contains(want), "{name}: events {events}");
    }
    assert_eq!(env.pods_of("launch-a").await.len(), 1);
    let names: Vec<String> = env
        .workflows()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|w| w.name_any())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    env.stop().await;
}
