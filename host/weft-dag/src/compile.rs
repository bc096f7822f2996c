//! Validation and compilation: a [`WorkflowSpec`] becomes a [`Compiled`] DAG
//! or the full list of what is wrong with it, each problem naming its node.
//!
//! All problems are reported at once (a user fixing a 50-node workflow
//! should not need 50 round trips), and an invalid workflow starts nothing.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cel::Program;
use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::Value;

use crate::expr;
use crate::spec::{DEFAULT_SYSTEM_RETRIES, MountAs, SecretRef, WorkflowSpec};

/// The most nodes one workflow may have; beyond it the status would not
/// fit a Kubernetes object.
pub const MAX_NODES: usize = 20_000;

/// One thing wrong with a workflow spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The node it concerns, if any.
    pub node: Option<String>,
    /// The field, e.g. `dependsOn` or `retries.backoff`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(n) => write!(f, "node {n}: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// Joins problems into one message, one per line.
pub fn describe(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a node does.
#[derive(Debug, Clone)]
pub enum Kind {
    /// Runs one task.
    Task,
    /// Maps a task over a list.
    Array,
    /// Waits for a duration.
    Sleep(Duration),
    /// Waits for an approval.
    Approval,
}

/// Retry budgets and backoff, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// Retries after user failures.
    pub user: u32,
    /// Retries after system failures.
    pub system: u32,
    /// First delay.
    pub backoff: Duration,
    /// Largest delay.
    pub max_backoff: Duration,
}

impl Retries {
    /// The delay before attempt `n` (the first retry is n = 1).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

/// A node ready to schedule.
#[derive(Debug, Clone)]
pub struct CompiledNode {
    /// The node id.
    pub id: String,
    /// Indices of the nodes it depends on.
    pub deps: Vec<usize>,
    /// What it does.
    pub kind: Kind,
    /// Its condition, compiled.
    pub when: Option<Arc<Program>>,
    /// Per-attempt timeout.
    pub timeout: Option<Duration>,
    /// Retry budgets.
    pub retries: Retries,
}

/// A validated workflow: nodes in topological order plus the edges both ways.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Nodes, in the spec's order.
    pub nodes: Vec<CompiledNode>,
    /// Node id to index.
    pub index: HashMap<String, usize>,
    /// A topological order of node indices.
    pub order: Vec<usize>,
    /// For each node, the nodes that depend on it.
    pub dependents: Vec<Vec<usize>>,
    /// The workflow's active deadline.
    pub active_deadline: Option<Duration>,
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration like 30s or 10m: {e}"))
}

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

/// Why an input is named `true` or `false`: almost always a YAML 1.1
/// reader (kubectl's) that read a key such as `n`, `y`, `no` or `off` as a
/// boolean. Refused rather than run with the wrong name.
fn yaml11_boolean(name: &str) -> String {
    format!(
        "input named {name:?}: kubectl's YAML reader (YAML 1.1) turns keys such as n, y, yes, no, on and off into {name}; quote the name ('n') or choose another"
    )
}

/// What is wrong with a task's secrets, by index: Secret names are DNS
/// subdomains, keys what a Secret's data allows, variables C identifiers,
/// and no variable or file is given twice.
fn secret_problems(secrets: &[SecretRef]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut targets = HashSet::new();
    for (i, s) in secrets.iter().enumerate() {
        let subdomain = !s.name.is_empty()
            && s.name.len() <= 253
            && s.name.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !subdomain {
            out.push((i, format!("name {:?} is not a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.')", s.name)));
        }
        let key_ok = !s.key.is_empty()
            && s.key.len() <= 253
            && s.key != "."
            && s.key != ".."
            && s.key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
        if !key_ok {
            out.push((
                i,
                format!(
                    "key {:?} is not a Secret key (letters, digits, '-', '_' and '.')",
                    s.key
                ),
            ));
        }
        let target = match s.mount_as {
            MountAs::Env => {
                let var = s.env_var();
                let ident = var
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ident {
                    out.push((i, format!("envName {var:?} is not a variable name (letters, digits and '_', not starting with a digit)")));
                }
                format!("environment variable {var}")
            }
            MountAs::File => {
                if s.env_name.is_some() {
                    out.push((i, "envName is for mountAs: env; a file secret is at /etc/weft/secrets/NAME/KEY".into()));
                }
                format!("file {}", s.file_path())
            }
        };
        if !targets.insert(target.clone()) {
            out.push((i, format!("the {target} is given twice")));
        }
    }
    out
}

/// Validates a spec and compiles it. `known_task_type` says whether some
/// plugin serves a task type (the registry's answer).
pub fn compile(
    spec: &WorkflowSpec,
    known_task_type: &dyn Fn(&str) -> bool,
) -> Result<Compiled, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut problem = |node: Option<&str>, field: &str, message: String| {
        problems.push(Problem {
            node: node.map(str::to_string),
            field: field.to_string(),
            message,
        });
    };
    if spec.nodes.is_empty() {
        problem(None, "nodes", "a workflow needs at least one node".into());
    }
    if spec.nodes.len() > MAX_NODES {
        problem(
            None,
            "nodes",
            format!(
                "{} nodes, more than the limit of {MAX_NODES}",
                spec.nodes.len()
            ),
        );
    }
    if spec.parallelism == Some(0) {
        problem(
            None,
            "parallelism",
            "must be at least 1 (omit it for no limit)".into(),
        );
    }
    let active_deadline = match spec.active_deadline.as_deref().map(duration) {
        Some(Err(e)) => {
            problem(None, "activeDeadline", e);
            None
        }
        Some(Ok(d)) => Some(d),
        None => None,
    };

    let mut index = HashMap::with_capacity(spec.nodes.len());
    for (i, n) in spec.nodes.iter().enumerate() {
        if let Err(e) = node_id(&n.id) {
            problem(Some(&n.id), "id", e);
        }
        if index.insert(n.id.clone(), i).is_some() {
            problem(Some(&n.id), "id", "duplicate node id".into());
        }
    }

    let mut nodes = Vec::with_capacity(spec.nodes.len());
    for n in &spec.nodes {
        let id = Some(n.id.as_str());
        let mut deps = Vec::with_capacity(n.depends_on.len());
        let mut seen = HashSet::new();
        for d in &n.depends_on {
            match index.get(d) {
                Some(&j) => {
                    if seen.insert(j) {
                        deps.push(j);
                    }
                }
                None => problem(
                    id,
                    "dependsOn",
                    format!("{d:?} is not a node of this workflow"),
                ),
            }
        }
        let kinds = [n.task.is_some(), n.array.is_some(), n.gate.is_some()];
        let kind = match kinds {
            [true, false, false] => Kind::Task,
            [false, true, false] => Kind::Array,
            [false, false, true] => {
                let gate = n.gate.as_ref().expect("checked");
                match (&gate.sleep, &gate.approval) {
                    (Some(s), None) => match duration(s) {
                        Ok(d) => Kind::Sleep(d),
                        Err(e) => {
                            problem(id, "gate.sleep", e);
                            Kind::Approval
                        }
                    },
                    (None, Some(_)) => Kind::Approval,
                    _ => {
                        problem(id, "gate", "needs exactly one of sleep and approval".into());
                        Kind::Approval
                    }
                }
            }
            _ => {
                problem(
                    id,
                    "task",
                    "a node needs exactly one of task, array and gate".into(),
                );
                Kind::Task
            }
        };
        let tasks = n.task.iter().chain(n.array.as_ref().map(|a| &a.task));
        for t in tasks {
            let field = if n.array.is_some() {
                "array.task.type"
            } else {
                "task.type"
            };
            for (i, why) in secret_problems(&t.secrets) {
                let at = match n.array.is_some() {
                    true => format!("array.task.secrets[{i}]"),
                    false => format!("task.secrets[{i}]"),
                };
                problem(id, &at, why);
            }
            if t.task_type.is_empty() {
                problem(id, field, "is empty".into());
            } else if !known_task_type(&t.task_type) {
                problem(
                    id,
                    field,
                    format!("no plugin serves task type {:?}", t.task_type),
                );
            }
        }
        if let Some(a) = &n.array {
            match &a.over {
                Value::Array(_) => {}
                Value::String(s) if s.trim().starts_with("${") && s.trim().ends_with('}') => {}
                other => problem(
                    id,
                    "array.over",
                    format!("must be a list or a ${{...}} expression giving one, found {other}"),
                ),
            }
            if a.parallelism == Some(0) {
                problem(
                    id,
                    "array.parallelism",
                    "must be at least 1 (omit it for no limit)".into(),
                );
            }
            if a.min_successes.is_some() && a.min_success_ratio.is_some() {
                problem(
                    id,
                    "array",
                    "set minSuccesses or minSuccessRatio, not both".into(),
                );
            }
            if let Some(r) = a.min_success_ratio
                && !(0.0..=1.0).contains(&r)
            {
                problem(
                    id,
                    "array.minSuccessRatio",
                    format!("{r} is not between 0 and 1"),
                );
            }
            if let Err(es) = expr::template_exprs(&a.over) {
                es.into_iter().for_each(|e| problem(id, "array.over", e));
            }
        }
        let when = match &n.when {
            Some(src) => match expr::compile(src) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    problem(id, "when", e);
                    None
                }
            },
            None => None,
        };
        let mut exprs: Vec<(&str, String)> = Vec::new();
        if let Some(w) = &n.when {
            exprs.push(("when", w.clone()));
        }
        for name in n.inputs.keys().filter(|k| *k == "true" || *k == "false") {
            problem(id, "inputs", yaml11_boolean(name));
        }
        match expr::template_exprs(&Value::Object(n.inputs.clone())) {
            Ok(es) => exprs.extend(es.into_iter().map(|e| ("inputs", e))),
            Err(es) => es.into_iter().for_each(|e| problem(id, "inputs", e)),
        }
        if let Some(a) = &n.array
            && let Ok(es) = expr::template_exprs(&a.over)
        {
            exprs.extend(es.into_iter().map(|e| ("array.over", e)));
        }
        for (field, e) in &exprs {
            for r in expr::node_refs(e) {
                if !n.depends_on.contains(&r) {
                    problem(
                        id,
                        field,
                        format!(
                            "refers to nodes.{r} but does not depend on it (add it to dependsOn)"
                        ),
                    );
                }
            }
        }
        let timeout = match n.timeout.as_deref().map(duration) {
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => {
                problem(id, "timeout", e);
                None
            }
            None => None,
        };
        let mut retries = Retries {
            user: 0,
            system: DEFAULT_SYSTEM_RETRIES,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
        };
        if let Some(r) = &n.retries {
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
                        Err(e) => problem(id, field, e),
                    }
                }
            }
        }
        nodes.push(CompiledNode {
            id: n.id.clone(),
            deps,
            kind,
            when,
            timeout,
            retries,
        });
    }

    // The graph: petgraph finds a topological order, or the strongly
    // connected components that make cycles.
    let mut graph: DiGraph<usize, ()> = DiGraph::with_capacity(nodes.len(), nodes.len());
    let ids: Vec<NodeIndex> = (0..nodes.len()).map(|i| graph.add_node(i)).collect();
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            graph.add_edge(ids[d], ids[i], ());
        }
    }
    let order = match petgraph::algo::toposort(&graph, None) {
        Ok(order) => order.into_iter().map(|ix| graph[ix]).collect(),
        Err(_) => {
            for cycle in cycles(&graph, &nodes) {
                problem(
                    Some(&cycle[0]),
                    "dependsOn",
                    format!("cycle: {}", cycle.join(" -> ")),
                );
            }
            Vec::new()
        }
    };
    if !problems.is_empty() {
        return Err(problems);
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
    })
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
mod tests {
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
            pos("a") < pos("b")
                && pos("a") < pos("c")
                && pos("b") < pos("d")
                && pos("c") < pos("d")
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
        gate.gate = Some(crate::spec::GateSpec {
            sleep: Some("forever".into()),
            approval: None,
        });
        let array = NodeSpec {
            id: "arr".into(),
            array: Some(crate::spec::ArraySpec {
                over: serde_json::json!(7),
                min_success_ratio: Some(1.5),
                task: TaskSpec {
                    task_type: "pod".into(),
                    ..Default::default()
                },
                ..Default::default()
            }),
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
            has("node both: task: a node needs exactly one of task, array and gate"),
            "{p:#?}"
        );
        assert!(has("node g: gate.sleep"), "{p:#?}");
        assert!(has("node arr: array.over: must be a list"), "{p:#?}");
        assert!(has("node arr: array.minSuccessRatio"), "{p:#?}");
        assert!(has("parallelism: must be at least 1"), "{p:#?}");
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
}
