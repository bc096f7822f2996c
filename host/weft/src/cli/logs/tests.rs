use super::*;
use serde_json::json;

fn workflow(spec: Value, status: Value) -> Workflow {
    serde_json::from_value(json!({
        "apiVersion": "weft.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "wf", "namespace": "default"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn task() -> Value {
    json!({"type": "pod", "config": {}})
}

fn pod(name: &str, created: &str, node: &str, attempt: u32, containers: &[&str]) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "x"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {"weft.dev/workflow": "wf", "weft.dev/node": node,
                       "weft.dev/attempt": attempt.to_string()},
        },
        "spec": {"containers": containers},
    }))
    .unwrap()
}

#[test]
fn prefixes_name_the_node_item_and_attempt() {
    let wf = workflow(
        json!({"nodes": [
            {"id": "prep", "task": task()},
            {"id": "train", "dependsOn": ["prep"],
             "array": {"over": [1, 2, 3], "task": task()}},
            {"id": "train-x", "task": task()},
        ]}),
        json!({"nodes": {"train": {"items": [{}, {}, {}]}}}),
    );
    let dag = Dag::of(&wf);
    let t = "2026-01-01T00:00:00Z";
    let prefix = |node: &str, attempt| dag.describe(&pod("p", t, node, attempt, &["main"])).prefix;
    assert_eq!(prefix("prep", 0), "prep");
    assert_eq!(prefix("train-2", 0), "train[2]");
    assert_eq!(prefix("train-2", 1), "train[2] (attempt 2)");
    assert_eq!(prefix("prep", 2), "prep (attempt 3)");
    assert_eq!(prefix("train-x", 0), "train-x");
    assert_eq!(prefix("other-1", 0), "other-1");

    let item = dag.describe(&pod("p", t, "train-0", 0, &["main"]));
    assert!(dag.wanted(&item, Some("train")));
    assert!(!dag.wanted(&item, Some("prep")));
    assert_eq!(
        dag.selector("wf", Some("train")),
        "weft.dev/workflow=wf",
        "an array's items are matched by their own labels"
    );
    assert_eq!(
        dag.selector("wf", Some("prep")),
        "weft.dev/workflow=wf,weft.dev/node=prep"
    );
    assert!(dag.check_node("wf", "train").is_ok());
    let err = dag.check_node("wf", "nope").unwrap_err().to_string();
    assert_eq!(
        err,
        "workflow wf has no node nope (its nodes: prep, train, train-x)"
    );
}

#[test]
fn pods_of_one_second_are_in_dag_order() {
    // Listed before their dependencies, as names might sort.
    let wf = workflow(
        json!({"nodes": [
            {"id": "c", "dependsOn": ["b"], "task": task()},
            {"id": "b", "dependsOn": ["a"], "task": task()},
            {"id": "a", "task": task()},
        ]}),
        json!(null),
    );
    let dag = Dag::of(&wf);
    let same = "2026-01-01T00:00:01Z";
    let mut logs: Vec<PodLog> = [
        pod("wf-c-0", same, "c", 0, &["main"]),
        pod("wf-b-1", same, "b", 1, &["main"]),
        pod("wf-b-0", same, "b", 0, &["main"]),
        pod("wf-a-0", "2026-01-01T00:00:00Z", "a", 0, &["main"]),
    ]
    .iter()
    .map(|p| dag.describe(p))
    .collect();
    logs.sort_by(|a, b| a.order().cmp(&b.order()));
    let names: Vec<&str> = logs.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["wf-a-0", "wf-b-0", "wf-b-1", "wf-c-0"]);
}

#[test]
fn the_main_container_is_shown() {
    let t = "2026-01-01T00:00:00Z";
    let main = |cs: &[&str]| main_container(&pod("p", t, "a", 0, cs));
    assert_eq!(main(&["sidecar", "main"]).as_deref(), Some("main"));
    assert_eq!(main(&["only"]).as_deref(), Some("only"));
    assert_eq!(main(&[]), None);
}
