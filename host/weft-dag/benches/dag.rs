//! DAG benchmarks at 10,000 nodes: validate+compile, one reconcile round
//! after one node changed, and the size of a finished workflow's status.
//! Run with `cargo bench -p weft-dag`; figures go to docs/benchmarks.md.

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use weft_dag::schedule::{Executor, RoundInput, TaskObservation, TaskRequest};
use weft_dag::{NodeSpec, TaskSpec, WorkflowSpec, WorkflowStatus, compile, reconcile};

/// 100 layers of 100 nodes; every node depends on two of the layer before.
fn spec(n: usize) -> WorkflowSpec {
    let width = 100;
    let nodes = (0..n)
        .map(|i| {
            let layer = i / width;
            let depends_on = if layer == 0 {
                vec![]
            } else {
                let prev = (layer - 1) * width;
                vec![
                    format!("n{}", prev + i % width),
                    format!("n{}", prev + (i + 1) % width),
                ]
            };
            NodeSpec {
                id: format!("n{i}"),
                depends_on,
                task: Some(TaskSpec {
                    task_type: "pod".into(),
                    config: json!({"image": "alpine:3", "command": ["true"]})
                        .as_object()
                        .cloned()
                        .unwrap(),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    WorkflowSpec {
        nodes,
        parallelism: Some(100),
        ..Default::default()
    }
}

/// Every task succeeds the second time it is looked at, except those listed
/// as still running.
struct Quick {
    seen: HashSet<(String, u32)>,
}

impl Executor for Quick {
    fn task(&mut self, req: &TaskRequest<'_>) -> TaskObservation {
        if self.seen.insert((req.node_id.to_string(), req.attempt)) {
            TaskObservation::in_progress("running")
        } else {
            TaskObservation::succeeded(json!({"rows": 1}).as_object().cloned())
        }
    }
    fn abort(&mut self, _: &TaskRequest<'_>) {}
}

fn bench(c: &mut Criterion) {
    let spec = spec(10_000);
    c.bench_function("validate+compile 10k nodes", |b| {
        b.iter(|| compile(black_box(&spec), &|t| t == "pod").expect("valid"))
    });

    // Drive the workflow halfway: 50 layers done, one layer running.
    let compiled = compile(&spec, &|t| t == "pod").unwrap();
    let approvals = HashSet::new();
    let rejections = HashMap::new();
    let mut now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut status = WorkflowStatus::default();
    let mut exec = Quick {
        seen: HashSet::new(),
    };
    for _ in 0..50 {
        now += Duration::from_secs(1);
        let input = RoundInput {
            now,
            generation: Some(1),
            approvals: &approvals,
            rejections: &rejections,
            deleting: false,
        };
        reconcile(&spec, &compiled, &mut status, &input, &mut exec);
    }
    let running = status
        .nodes
        .values()
        .filter(|s| s.phase == weft_dag::NodePhase::Running)
        .count();
    eprintln!(
        "mid-run state: {running} nodes running, progress {:?}",
        status.progress
    );
    c.bench_function("reconcile round 10k nodes, one changed", |b| {
        b.iter_batched(
            || {
                (
                    status.clone(),
                    Quick {
                        seen: exec.seen.clone(),
                    },
                )
            },
            |(mut st, mut ex)| {
                let input = RoundInput {
                    now: now + Duration::from_secs(1),
                    generation: Some(1),
                    approvals: &approvals,
                    rejections: &rejections,
                    deleting: false,
                };
                let out = reconcile(&spec, &compiled, &mut st, &input, &mut ex);
                (st, ex, out) // dropped outside the measurement
            },
            BatchSize::LargeInput,
        )
    });

    for _ in 0..500 {
        now += Duration::from_secs(1);
        let input = RoundInput {
            now,
            generation: Some(1),
            approvals: &approvals,
            rejections: &rejections,
            deleting: false,
        };
        reconcile(&spec, &compiled, &mut status, &input, &mut exec);
    }
    assert!(status.phase.is_terminal(), "{:?}", status.phase);
    let size = serde_json::to_vec(&status).unwrap().len();
    eprintln!(
        "status of a finished 10k-node workflow: {size} bytes ({:.2} MiB)",
        size as f64 / (1 << 20) as f64
    );
    let mut bare = status.clone();
    bare.nodes.values_mut().for_each(|n| n.outputs = None);
    let size = serde_json::to_vec(&bare).unwrap().len();
    eprintln!(
        "the same without outputs: {size} bytes ({:.2} MiB)",
        size as f64 / (1 << 20) as f64
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
