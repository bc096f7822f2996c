//! `weft submit`, `weft list`, `weft template` and `weft get` as a user
//! drives them: the real binary against a dev cluster (through its
//! kubeconfig, as kubectl finds it), the in-process controller running the
//! workflows. One dev cluster for the file.

mod common;

use common::{stderr, stdout, weft, weft_err, weft_ok};

use serde_json::{Value, json};
use weft_dag::WorkflowPhase;

/// The Workflow's name from `workflow.weft.dev/NAME created`.
fn created(out: &str) -> String {
    out.lines()
        .find_map(|l| {
            l.strip_prefix("workflow.weft.dev/")?
                .strip_suffix(" created")
        })
        .unwrap_or_else(|| panic!("no `created` line in:\n{out}"))
        .to_string()
}

/// The JSON of the `workflow outputs: {...}` line.
fn outputs(out: &str) -> Value {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("workflow outputs: "))
        .unwrap_or_else(|| panic!("no workflow outputs in:\n{out}"));
    serde_json::from_str(line).expect("outputs JSON")
}

/// The rows of a table, each split on runs of spaces, without the header.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_list_and_templates_through_the_binary() {
    let env = common::Env::start().await;
    let kc = env.dir.path().join("kubeconfig");
    let count = async || {
        env.workflows()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len()
    };

    // A file with a template and a launch of it: the template is applied
    // first, the launch followed to its end.
    let out = weft_ok(
        &kc,
        &[
            "submit",
            "examples/template.yaml",
            "--watch",
            "--timeout",
            "2m",
        ],
    )
    .await;
    assert!(out.contains("workflowtemplate greeter applied"), "{out}");
    assert!(out.contains("workflow default/greeter-"), "{out}");
    assert_eq!(
        outputs(&out),
        json!({"greeting": "hello, weft (3 times, from prod)"}),
        "{out}"
    );
    let from_file = created(&out);
    assert!(from_file.starts_with("greeter-"), "{from_file}");

    // The template again, with other values, typed by its declarations.
    let out = weft_ok(
        &kc,
        &[
            "submit",
            "--from",
            "template/greeter",
            "-p",
            "who=you",
            "-p",
            "times=2",
            "--watch",
        ],
    )
    .await;
    assert_eq!(
        outputs(&out),
        json!({"greeting": "hello, you (2 times, from prod)"}),
        "{out}"
    );
    let from_template = created(&out);
    assert!(from_template.starts_with("greeter-"), "{from_template}");
    let wf = env.workflows().get(&from_template).await.unwrap();
    let launch = wf
        .spec
        .spec
        .workflow_template_ref
        .as_ref()
        .expect("a launch");
    assert_eq!(
        Value::Object(launch.inputs.clone()),
        json!({"who": "you", "times": 2})
    );

    // Refused before anything is created, each naming what is wrong.
    let before = count().await;
    let greeter = ["submit", "--from", "template/greeter", "-p", "who=x"];
    let err = weft_err(&kc, &[&greeter[..], &["-p", "times=two"]].concat()).await;
    assert!(
        err.contains(r#"-p times=two: input times is an integer: "two" is not a valid integer"#),
        "{err}"
    );
    let err = weft_err(&kc, &[&greeter[..], &["-p", "env=dev"]].concat()).await;
    assert!(
        err.contains("-p env=dev: input env is fixed by template greeter"),
        "{err}"
    );
    let err = weft_err(&kc, &[&greeter[..], &["-p", "nope=1"]].concat()).await;
    assert!(
        err.contains(
            "-p nope=1: template greeter has no input nope (it declares: env, times, who)"
        ),
        "{err}"
    );
    let err = weft_err(&kc, &["submit", "--from", "template/greeter"]).await;
    assert!(
        err.contains("template greeter: input who (string) is required: give it with -p who=VALUE"),
        "{err}"
    );
    let err = weft_err(&kc, &[&greeter[..], &["-p", "times"]].concat()).await;
    assert!(err.contains("-p times: expected KEY=VALUE"), "{err}");
    let err = weft_err(&kc, &["submit", "--from", "greeter"]).await;
    assert!(
        err.contains("--from greeter: expected template/NAME"),
        "{err}"
    );
    let err = weft_err(&kc, &["submit", "--from", "template/nothing"]).await;
    assert!(
        err.contains("template nothing not found in namespace default"),
        "{err}"
    );
    let err = weft_err(
        &kc,
        &["submit", "examples/inputs-outputs.yaml", "-p", "times=4.5"],
    )
    .await;
    assert!(
        err.contains(r#"-p times=4.5: input times is an integer: "4.5" is not a valid integer"#),
        "{err}"
    );
    assert_eq!(count().await, before, "a refused submit created a Workflow");

    // A workflow with nodes of its own: -p sets its input's default.
    let out = weft_ok(
        &kc,
        &[
            "submit",
            "examples/inputs-outputs.yaml",
            "-p",
            "times=4",
            "--watch",
        ],
    )
    .await;
    assert_eq!(
        outputs(&out),
        json!({"total": 56, "report": "4 x 14 rows of events"}),
        "{out}"
    );
    let own = created(&out);

    // Without --watch: created, and the command returns at once; here
    // connecting with --server rather than the kubeconfig. A second later
    // than the others (creation times have whole seconds), so that it
    // leads the list.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let url = env.cluster.as_ref().unwrap().base_url();
    let out = weft_ok(
        &kc,
        &[
            "submit",
            "--from",
            "template/greeter",
            "-p",
            "who=me",
            "--name",
            "quiet",
            "--server",
            &url,
        ],
    )
    .await;
    assert_eq!(out.trim(), "workflow.weft.dev/quiet created");
    let wf = env.finish("quiet", 120).await;
    let status = wf.status.unwrap();
    assert_eq!(
        status.phase,
        WorkflowPhase::Succeeded,
        "{:?}",
        status.message
    );
    assert_eq!(
        Value::Object(status.outputs.unwrap()),
        json!({"greeting": "hello, me (1 times, from prod)"})
    );

    let names = [from_file.as_str(), &from_template, &own, "quiet"];

    // weft list: every workflow, Succeeded, one node of one.
    let out = weft_ok(&kc, &["list"]).await;
    assert!(
        out.starts_with("NAME ")
            && out
                .lines()
                .next()
                .unwrap()
                .split_whitespace()
                .eq(["NAME", "PHASE", "PROGRESS", "AGE", "DURATION", "MESSAGE"]),
        "{out}"
    );
    let table = rows(&out);
    assert_eq!(table.len(), names.len(), "{out}");
    for name in names {
        let row = table
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name} not listed:\n{out}"));
        assert_eq!(row[1], "Succeeded", "{out}");
        assert_eq!(row[2], "1/1", "{out}");
        assert!(row[4].ends_with('s'), "duration {:?}:\n{out}", row[4]);
    }
    // Newest first: the last one created leads.
    assert_eq!(table[0][0], "quiet", "{out}");

    // -l, --running, --completed, -A.
    let labelled = common::kubectl(&kc, &["label", "wf", &own, "team=data"], None).await;
    assert!(labelled.status.success(), "{labelled:?}");
    let out = weft_ok(&kc, &["list", "-l", "team=data"]).await;
    let listed: Vec<String> = rows(&out).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(listed, [own.as_str()], "{out}");
    let out = weft_ok(&kc, &["list", "-l", "team!=data"]).await;
    assert_eq!(rows(&out).len(), names.len() - 1, "{out}");
    let out = weft(&kc, &["list", "--running"]).await;
    assert!(out.status.success() && stdout(&out).is_empty(), "{out:?}");
    assert!(
        stderr(&out).contains("No workflows found in namespace default."),
        "{out:?}"
    );
    let out = weft_ok(&kc, &["list", "--completed"]).await;
    assert_eq!(rows(&out).len(), names.len(), "{out}");
    let out = weft_ok(&kc, &["list", "-A"]).await;
    assert!(out.starts_with("NAMESPACE "), "{out}");
    assert!(rows(&out).iter().all(|r| r[0] == "default"), "{out}");
    let err = weft_err(&kc, &["list", "--running", "--completed"]).await;
    assert!(err.contains("cannot be used with"), "{err}");

    // weft template list and get.
    let out = weft_ok(&kc, &["template", "list"]).await;
    assert_eq!(rows(&out)[0][..3], ["greeter", "3", "1"], "{out}");
    let out = weft_ok(&kc, &["template", "get", "greeter"]).await;
    let line = |input: &str| {
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.first() == Some(&input))
            .unwrap_or_else(|| panic!("no input {input} in:\n{out}"))
    };
    assert_eq!(
        line("who")[..4],
        ["who", "string", "required", "-"],
        "{out}"
    );
    assert_eq!(line("times")[..4], ["times", "integer", "1", "-"], "{out}");
    assert_eq!(
        line("env")[..4],
        ["env", "string", "-", "\"prod\""],
        "{out}"
    );
    assert!(out.contains("whom to greet"), "{out}");
    assert!(
        out.contains("Launch: weft submit --from template/greeter -p who=VALUE"),
        "{out}"
    );
    let out = weft_ok(&kc, &["template", "get", "greeter", "-o", "yaml"]).await;
    let t: Value = serde_yaml::from_str(&out).unwrap();
    assert_eq!(t["kind"], "WorkflowTemplate");
    assert_eq!(t["spec"]["fixedInputs"], json!({"env": "prod"}));
    let err = weft_err(&kc, &["template", "get", "nothing"]).await;
    assert!(
        err.contains("template nothing not found in namespace default"),
        "{err}"
    );

    // weft get draws a launch's DAG from the spec it resolved.
    let out = weft_ok(&kc, &["get", &from_template, "-o", "mermaid"]).await;
    assert!(out.contains("greet"), "{out}");
    let out = weft_ok(&kc, &["get", &from_template, "-o", "dot"]).await;
    assert!(
        out.contains("\"greet\"") && out.contains("Succeeded"),
        "{out}"
    );

    // Approval gates: `weft approve` lets one through, `weft reject`
    // fails another with the reason; the nodes after it never run.
    let gated = |name: &str| {
        format!(
            "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n  nodes:\n  - {{id: ok, gate: {{approval: {{message: ship?}}}}}}\n  - {{id: after, dependsOn: [ok], task: {{type: pod, config: {{image: busybox, command: ['true']}}}}}}\n"
        )
    };
    for name in ["approved", "rejected"] {
        let file = env.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, gated(name)).unwrap();
        weft_ok(&kc, &["submit", file.to_str().unwrap()]).await;
        env.wait_for(name, 30, |wf| {
            wf.status
                .as_ref()
                .is_some_and(|s| s.nodes.get("ok").is_some_and(|n| n.task_phase.is_some()))
        })
        .await;
    }
    let err = weft_err(&kc, &["approve", "approved", "after"]).await;
    assert!(
        err.contains("node after of workflow default/approved is not an approval gate"),
        "{err}"
    );
    let out = weft_ok(&kc, &["approve", "approved", "ok"]).await;
    assert!(out.contains("gate ok approved"), "{out}");
    let out = weft_ok(&kc, &["reject", "rejected", "ok", "--reason", "not today"]).await;
    assert!(out.contains("gate ok rejected (not today)"), "{out}");
    let ok = env.finish("approved", 60).await.status.unwrap();
    assert_eq!(ok.phase, WorkflowPhase::Succeeded);
    let no = env.finish("rejected", 60).await.status.unwrap();
    assert_eq!(no.phase, WorkflowPhase::Failed);
    assert_eq!(
        no.nodes["ok"].message.as_deref(),
        Some("rejected: not today")
    );
    assert!(env.pods_of("rejected").await.is_empty());
    let err = weft_err(&kc, &["reject", "rejected", "ok"]).await;
    assert!(
        err.contains("gate ok of workflow default/rejected has already ended"),
        "{err}"
    );

    env.stop().await;
}
