use super::*;

#[test]
fn a_node_s_kind_is_the_field_it_sets() {
    let node = |yaml: &str| -> NodeSpec { serde_yaml::from_str(yaml).unwrap() };
    let cases = [
        ("{id: a, task: {type: pod}}", NodeKind::Task, "task"),
        (
            "{id: a, array: {over: [1], task: {type: pod}}}",
            NodeKind::Array,
            "array",
        ),
        ("{id: a, gate: {sleep: 1s}}", NodeKind::Gate, "gate"),
        (
            "{id: a, dynamic: {task: {type: pod}}}",
            NodeKind::Dynamic,
            "dynamic",
        ),
        (
            "{id: a, workflow: {nodes: []}}",
            NodeKind::Subworkflow,
            "subworkflow",
        ),
    ];
    for (yaml, kind, name) in cases {
        let n = node(yaml);
        assert_eq!(n.kind(), kind, "{yaml}");
        assert_eq!(n.kind().name(), name);
    }
}
