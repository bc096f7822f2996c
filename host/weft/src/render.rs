//! The DAG as a picture: Graphviz dot and Mermaid, with node phases, for
//! `weft get NAME -o dot|mermaid`.

use std::fmt::Write;

use weft_dag::{NodePhase, WorkflowSpec, WorkflowStatus};

fn phase_of(status: Option<&WorkflowStatus>, id: &str) -> NodePhase {
    status
        .and_then(|s| s.nodes.get(id))
        .map_or(NodePhase::Pending, |n| n.phase)
}

fn colour(p: NodePhase) -> &'static str {
    match p {
        NodePhase::Pending => "#e0e0e0",
        NodePhase::Running | NodePhase::Retrying => "#90caf9",
        NodePhase::Succeeded => "#a5d6a7",
        NodePhase::Failed => "#ef9a9a",
        NodePhase::Skipped => "#fff59d",
        NodePhase::Aborted => "#bcaaa4",
    }
}

/// What a node runs, in a few words (`pod`, `array of pod`, `workflow
/// (template etl)`, `dynamic pod`, `gate`): the DAG's labels and `weft
/// template get`'s node table.
pub fn kind(n: &weft_dag::NodeSpec) -> String {
    use weft_dag::NodeKind;
    match (n.kind(), &n.task, &n.array, &n.workflow, &n.dynamic) {
        (NodeKind::Task, Some(t), ..) => t.task_type.clone(),
        (NodeKind::Array, _, Some(a), ..) => format!("array of {}", a.task.task_type),
        (NodeKind::Subworkflow, _, _, Some(w), _) => match &w.template_ref {
            Some(t) => format!("workflow (template {t})"),
            None => format!("workflow ({} nodes)", w.nodes.len()),
        },
        (NodeKind::Dynamic, .., Some(d)) => format!("dynamic {}", d.task.task_type),
        (kind, ..) => kind.name().into(),
    }
}

/// Graphviz dot.
pub fn dot(name: &str, spec: &WorkflowSpec, status: Option<&WorkflowStatus>) -> String {
    let mut out = format!(
        "digraph \"{name}\" {{\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\"];\n"
    );
    for n in &spec.nodes {
        let p = phase_of(status, &n.id);
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\\n{}\\n{:?}\", fillcolor=\"{}\"];",
            n.id,
            n.id,
            kind(n),
            p,
            colour(p)
        );
    }
    for n in &spec.nodes {
        for d in &n.depends_on {
            let _ = writeln!(out, "  \"{d}\" -> \"{}\";", n.id);
        }
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart.
pub fn mermaid(spec: &WorkflowSpec, status: Option<&WorkflowStatus>) -> String {
    // Mermaid ids cannot hold '-': use n0, n1... and show the real id.
    let mut out = String::from("flowchart LR\n");
    let idx = |id: &str| spec.nodes.iter().position(|n| n.id == id).unwrap_or(0);
    for (i, n) in spec.nodes.iter().enumerate() {
        let p = phase_of(status, &n.id);
        let _ = writeln!(out, "  n{i}[\"{}<br/>{}<br/>{:?}\"]", n.id, kind(n), p);
        let _ = writeln!(out, "  style n{i} fill:{}", colour(p));
    }
    for (i, n) in spec.nodes.iter().enumerate() {
        for d in &n.depends_on {
            let _ = writeln!(out, "  n{} --> n{i}", idx(d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_show_edges_and_phases() {
        let spec: WorkflowSpec = serde_yaml::from_str(
            "nodes:\n  - {id: a, task: {type: pod}}\n  - {id: b-c, dependsOn: [a], gate: {sleep: 1s}}",
        )
        .unwrap();
        let mut status = WorkflowStatus::default();
        status.nodes.insert(
            "a".into(),
            weft_dag::NodeStatus {
                phase: NodePhase::Succeeded,
                ..Default::default()
            },
        );
        let d = dot("wf", &spec, Some(&status));
        assert!(d.contains("\"a\" -> \"b-c\""), "{d}");
        assert!(d.contains("Succeeded") && d.contains("Pending"), "{d}");
        let m = mermaid(&spec, Some(&status));
        assert!(m.contains("n0 --> n1"), "{m}");
        assert!(m.contains("b-c<br/>gate<br/>Pending"), "{m}");
    }
}
