use super::*;
use crate::spec::{NodeSpec, TaskSpec};

fn task(id: &str, deps: &[&str]) -> NodeSpec {
    NodeSpec {
        id: id.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        task: Some(TaskSpec {
            task_type: "pod".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn secrets_are_checked_by_name_key_and_target() {
    let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({"nodes": [
    {"id": "a", "task": {"type": "pod", "secrets": [
        {"name": "db", "key": "password"},
        {"name": "db", "key": "password", "mountAs": "file"},
        {"name": "Bad_Name", "key": "k/x"},
        {"name": "other", "key": "k", "envName": "WEFT_SECRET_DB_PASSWORD"},
        {"name": "x", "key": "k", "envName": "1st"},
        {"name": "x", "key": "k", "mountAs": "file", "envName": "X"}
    ]}}]}))
    .unwrap();
    let got = problems(&spec);
    let want = [
        "node a: task.secrets[2]: name \"Bad_Name\" is not a Secret name",
        "node a: task.secrets[2]: key \"k/x\" is not a Secret key",
        "node a: task.secrets[3]: the environment variable WEFT_SECRET_DB_PASSWORD is given twice",
        "node a: task.secrets[4]: envName \"1st\" is not a variable name",
        "node a: task.secrets[5]: envName is for mountAs: env",
    ];
    for w in want {
        assert!(got.iter().any(|g| g.starts_with(w)), "{w} in {got:#?}");
    }
    assert_eq!(got.len(), want.len(), "{got:#?}");
    assert_eq!(
        spec.nodes[0].task.as_ref().unwrap().secrets[0].env_var(),
        "WEFT_SECRET_DB_PASSWORD"
    );
}

#[test]
fn header_secrets_name_a_header_and_their_hosts() {
    let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({"nodes": [
        {"id": "a", "task": {"type": "pod", "secrets": [
            {"name": "api", "key": "token", "mountAs": "header",
             "header": {"name": "Authorization", "prefix": "Bearer ", "hosts": ["api.example.com", "*.example.org", "127.0.0.1"]}},
            {"name": "api", "key": "token", "mountAs": "header"},
            {"name": "api", "key": "other", "mountAs": "header", "header": {"name": "authorization"}},
            {"name": "api", "key": "k", "mountAs": "header", "header": {"name": "Bad Header", "hosts": ["http://x/"]}},
            {"name": "api", "key": "k", "header": {"name": "X-Key"}}
        ]}}]}))
        .unwrap();
    let got = problems(&spec);
    let want = [
        "node a: task.secrets[1]: mountAs: header needs header: {name, prefix?, hosts?}",
        "node a: task.secrets[2]: the header authorization is given twice",
        "node a: task.secrets[3]: header.name \"Bad Header\" is not an HTTP header name",
        "node a: task.secrets[3]: header.hosts[0] \"http://x/\" is not a host name",
        "node a: task.secrets[4]: header is for mountAs: header",
    ];
    for w in want {
        assert!(got.iter().any(|g| g.starts_with(w)), "{w} in {got:#?}");
    }
    assert_eq!(got.len(), want.len(), "{got:#?}");
}

fn pods(t: &str) -> bool {
    t == "pod"
}

fn problems(spec: &WorkflowSpec) -> Vec<String> {
    compile(spec, &pods)
        .expect_err("invalid")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_diamond_compiles_in_dependency_order() {
    let spec = WorkflowSpec {
        nodes: vec![
            task("d", &["b", "c"]),
            task("b", &["a"]),
            task("c", &["a"]),
            task("a", &[]),
        ],
        ..Default::default()
    };
    let c = compile(&spec, &pods).unwrap();
    let pos = |id: &str| c.order.iter().position(|&i| c.nodes[i].id == id).unwrap();
    assert!(
        pos("a") < pos("b") && pos("a") < pos("c") && pos("b") < pos("d") && pos("c") < pos("d")
    );
    assert_eq!(c.dependents[c.index["a"]].len(), 2);
}

#[test]
fn every_problem_is_reported_at_once_with_its_node() {
    let mut bad_when = task("w", &[]);
    bad_when.when = Some("1 +".into());
    let mut bad_timeout = task("t", &[]);
    bad_timeout.timeout = Some("soon".into());
    let mut unknown = task("u", &["ghost"]);
    unknown.task.as_mut().unwrap().task_type = "spark".into();
    let spec = WorkflowSpec {
        nodes: vec![
            task("a", &[]),
            task("a", &[]),
            bad_when,
            bad_timeout,
            unknown,
            task("Bad_Id", &[]),
        ],
        ..Default::default()
    };
    let p = problems(&spec);
    let has = |s: &str| p.iter().any(|x| x.contains(s));
    assert!(has("node a: id: duplicate node id"), "{p:#?}");
    assert!(has("node w: when: invalid CEL"), "{p:#?}");
    assert!(has("node t: timeout: \"soon\" is not a duration"), "{p:#?}");
    assert!(has("node u: dependsOn: \"ghost\" is not a node"), "{p:#?}");
    assert!(
        has("node u: task.type: no plugin serves task type \"spark\""),
        "{p:#?}"
    );
    assert!(has("node Bad_Id: id:"), "{p:#?}");
}

/// Argo's task names: either case; and an input kubectl renamed.
#[test]
fn node_ids_take_either_case_and_yaml_booleans_are_named() {
    let spec = WorkflowSpec {
        nodes: vec![task("A", &[]), task("B", &["A"]), task("a", &["B"])],
        ..Default::default()
    };
    assert!(compile(&spec, &pods).is_ok());
    let mut renamed = task("left", &[]);
    renamed.inputs.insert("false".into(), "${inputs.x}".into());
    let spec = WorkflowSpec {
        nodes: vec![renamed, task("-x", &[])],
        ..Default::default()
    };
    let p = problems(&spec);
    assert!(
        p.iter().any(|x| x.contains(
            "node left: inputs: input named \"false\": kubectl's YAML reader (YAML 1.1)"
        )),
        "{p:#?}"
    );
    assert!(
        p.iter()
            .any(|x| x.contains("node -x: id: \"-x\" is not a node id")),
        "{p:#?}"
    );
}

#[test]
fn a_cycle_is_named_by_its_path() {
    let spec = WorkflowSpec {
        nodes: vec![
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
            task("d", &[]),
            task("e", &["e"]),
        ],
        ..Default::default()
    };
    let p = problems(&spec);
    assert!(
        p.iter().any(|x| x.contains("cycle: ")
            && x.contains("a")
            && x.contains("b")
            && x.contains("c")),
        "{p:#?}"
    );
    assert!(p.iter().any(|x| x.contains("cycle: e -> e")), "{p:#?}");
    let abc = p.iter().find(|x| !x.contains("e -> e")).unwrap();
    let path: Vec<&str> = abc
        .rsplit("cycle: ")
        .next()
        .unwrap()
        .split(" -> ")
        .collect();
    assert_eq!(path.len(), 4);
    assert_eq!(path.first(), path.last());
}

#[test]
fn expressions_may_only_use_dependencies() {
    let mut n = task("b", &[]);
    n.inputs.insert("x".into(), "${nodes.a.outputs.x}".into());
    let spec = WorkflowSpec {
        nodes: vec![task("a", &[]), n],
        ..Default::default()
    };
    let p = problems(&spec);
    assert!(
        p[0].contains("refers to nodes.a but does not depend on it"),
        "{p:#?}"
    );
}

#[test]
fn node_kinds_gates_and_arrays_are_checked() {
    let mut both = task("both", &[]);
    both.gate = Some(Default::default());
    let mut gate = NodeSpec {
        id: "g".into(),
        ..Default::default()
    };
    gate.gate = Some(Box::new(crate::spec::GateSpec {
        sleep: Some("forever".into()),
        approval: None,
    }));
    let array = NodeSpec {
        id: "arr".into(),
        array: Some(Box::new(crate::spec::ArraySpec {
            over: serde_json::json!(7),
            min_success_ratio: Some(1.5),
            task: TaskSpec {
                task_type: "pod".into(),
                ..Default::default()
            },
            ..Default::default()
        })),
        ..Default::default()
    };
    let spec = WorkflowSpec {
        nodes: vec![both, gate, array],
        parallelism: Some(0),
        ..Default::default()
    };
    let p = problems(&spec);
    let has = |s: &str| p.iter().any(|x| x.contains(s));
    assert!(
        has("node both: task: a node needs exactly one of task, array, gate, workflow and dynamic"),
        "{p:#?}"
    );
    assert!(has("node g: gate.sleep"), "{p:#?}");
    assert!(has("node arr: array.over: must be a list"), "{p:#?}");
    assert!(has("node arr: array.minSuccessRatio"), "{p:#?}");
    assert!(has("parallelism: must be at least 1"), "{p:#?}");
}

/// A mistyped input name in an expression, a missing required input
/// and outputs over unknown nodes are named.
#[test]
fn inputs_and_outputs_are_checked() {
    let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({
            "inputs": {"count": {"type": "integer"}, "name": "x"},
            "outputs": {"m": "${nodes.ghost.outputs.m}", "n": "${inputs.nmae}", "ok": "${nodes.a.outputs.k}"},
            "nodes": [{"id": "a", "task": {"type": "pod"}, "inputs": {"c": "${inputs.cuont}"}}]
        }))
        .unwrap();
    let p = problems(&spec);
    let want = [
        "inputs.count: required input (integer) is missing",
        "node a: inputs: refers to inputs.cuont, which the workflow does not declare",
        "outputs.m: refers to nodes.ghost, which is not a node of this workflow",
        "outputs.n: refers to inputs.nmae, which the workflow does not declare",
    ];
    assert_eq!(p, want);
}

/// Sub-workflow nodes: one of templateRef and nodes; inline nodes are
/// validated as a workflow, their problems under the node.
#[test]
fn sub_workflow_and_dynamic_nodes_are_checked() {
    let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({"nodes": [
            {"id": "both", "workflow": {"templateRef": "t", "nodes": [{"id": "x", "task": {"type": "pod"}}]}},
            {"id": "inline", "workflow": {"nodes": [{"id": "x", "dependsOn": ["x"], "task": {"type": "pod"}}]}},
            {"id": "ins", "inputs": {"a": 1}, "workflow": {"templateRef": "t", "inputs": {"v": "${nodes.both.outputs.v}"}}},
            {"id": "dyn", "dynamic": {"task": {"type": "nope"}, "maxNodes": 0}}
        ]}))
        .unwrap();
    let p = problems(&spec);
    let want = [
        "node both: workflow: needs exactly one of templateRef and nodes",
        "node inline: workflow: node x: dependsOn: cycle: x -> x",
        "node ins: inputs: a workflow node gives its child's inputs in workflow.inputs",
        "node ins: workflow.inputs: refers to nodes.both but does not depend on it (add it to dependsOn)",
        "node dyn: dynamic.task.type: no plugin serves task type \"nope\"",
        "node dyn: dynamic.maxNodes: 0 is not between 1 and 20000",
    ];
    assert_eq!(p, want);
}

#[test]
fn backoff_doubles_up_to_its_cap() {
    let r = Retries {
        user: 5,
        system: 3,
        backoff: Duration::from_secs(10),
        max_backoff: Duration::from_secs(60),
    };
    let delays: Vec<u64> = (1..=5).map(|n| r.delay(n).as_secs()).collect();
    assert_eq!(delays, [10, 20, 40, 60, 60]);
}
