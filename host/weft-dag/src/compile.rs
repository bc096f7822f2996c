//! Validation and compilation: a [`WorkflowSpec`] becomes a [`Compiled`] DAG
//! or the full list of what is wrong with it, each problem naming its node.
//!
//! All problems are reported at once (a user fixing a 50-node workflow
//! should not need 50 round trips), and an invalid workflow starts nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cel::Program;
use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::{Map, Value};

use crate::spec::NodeSpec;
use crate::spec::{DEFAULT_SYSTEM_RETRIES, WorkflowSpec};
use crate::{expr, inputs, nodes};

pub(crate) use crate::compiled::duration;
pub use crate::compiled::{CheckContext, Compiled, CompiledNode, Kind, MAX_NODES, Retries};
pub use crate::problem::{Problem, Problems, describe};

/// Argo's rule for DAG task names: letters of either case, digits and
/// '-', starting and ending with a letter or digit (at most 63, as it is
/// part of label values). Child resource names are derived from it and
/// made valid Kubernetes names (lower-cased, with a hash when altered), so
/// `A` and `a` never share a child.
fn node_id(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a node id: 1-63 letters, digits or '-', starting and ending with a letter or digit"
        ))
    }
}

/// Validates a spec and compiles it: a short sequence of passes, each of
/// which adds what it finds to one list. `known_task_type` says whether
/// some plugin serves a task type (the registry's answer).
pub fn compile(
    spec: &WorkflowSpec,
    known_task_type: &dyn Fn(&str) -> bool,
) -> Result<Compiled, Vec<Problem>> {
    compile_dag(spec, known_task_type, false)
}

/// [`compile`] of a main DAG, or of an exit handler's (`exit`: its nodes
/// may read `workflow.*`).
fn compile_dag(
    spec: &WorkflowSpec,
    known_task_type: &dyn Fn(&str) -> bool,
    exit: bool,
) -> Result<Compiled, Vec<Problem>> {
    let child = |spec: &WorkflowSpec| compile(spec, known_task_type);
    let cx = CheckContext {
        known_task_type,
        exit,
        compile: &child,
    };
    let mut p = Problems::default();
    let active_deadline = workflow_settings(spec, &mut p);
    let inputs = workflow_inputs(spec, &mut p);
    let index = node_index(spec, &mut p);
    let nodes: Vec<CompiledNode> = spec
        .nodes
        .iter()
        .map(|n| compile_node(spec, n, &index, &cx, &mut p))
        .collect();
    workflow_outputs(spec, &index, &mut p);
    let on_exit = exit_handler(spec, &index, known_task_type, &mut p);
    let order = topological_order(&nodes, &mut p);
    if !p.0.is_empty() {
        return Err(p.0);
    }
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            dependents[d].push(i);
        }
    }
    Ok(Compiled {
        nodes,
        index,
        order,
        dependents,
        active_deadline,
        inputs,
        on_exit,
    })
}

/// The names exit handler nodes read as `workflow.<name>`.
pub const WORKFLOW_VARIABLES: [&str; 4] = ["phase", "failures", "duration", "message"];

/// `spec.onExit`, compiled as a workflow with the main one's inputs and
/// settings; its node ids may not repeat the main DAG's (children are
/// named after node ids).
fn exit_handler(
    spec: &WorkflowSpec,
    index: &HashMap<String, usize>,
    known_task_type: &dyn Fn(&str) -> bool,
    p: &mut Problems,
) -> Option<Box<(WorkflowSpec, Compiled)>> {
    if spec.on_exit.is_empty() {
        return None;
    }
    for n in spec.on_exit.iter().filter(|n| index.contains_key(&n.id)) {
        p.add(
            Some(&n.id),
            "onExit",
            "is also a node of the main DAG; exit handler node ids must differ",
        );
    }
    let exit = WorkflowSpec {
        nodes: spec.on_exit.clone(),
        inputs: spec.inputs.clone(),
        parallelism: spec.parallelism,
        failure_policy: spec.failure_policy,
        ..Default::default()
    };
    match compile_dag(&exit, known_task_type, true) {
        Ok(c) => Some(Box::new((exit, c))),
        Err(problems) => {
            p.0.extend(problems.into_iter().map(|mut q| {
                q.field = format!("onExit: {}", q.field);
                q
            }));
            None
        }
    }
}

/// Workflow-wide settings: size, parallelism, deadline.
fn workflow_settings(spec: &WorkflowSpec, p: &mut Problems) -> Option<Duration> {
    if let Some(r) = &spec.workflow_template_ref {
        let why = match spec.nodes.is_empty() {
            true => format!(
                "template {:?} must be resolved before the workflow compiles",
                r.name
            ),
            false => "set nodes or workflowTemplateRef, not both".into(),
        };
        p.add(None, "workflowTemplateRef", why);
    } else if spec.nodes.is_empty() {
        p.add(None, "nodes", "a workflow needs at least one node");
    }
    if spec.nodes.len() > MAX_NODES {
        let n = spec.nodes.len();
        p.add(
            None,
            "nodes",
            format!("{n} nodes, more than the limit of {MAX_NODES}"),
        );
    }
    synchronization(spec.synchronization.as_ref(), None, p);
    if spec.parallelism == Some(0) {
        p.add(
            None,
            "parallelism",
            "must be at least 1 (omit it for no limit)",
        );
    }
    match spec.active_deadline.as_deref().map(duration) {
        Some(Err(e)) => {
            p.add(None, "activeDeadline", e);
            None
        }
        Some(Ok(d)) => Some(d),
        None => None,
    }
}

/// A workflow's or node's `synchronization` (a gate holds no locks).
fn synchronization(
    s: Option<&crate::spec::sync::Synchronization>,
    n: Option<&NodeSpec>,
    p: &mut Problems,
) {
    let Some(s) = s else {
        return;
    };
    let id = n.map(|n| n.id.as_str());
    for why in s.problems() {
        p.add(id, "synchronization", why);
    }
    if n.is_some_and(|n| n.gate.is_some()) {
        p.add(
            id,
            "synchronization",
            "a gate holds no locks (put it on the nodes after it)",
        );
    }
}

/// The workflow's input values, after checking the declarations.
fn workflow_inputs(spec: &WorkflowSpec, p: &mut Problems) -> Map<String, Value> {
    p.0.extend(inputs::check(&spec.inputs));
    inputs::values(&spec.inputs).unwrap_or_else(|e| {
        p.0.extend(e);
        Map::new()
    })
}

/// Node ids to indices; bad and duplicate ids.
fn node_index(spec: &WorkflowSpec, p: &mut Problems) -> HashMap<String, usize> {
    let mut index = HashMap::with_capacity(spec.nodes.len());
    for (i, n) in spec.nodes.iter().enumerate() {
        if let Err(e) = node_id(&n.id) {
            p.add(Some(&n.id), "id", e);
        }
        if index.insert(n.id.clone(), i).is_some() {
            p.add(Some(&n.id), "id", "duplicate node id");
        }
    }
    index
}

/// One node: its edges, its kind's own checks, its expressions, timeout
/// and retries.
fn compile_node(
    spec: &WorkflowSpec,
    n: &NodeSpec,
    index: &HashMap<String, usize>,
    cx: &CheckContext<'_>,
    p: &mut Problems,
) -> CompiledNode {
    let deps = dependencies(n, index, p);
    let kind = nodes::check(n, cx, p);
    let when = condition(n, p);
    expressions(spec, n, cx.exit, p);
    cache(n, p);
    synchronization(n.synchronization.as_deref(), Some(n), p);
    let timeout = match n.timeout.as_deref().map(duration) {
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            p.add(Some(&n.id), "timeout", e);
            None
        }
        None => None,
    };
    CompiledNode {
        id: n.id.clone(),
        deps,
        kind,
        when,
        timeout,
        retries: retries(n, p),
    }
}

fn dependencies(n: &NodeSpec, index: &HashMap<String, usize>, p: &mut Problems) -> Vec<usize> {
    let mut deps = Vec::with_capacity(n.depends_on.len());
    let mut seen = HashSet::new();
    for d in &n.depends_on {
        match index.get(d) {
            Some(&j) if seen.insert(j) => deps.push(j),
            Some(_) => {}
            None => p.add(
                Some(&n.id),
                "dependsOn",
                format!("{d:?} is not a node of this workflow"),
            ),
        }
    }
    deps
}

fn condition(n: &NodeSpec, p: &mut Problems) -> Option<Arc<Program>> {
    match expr::compile(n.when.as_deref()?) {
        Ok(prog) => Some(prog),
        Err(e) => {
            p.add(Some(&n.id), "when", e);
            None
        }
    }
}

/// The node's expressions (`when`, inputs, the kind's own) may only read
/// declared inputs and the nodes it depends on.
fn expressions(spec: &WorkflowSpec, n: &NodeSpec, exit: bool, p: &mut Problems) {
    let id = Some(n.id.as_str());
    let mut exprs: Vec<(&str, String)> = Vec::new();
    if let Some(w) = &n.when {
        exprs.push(("when", w.clone()));
    }
    for name in n.inputs.keys().filter(|k| *k == "true" || *k == "false") {
        p.add(id, "inputs", crate::problem::yaml11_boolean(name));
    }
    match expr::template_exprs(&Value::Object(n.inputs.clone())) {
        Ok(es) => exprs.extend(es.into_iter().map(|e| ("inputs", e))),
        Err(es) => es.into_iter().for_each(|e| p.add(id, "inputs", e)),
    }
    exprs.extend(nodes::expressions(n));
    for (field, e) in &exprs {
        for why in undeclared_inputs(spec, e) {
            p.add(id, field, why);
        }
        for why in workflow_refs(e, exit) {
            p.add(id, field, why);
        }
        for r in expr::node_refs(e) {
            if !n.depends_on.contains(&r) {
                p.add(
                    id,
                    field,
                    format!("refers to nodes.{r} but does not depend on it (add it to dependsOn)"),
                );
            }
        }
    }
}

/// `workflow.*` exists in exit handler nodes only, with the names of
/// [`WORKFLOW_VARIABLES`].
fn workflow_refs(src: &str, exit: bool) -> Vec<String> {
    let refs = expr::refs(src, "workflow");
    match exit {
        false if !refs.is_empty() => {
            vec!["refers to workflow.*, which only exit handler nodes (spec.onExit) see".into()]
        }
        false => Vec::new(),
        true => refs
            .into_iter()
            .filter(|r| !WORKFLOW_VARIABLES.contains(&r.as_str()))
            .map(|r| {
                format!(
                    "refers to workflow.{r}; an exit handler sees workflow.{}",
                    WORKFLOW_VARIABLES.join(", workflow.")
                )
            })
            .collect(),
    }
}

/// A node's `cache`: task nodes only, with a version and a readable maxAge.
fn cache(n: &NodeSpec, p: &mut Problems) {
    let Some(c) = &n.cache else { return };
    let id = Some(n.id.as_str());
    if n.task.is_none() {
        p.add(id, "cache", "only task nodes are cached");
    }
    if c.version.trim().is_empty() {
        p.add(id, "cache.version", "is empty (e.g. \"1\")");
    }
    if let Some(Err(e)) = c.max_age.as_deref().map(duration) {
        p.add(id, "cache.maxAge", e);
    }
}

fn retries(n: &NodeSpec, p: &mut Problems) -> Retries {
    let mut retries = Retries {
        user: 0,
        system: DEFAULT_SYSTEM_RETRIES,
        backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(300),
    };
    let Some(r) = &n.retries else {
        return retries;
    };
    retries.user = r.limit;
    retries.system = r.system_limit.unwrap_or(DEFAULT_SYSTEM_RETRIES);
    for (field, value, slot) in [
        ("retries.backoff", &r.backoff, &mut retries.backoff),
        (
            "retries.maxBackoff",
            &r.max_backoff,
            &mut retries.max_backoff,
        ),
    ] {
        if let Some(v) = value {
            match duration(v) {
                Ok(d) => *slot = d,
                Err(e) => p.add(Some(&n.id), field, e),
            }
        }
    }
    retries
}

/// `inputs.x` references to inputs the workflow does not declare.
fn undeclared_inputs(spec: &WorkflowSpec, src: &str) -> Vec<String> {
    expr::refs(src, "inputs")
        .into_iter()
        .filter(|r| !spec.inputs.contains_key(r))
        .map(|r| format!("refers to inputs.{r}, which the workflow does not declare"))
        .collect()
}

/// `spec.outputs`: bad expressions, unknown nodes and inputs.
fn workflow_outputs(spec: &WorkflowSpec, index: &HashMap<String, usize>, p: &mut Problems) {
    for (name, v) in &spec.outputs {
        let field = format!("outputs.{name}");
        let es = match expr::template_exprs(v) {
            Ok(es) => es,
            Err(es) => {
                es.into_iter().for_each(|e| p.add(None, &field, e));
                continue;
            }
        };
        for e in es {
            for why in undeclared_inputs(spec, &e) {
                p.add(None, &field, why);
            }
            for r in expr::node_refs(&e)
                .into_iter()
                .filter(|r| !index.contains_key(r))
            {
                p.add(
                    None,
                    &field,
                    format!("refers to nodes.{r}, which is not a node of this workflow"),
                );
            }
        }
    }
}

/// A topological order (petgraph), or the cycles that prevent one.
fn topological_order(nodes: &[CompiledNode], p: &mut Problems) -> Vec<usize> {
    let mut graph: DiGraph<usize, ()> = DiGraph::with_capacity(nodes.len(), nodes.len());
    let ids: Vec<NodeIndex> = (0..nodes.len()).map(|i| graph.add_node(i)).collect();
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            graph.add_edge(ids[d], ids[i], ());
        }
    }
    match petgraph::algo::toposort(&graph, None) {
        Ok(order) => order.into_iter().map(|ix| graph[ix]).collect(),
        Err(_) => {
            for cycle in cycles(&graph, nodes) {
                let msg = format!("cycle: {}", cycle.join(" -> "));
                p.add(Some(&cycle[0]), "dependsOn", msg);
            }
            Vec::new()
        }
    }
}

/// One cycle per strongly connected component that has one, as the path of
/// node ids that walks it (`a -> b -> a`).
fn cycles(graph: &DiGraph<usize, ()>, nodes: &[CompiledNode]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for scc in petgraph::algo::tarjan_scc(graph) {
        let members: HashSet<NodeIndex> = scc.iter().copied().collect();
        let start = scc[0];
        let self_loop = graph.contains_edge(start, start);
        if scc.len() == 1 && !self_loop {
            continue;
        }
        // Walk edges inside the component until a node repeats.
        let mut path = vec![start];
        let mut seen = HashMap::from([(start, 0usize)]);
        let mut at = start;
        loop {
            let next = graph
                .neighbors(at)
                .find(|n| members.contains(n))
                .expect("every node of a cyclic component has a successor in it");
            if let Some(&pos) = seen.get(&next) {
                let mut cycle: Vec<String> = path[pos..]
                    .iter()
                    .map(|&ix| nodes[graph[ix]].id.clone())
                    .collect();
                cycle.push(nodes[graph[next]].id.clone());
                out.push(cycle);
                break;
            }
            seen.insert(next, path.len());
            path.push(next);
            at = next;
        }
    }
    out
}

#[cfg(test)]
mod tests;
