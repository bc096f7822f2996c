use serde_json::json;
use weft_dag::WorkflowSpec;
use weft_dag::artifacts::ArtifactGcStrategy as Strategy;

use super::Strategies;

fn spec(v: serde_json::Value) -> WorkflowSpec {
    serde_json::from_value(v).unwrap()
}

fn out(name: &str, gc: Option<&str>) -> serde_json::Value {
    let mut a = json!({"name": name, "path": format!("/out/{name}")});
    if let Some(s) = gc {
        a["artifactGC"] = json!({"strategy": s});
    }
    a
}

fn task(outs: Vec<serde_json::Value>) -> serde_json::Value {
    json!({"type": "pod", "outputs": {"artifacts": outs}})
}

#[test]
fn a_per_artifact_strategy_overrides_the_workflow_default() {
    let s = Strategies::of(&spec(json!({
        "artifactGC": {"strategy": "OnWorkflowDeletion"},
        "nodes": [{"id": "a", "task": task(vec![out("kept", Some("Never")), out("gone", None),
                                               out("early", Some("OnWorkflowCompletion"))])}]})));
    assert!(s.collects_any());
    assert_eq!(s.declared("a/0/kept"), Some(Strategy::Never));
    assert_eq!(s.declared("a/3/gone"), Some(Strategy::OnWorkflowDeletion));
    assert!(!s.collects("a/0/kept", true));
    assert!(s.collects("a/1/gone", true) && !s.collects("a/1/gone", false));
    assert!(s.collects("a/0/early", false) && s.collects("a/0/early", true));
    // Not a declared artifact (another part of the data plane): by the
    // default on deletion, never on completion.
    assert!(s.collects("a/0/logs/main.log", true));
    assert!(!s.collects("a/0/logs/main.log", false));
    assert!(s.collects("b/0/x", true));
    // Offloaded outputs and archived logs are no artifact's (an artifact's
    // name has no '.'): the default's, on deletion only.
    assert!(s.collects("a/0/outputs.json", true) && !s.collects("a/0/main.log", false));
    let logs_only = Strategies::of(&spec(
        json!({"artifactGC": {"strategy": "OnWorkflowDeletion"},
        "nodes": [{"id": "a", "task": {"type": "pod"}}]}),
    ));
    assert!(logs_only.collects_any());
}

#[test]
fn without_a_strategy_nothing_is_collected() {
    let s = Strategies::of(&spec(
        json!({"nodes": [{"id": "a", "task": task(vec![out("f", None)])}]}),
    ));
    assert!(!s.collects_any());
    assert!(!s.collects("a/0/f", true));
    assert!(!s.collects("a/0/other/thing", true));
    let one = Strategies::of(&spec(json!({"nodes": [{"id": "a",
        "task": task(vec![out("f", None), out("g", Some("OnWorkflowDeletion"))])}]})));
    assert!(one.collects_any());
    assert!(!one.collects("a/0/f", true) && one.collects("a/0/g", true));
}

#[test]
fn array_items_and_exit_handlers_find_their_declaration() {
    let s = Strategies::of(&spec(json!({
        "nodes": [{"id": "map", "array": {"over": [1, 2], "task": task(vec![out("f", Some("OnWorkflowCompletion"))])}},
                  {"id": "solo-2", "task": task(vec![out("g", Some("OnWorkflowDeletion"))])}],
        "onExit": [{"id": "report", "task": task(vec![out("r", Some("OnWorkflowDeletion"))])}]})));
    assert_eq!(
        s.declared("map-7/0/f"),
        Some(Strategy::OnWorkflowCompletion)
    );
    assert_eq!(s.declared("solo-2/0/g"), Some(Strategy::OnWorkflowDeletion));
    assert_eq!(s.declared("solo-2/0/f"), None, "solo is no array");
    assert_eq!(s.declared("report/1/r"), Some(Strategy::OnWorkflowDeletion));
    assert_eq!(s.declared("map/x/f"), None, "an attempt is a number");
}

#[test]
fn an_unknown_strategy_is_refused_naming_the_field() {
    let wrong = |v: serde_json::Value| {
        let e = serde_path_to_error::deserialize::<_, WorkflowSpec>(v).unwrap_err();
        format!("{}: {}", e.path(), e.inner())
    };
    let e = wrong(json!({"artifactGC": {"strategy": "Sometimes"}}));
    assert!(
        e.starts_with("artifactGC.strategy: unknown variant `Sometimes`"),
        "{e}"
    );
    assert!(e.contains("OnWorkflowDeletion"), "{e}");
    let e = wrong(
        json!({"nodes": [{"id": "a", "task": {"type": "pod", "outputs": {"artifacts": [
        {"name": "f", "path": "/f", "artifactGC": {"strategy": "Later"}}]}}}]}),
    );
    assert!(
        e.starts_with("nodes[0].task.outputs.artifacts[0].artifactGC.strategy: unknown variant"),
        "{e}"
    );
}

#[test]
fn an_s3_refusal_is_named_first() {
    let why = "list a/b/ in s3://x/weft: 403 Forbidden: <?xml version=\"1.0\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>";
    assert_eq!(
        super::s3_refusal(why).as_deref(),
        Some("AccessDenied: Access Denied")
    );
    assert_eq!(super::s3_refusal("connection refused"), None);
}
