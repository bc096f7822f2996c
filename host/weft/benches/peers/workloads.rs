//! The workloads of the side-by-side bench, written once and rendered in
//! each peer's language: a Weft `Workflow`, an Argo `Workflow` and a Flyte
//! `FlyteWorkflow` of the same shape, whose every task is one pod (`busybox`, `true`) that kwok ends
//! after the bed's fixed duration. `PEERS_WRITE_WORKLOADS=DIR` writes each
//! rendering to DIR so a reader can see exactly what both controllers ran.

use serde_json::{Map, Value, json};

/// How a workflow's task nodes depend on each other.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// One task.
    One,
    /// `n` tasks, each after the one before.
    Chain(usize),
    /// `n` independent tasks, then one that depends on all of them.
    FanOutJoin(usize),
    /// `layers` layers of `width` tasks; task i of a layer depends on task
    /// i of the layer before.
    Layers { layers: usize, width: usize },
    /// `children` groups of `each` independent tasks. Weft runs each group
    /// as a sub-workflow node (a child Workflow); Argo, which has no child
    /// Workflow, as a nested DAG template inside the one Workflow.
    Tree { children: usize, each: usize },
    /// `children` sub-workflow nodes, each launching the WorkflowTemplate
    /// [`GROUP_TEMPLATE`] of `each` independent tasks ([`weft_setup`] makes
    /// it): the tree too large to write inline (100,000 nodes would make a
    /// parent of ~9 MB). Argo renders it as [`Shape::Tree`].
    TemplateTree { children: usize, each: usize },
}

/// The WorkflowTemplate a [`Shape::TemplateTree`]'s children launch.
pub const GROUP_TEMPLATE: &str = "group";

impl Shape {
    /// How many pods one workflow of this shape runs.
    pub fn pods(self) -> usize {
        match self {
            Shape::One => 1,
            Shape::Chain(n) => n,
            Shape::FanOutJoin(n) => n + 1,
            Shape::Layers { layers, width } => layers * width,
            Shape::Tree { children, each } | Shape::TemplateTree { children, each } => {
                children * each
            }
        }
    }

    /// The task nodes as (id, dependencies), for the flat shapes.
    fn tasks(self) -> Vec<(String, Vec<String>)> {
        match self {
            Shape::One => vec![("main".into(), vec![])],
            Shape::Chain(n) => (0..n)
                .map(|i| {
                    (
                        format!("n{i}"),
                        prev(i).map(|p| format!("n{p}")).into_iter().collect(),
                    )
                })
                .collect(),
            Shape::FanOutJoin(n) => {
                let mut t: Vec<_> = (0..n).map(|i| (format!("n{i}"), vec![])).collect();
                t.push(("join".into(), (0..n).map(|i| format!("n{i}")).collect()));
                t
            }
            Shape::Layers { layers, width } => (0..layers)
                .flat_map(|l| {
                    (0..width).map(move |i| {
                        let deps = prev(l).map(|p| format!("l{p}-{i}")).into_iter().collect();
                        (format!("l{l}-{i}"), deps)
                    })
                })
                .collect(),
            Shape::Tree { each, .. } | Shape::TemplateTree { each, .. } => {
                (0..each).map(|i| (format!("n{i}"), vec![])).collect()
            }
        }
    }
}

fn prev(i: usize) -> Option<usize> {
    i.checked_sub(1)
}

/// The one pod every task runs.
const IMAGE: &str = "busybox";

/// Weft's task for one pod of [`IMAGE`] running `true`.
fn weft_task() -> Value {
    json!({"type": "pod", "config": {"image": IMAGE, "command": ["true"]}})
}

/// The Weft Workflow `name` of `shape` (apiVersion weft.dev/v1alpha1).
pub fn weft(name: &str, shape: Shape) -> Value {
    let task = weft_task();
    let node = |(id, deps): (String, Vec<String>)| {
        let mut n = json!({"id": id, "task": task});
        if !deps.is_empty() {
            n["dependsOn"] = json!(deps);
        }
        n
    };
    let nodes: Vec<Value> = match shape {
        Shape::Tree { children, each } => {
            let inner: Vec<Value> = Shape::Tree { children, each }
                .tasks()
                .into_iter()
                .map(node)
                .collect();
            (0..children)
                .map(|c| json!({"id": format!("c{c}"), "workflow": {"nodes": inner}}))
                .collect()
        }
        Shape::TemplateTree { children, .. } => (0..children)
            .map(|c| json!({"id": format!("c{c}"), "workflow": {"templateRef": GROUP_TEMPLATE}}))
            .collect(),
        flat => flat.tasks().into_iter().map(node).collect(),
    };
    json!({
        "apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"nodes": nodes}
    })
}

/// The objects a Weft run of `shape` needs before its workflows: the
/// WorkflowTemplate of a [`Shape::TemplateTree`] (none for the others).
pub fn weft_setup(shape: Shape) -> Vec<Value> {
    let Shape::TemplateTree { each, .. } = shape else {
        return Vec::new();
    };
    let task = weft_task();
    let nodes: Vec<Value> = (0..each)
        .map(|i| json!({"id": format!("n{i}"), "task": task}))
        .collect();
    vec![json!({
        "apiVersion": "weft.dev/v1alpha1", "kind": "WorkflowTemplate",
        "metadata": {"name": GROUP_TEMPLATE},
        "spec": {"nodes": nodes}
    })]
}

/// The most tasks one DAG template may have in Argo's CRD (`maxItems` of
/// `templates[].dag.tasks` in manifests/base/crds/full).
const ARGO_MAX_DAG_TASKS: usize = 200;

/// The Argo Workflow `name` of `shape` (apiVersion argoproj.io/v1alpha1):
/// a container template, and a DAG template over it unless the shape is
/// one task.
pub fn argo(name: &str, shape: Shape) -> Value {
    let pod = json!({"name": "pod", "container": {"image": IMAGE, "command": ["true"]}});
    let dag = |tasks: Vec<(String, Vec<String>)>, template: &str| {
        let tasks: Vec<Value> = tasks
            .into_iter()
            .map(|(id, deps)| {
                let mut t = json!({"name": id, "template": template});
                if !deps.is_empty() {
                    t["dependencies"] = json!(deps);
                }
                t
            })
            .collect();
        json!({"tasks": tasks})
    };
    let templates = match shape {
        Shape::One => vec![json!({"name": "main", "container": pod["container"]})],
        Shape::Tree { children, each } | Shape::TemplateTree { children, each } => {
            let outer = (0..children).map(|c| (format!("c{c}"), vec![])).collect();
            let inner = Shape::Tree { children, each }.tasks();
            vec![
                json!({"name": "main", "dag": dag(outer, "group")}),
                json!({"name": "group", "dag": dag(inner, "pod")}),
                pod,
            ]
        }
        // Argo's CRD allows at most 200 tasks in one DAG template: wider
        // layers become `width` chains of `layers` tasks (the same
        // dependencies: task i of a layer after task i of the one before),
        // an outer DAG of chain templates.
        Shape::Layers { layers, width } if layers * width > ARGO_MAX_DAG_TASKS => {
            let outer = (0..width).map(|i| (format!("c{i}"), vec![])).collect();
            let chain = Shape::Chain(layers).tasks();
            vec![
                json!({"name": "main", "dag": dag(outer, "chain")}),
                json!({"name": "chain", "dag": dag(chain, "pod")}),
                pod,
            ]
        }
        flat => vec![
            json!({"name": "main", "dag": dag(flat.tasks(), "pod")}),
            pod,
        ],
    };
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"entrypoint": "main", "templates": templates}
    })
}

/// The FlyteWorkflow `name` of `shape` (apiVersion flyte.lyft.com/v1alpha1),
/// as flyteadmin would compile it: one `container` task (the same pod), a
/// task node per task, `start-node` before the roots and `end-node` after
/// the leaves, edges both ways (propeller walks `downstream` and waits on
/// `upstream`). A tree is one workflow of all its tasks: Flyte's
/// sub-workflows are inlined into the same object, and a launch plan per
/// group needs flyteadmin.
pub fn flyte(name: &str, shape: Shape) -> Value {
    let tasks = match shape {
        Shape::Tree { children, each } | Shape::TemplateTree { children, each } => (0..children
            * each)
            .map(|i| (format!("n{i}"), vec![]))
            .collect(),
        flat => flat.tasks(),
    };
    let ids: Vec<String> = tasks.iter().map(|(id, _)| id.clone()).collect();
    let (mut down, mut up) = (Map::new(), Map::new());
    for (id, deps) in &tasks {
        let deps: Vec<&str> = match deps.is_empty() {
            true => vec!["start-node"],
            false => deps.iter().map(String::as_str).collect(),
        };
        for d in deps {
            push(&mut up, id, d);
            push(&mut down, d, id);
        }
    }
    let leaves: Vec<&String> = ids
        .iter()
        .filter(|id| !down.contains_key(id.as_str()))
        .collect();
    for id in leaves {
        push(&mut down, id, "end-node");
        push(&mut up, "end-node", id);
    }
    let mut nodes = Map::new();
    nodes.insert(
        "start-node".into(),
        json!({"id": "start-node", "kind": "start"}),
    );
    nodes.insert("end-node".into(), json!({"id": "end-node", "kind": "end"}));
    for id in ids {
        let node = json!({"id": id, "kind": "task", "task": "pod", "resources": {}});
        nodes.insert(id, node);
    }
    let interface = json!({"inputs": {"variables": {}}, "outputs": {"variables": {}}});
    json!({
        "apiVersion": "flyte.lyft.com/v1alpha1", "kind": "FlyteWorkflow",
        "metadata": {"name": name},
        "executionId": {"project": "bench", "domain": "development", "name": name},
        "inputs": {},
        "tasks": {"pod": {
            "id": {"resourceType": "TASK", "project": "bench", "domain": "development",
                "name": "pod", "version": "v1"},
            "type": "container",
            "interface": interface,
            "container": {"image": IMAGE, "command": ["true"]}
        }},
        "spec": {"id": "bench", "nodes": nodes, "edges": {"downstream": down, "upstream": up}}
    })
}

/// Adds `v` to the list under `k`.
fn push(map: &mut Map<String, Value>, k: &str, v: &str) {
    if let Value::Array(a) = map.entry(k).or_insert_with(|| json!([])) {
        a.push(json!(v));
    }
}

/// One row of the bench: how many workflows of which shape are created at
/// once.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub key: &'static str,
    pub title: &'static str,
    pub workflows: usize,
    pub shape: Shape,
}

/// The five workloads, (a) to (e).
pub const WORKLOADS: [Workload; 5] = [
    Workload {
        key: "a",
        title: "1,000 one-node workflows at once",
        workflows: 1_000,
        shape: Shape::One,
    },
    Workload {
        key: "b",
        title: "100 ten-node chains",
        workflows: 100,
        shape: Shape::Chain(10),
    },
    Workload {
        key: "c",
        title: "20 workflows of a 100-node fan-out and a join",
        workflows: 20,
        shape: Shape::FanOutJoin(100),
    },
    Workload {
        key: "d",
        title: "one 1,000-node DAG (10 layers of 100)",
        workflows: 1,
        shape: Shape::Layers {
            layers: 10,
            width: 100,
        },
    },
    Workload {
        key: "e",
        title: "one 10,000-node workflow (100 groups of 100)",
        workflows: 1,
        shape: Shape::Tree {
            children: 100,
            each: 100,
        },
    },
];

/// The scale curve's points that no workload above already measures:
/// one workflow of 10 and of 100 nodes (the curve's 1,000 and 10,000 are
/// (d) and (e)), and 100 and 10,000 one-node workflows at once (1,000 is
/// (a)). [`SCALE_NODES`] and [`SCALE_WORKFLOWS`] order each curve.
pub const SCALE: [Workload; 4] = [
    Workload {
        key: "n10",
        title: "one 10-node DAG (1 layer of 10)",
        workflows: 1,
        shape: Shape::Layers {
            layers: 1,
            width: 10,
        },
    },
    Workload {
        key: "n100",
        title: "one 100-node DAG (10 layers of 10)",
        workflows: 1,
        shape: Shape::Layers {
            layers: 10,
            width: 10,
        },
    },
    Workload {
        key: "w100",
        title: "100 one-node workflows at once",
        workflows: 100,
        shape: Shape::One,
    },
    Workload {
        key: "w10000",
        title: "10,000 one-node workflows at once",
        workflows: 10_000,
        shape: Shape::One,
    },
];

/// The curve of nodes per workflow: (nodes, workload key).
pub const SCALE_NODES: [(usize, &str); 4] =
    [(10, "n10"), (100, "n100"), (1_000, "d"), (10_000, "e")];

/// The curve of concurrent one-node workflows: (workflows, workload key).
pub const SCALE_WORKFLOWS: [(usize, &str); 3] = [(100, "w100"), (1_000, "a"), (10_000, "w10000")];

/// The last goal row: a 100,000-node workflow (a tree) runs on
/// the real control plane with Weft's controller under 2 GiB. Weft only
/// (the row has no Argo figure); not in the default run (~40 minutes at
/// kube-scheduler's ~3,000 binds a minute): `PEERS_WORKLOADS=t`.
pub const TREE: Workload = Workload {
    key: "t",
    title: "one 100,000-node tree (100 sub-workflows of a 1,000-node WorkflowTemplate), Weft only",
    workflows: 1,
    shape: Shape::TemplateTree {
        children: 100,
        each: 1_000,
    },
};

/// Every workload the bench runs: the five, then the scale
/// curve's own points.
pub fn all() -> Vec<Workload> {
    WORKLOADS.iter().chain(&SCALE).copied().collect()
}

/// Every workload `PEERS_WORKLOADS` may name: [`all`] and [`TREE`].
pub fn named() -> Vec<Workload> {
    all().into_iter().chain([TREE]).collect()
}

/// Writes both renderings of every workload's first workflow to `dir`
/// (Weft's with the objects it needs first).
pub fn write_all(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for w in named() {
        let mut weft_docs = weft_setup(w.shape);
        weft_docs.push(weft("w-0", w.shape));
        let peers = [
            ("weft", weft_docs),
            ("argo", vec![argo("w-0", w.shape)]),
            ("flyte", vec![flyte("w-0", w.shape)]),
        ];
        for (lang, docs) in peers {
            let text = docs
                .iter()
                .map(serde_yaml::to_string)
                .collect::<Result<Vec<_>, _>>()?
                .join("---\n");
            std::fs::write(dir.join(format!("{}-{lang}.yaml", w.key)), text)?;
        }
    }
    Ok(())
}
