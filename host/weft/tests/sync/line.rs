//! The long-line tests' pieces: workflows that queue on one semaphore
//! and hold on until told, a sampler of the Lock, and the checks of the
//! line's end.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Api;
use weft::api::Workflow;
use weft::sync::Lock;
use weft_dag::WorkflowPhase;

use crate::common::cluster::Bed;
use crate::common::runs::{create, intervals, most_at_once, workflow};

/// What the sampler saw of a lock: the most holders, the most waiters
/// the object listed, and the most it said were kept beyond them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    holders: usize,
    listed: usize,
    beyond: u32,
}

/// Samples a Lock every 20 ms until stopped.
pub struct Sampler {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(locks: Api<Lock>, name: &str) -> Sampler {
        let (seen, stop) = (
            Arc::new(Mutex::new(Seen::default())),
            Arc::new(AtomicBool::new(false)),
        );
        let (s, st, name) = (seen.clone(), stop.clone(), name.to_string());
        let task = tokio::spawn(async move {
            while !st.load(Ordering::Relaxed) {
                if let Ok(Some(l)) = locks.get_opt(&name).await {
                    let mut s = s.lock().unwrap();
                    s.holders = s.holders.max(l.spec.holders.len());
                    s.listed = s.listed.max(l.spec.waiters.len());
                    s.beyond = s.beyond.max(l.spec.beyond);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Sampler { seen, stop, task }
    }

    /// Stops sampling: what it saw.
    pub async fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        *self.seen.lock().unwrap()
    }
}

/// `n` workflows `<prefix>-NN` on the semaphore `line` of 2, each of whose
/// run logs its start and end and holds on until `go` exists, so the
/// line is as long as the workflows created, however fast the machine.
pub async fn line_up(bed: &Bed, prefix: &str, n: usize, go: &Path, log: &Path) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:02}")).collect();
    for name in &names {
        let task = format!(
            "{{type: pod, config: {{image: busybox, command: [sh, -c, 'echo start {name} $(date +%s%N) >> {log}; until [ -e {go} ]; do sleep 0.05; done; sleep 0.1; echo end {name} $(date +%s%N) >> {log}']}}}}",
            log = log.display(),
            go = go.display()
        );
        let spec = format!(
            "  synchronization: {{semaphore: {{name: line, limit: 2}}}}\n  nodes:\n    - {{id: a, task: {task}}}\n"
        );
        create(bed, &workflow(name, &spec)).await;
    }
    names
}

/// The Lock `semaphore.line` once its line is longer than it lists.
pub async fn line_beyond(locks: &Api<Lock>) -> Lock {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(l)) = locks.get_opt("semaphore.line").await
            && l.spec.beyond > 0
        {
            return l;
        }
        assert!(Instant::now() < deadline, "no line beyond the Lock's");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every workflow of the line succeeded and ran once, never more than 2
/// at once; the Lock never held more than 2 or listed more than 16, had
/// a line beyond it, and is empty now.
pub async fn line_ran(done: &[Workflow], log: &Path, seen: Seen, locks: &Api<Lock>) {
    for wf in done {
        let s = wf.status.as_ref().unwrap();
        assert_eq!(s.phase, WorkflowPhase::Succeeded, "{:?}", s.message);
    }
    let runs = intervals(log);
    assert_eq!(runs.len(), done.len(), "each ran once: {runs:?}");
    assert!(most_at_once(&runs) <= 2, "{runs:?}");
    assert!(seen.holders <= 2 && seen.listed <= 16, "{seen:?}");
    assert!(seen.beyond > 0, "{seen:?}");
    let l = locks.get("semaphore.line").await.unwrap();
    assert!(
        l.spec.holders.is_empty() && l.spec.waiters.is_empty() && l.spec.beyond == 0,
        "{:?}",
        l.spec
    );
}
