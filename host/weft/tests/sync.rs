//! Synchronization (issue 44), with the real `weft controller` binary on
//! the dev cluster or the real control plane (`WEFT_TEST_CLUSTER=k8s`):
//! mutexes and semaphores at workflow and node level, held in `Lock`
//! objects that kubectl shows, across controller SIGKILLs and deletions.
//! Every pod appends its start and end (nanoseconds) to a file the test
//! reads: pods run as local processes on both beds, so overlap is
//! measured where the work happens, not inferred from phases.

mod common;
#[path = "sync/line.rs"]
mod line;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::Bed;
use common::runs::{
    create, intervals, most_at_once, recorded, statuses, succeeded, wait_all, workflow,
};
use common::{kubectl, weft};
use kube::Api;
use line::{Sampler, line_beyond, line_ran, line_up};
use weft::admin::pb;
use weft::api::Workflow;
use weft::sync::Lock;
use weft_dag::{NodePhase, WorkflowPhase};

/// Samples the Lock until `stop`: the most holders it ever had.
async fn most_holders(
    locks: Api<Lock>,
    name: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> usize {
    let mut most = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok(Some(l)) = locks.get_opt(&name).await {
            most = most.max(l.spec.holders.len());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_workflows_on_one_mutex_never_overlap_across_three_controller_kills() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let (port, config) = (common::free_port(), bed.path("admin.yaml"));
    let admin = format!("listen: 127.0.0.1:{port}\nmiddleware: []\n");
    std::fs::write(&config, admin).unwrap();
    let args = ["--admin-config", config.to_str().unwrap()];
    let mut controller = bed.controller("sync-0", &args);
    let names: Vec<String> = (0..10).map(|i| format!("mx-{i}")).collect();
    for name in &names {
        let spec = format!(
            "  synchronization: {{mutex: {{name: db}}}}\n  nodes:\n    - {{id: a, task: {}}}\n",
            recorded(name, &log, 0.6)
        );
        create(&bed, &workflow(name, &spec)).await;
    }
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn(most_holders(locks.clone(), "mutex.db".into(), stop.clone()));

    // While one holds it, the others wait Pending saying for what, and
    // kubectl shows the holder.
    let deadline = Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        let wfs = api.list(&Default::default()).await.unwrap().items;
        // (A waiter that asked before the Lock existed reads "waiting for
        // mutex/db" until the holder is known: wait for one that knows.
        // The holder itself, done within --status-hold, may never be
        // shown Running: the waiter's message names it.)
        let waiter = wfs.iter().find(|w| {
            w.status.as_ref().is_some_and(|s| {
                let known = s.message.as_deref().is_some_and(|m| m.contains("held by"));
                known
                    && s.synchronization
                        .as_ref()
                        .is_some_and(|x| x.waiting.is_some())
            })
        });
        if let Some(w) = waiter {
            break w.clone();
        }
        assert!(Instant::now() < deadline, "no holder and waiter seen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let status = waiting.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Pending);
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("waiting for mutex/db, held by mx-"),
        "{message}"
    );
    // kubectl shows the holder (runs are short: ask until one is seen).
    let mut table = String::new();
    for _ in 0..50 {
        let out = kubectl(&bed.kubeconfig, &["get", "locks", "-n", &bed.ns], None).await;
        table = String::from_utf8_lossy(&out.stdout).to_string();
        if table.contains("mutex.db") && table.contains("mx-") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        table.contains("mutex.db") && table.contains("mx-"),
        "{table}"
    );
    // The admin API's ListLocks shows the same.
    let mut client = common::admin_client(port).await;
    let request = pb::ListLocksRequest {
        namespace: bed.ns.clone(),
    };
    let locks_seen = client.list_locks(request).await.unwrap().into_inner().locks;
    let db = locks_seen
        .iter()
        .find(|l| l.lock == "mutex/db")
        .expect("mutex/db listed");
    assert_eq!(db.limit, 1);
    assert!(db.holders.len() <= 1 && !db.waiters.is_empty(), "{db:?}");
    assert!(
        db.waiters
            .iter()
            .all(|w| w.workflow.starts_with("mx-") && w.node.is_empty())
    );
    // And `weft list` says why the others are Pending.
    let out = weft(&bed.kubeconfig, &["list", "-n", &bed.ns]).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("Pending") && listed.contains("waiting for mutex/db"),
        "{listed}"
    );

    // SIGKILL the controller three times while a holder runs.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        controller.kill();
        controller = bed.controller("sync-0", &args);
    }
    let done = wait_all(&api, &names, 120).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.await.unwrap();
    for wf in &done {
        let s = wf.status.as_ref().unwrap();
        assert_eq!(
            s.phase,
            WorkflowPhase::Succeeded,
            "{}: {:?}",
            wf.metadata.name.as_deref().unwrap(),
            s.message
        );
    }
    let runs = intervals(&log);
    assert_eq!(runs.len(), 10, "{runs:?}");
    assert_eq!(most_at_once(&runs), 1, "two holders ran at once: {runs:?}");
    assert_eq!(most, 1, "the Lock listed {most} holders");
    // Nobody holds or waits once all are done.
    assert_free(&locks, "mutex.db").await;
    controller.kill();
    bed.stop().await;
}

/// A line longer than a Lock lists (16 waiters): the object
/// keeps its head and says how many more wait (`beyond`), kubectl and
/// `weft sync list` count them, and after a SIGKILL of the controller,
/// which held the rest of the line in memory, every workflow still runs,
/// never more than the limit at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_line_keeps_its_head_in_the_lock_and_survives_a_controller_kill() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-5", &[]);
    // Every run holds on until the test lets go, so the line is as long
    // as the workflows created, however fast the machine.
    let go = bed.path("go");
    let names = line_up(&bed, "line", 24, &go, &log).await;
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    let sampler = Sampler::start(locks.clone(), "semaphore.line");
    // Wait for a long line, and read it as users do.
    let lock = line_beyond(&locks).await;
    assert_eq!(lock.spec.waiters.len(), 16, "{:?}", lock.spec);
    let wide = kubectl(
        &bed.kubeconfig,
        &["get", "locks", "-n", &bed.ns, "-o", "wide"],
        None,
    )
    .await;
    let wide = String::from_utf8_lossy(&wide.stdout).to_string();
    assert!(wide.contains("BEYOND"), "{wide}");
    let out = weft(&bed.kubeconfig, &["sync", "list", "-n", &bed.ns]).await;
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    let row = listed
        .lines()
        .find(|l| l.contains("semaphore/line"))
        .unwrap_or_else(|| panic!("{listed}"));
    let waiting: usize = row.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(
        waiting > 16,
        "the line beyond the object is counted: {listed}"
    );

    // The controller that held the rest of the line goes; its successor
    // rebuilds the line from the waiting workflows.
    controller.kill();
    controller = bed.controller("sync-5", &[]);
    std::fs::write(&go, "").unwrap();
    let done = wait_all(&api, &names, 120).await;
    line_ran(&done, &log, sampler.stop().await, &locks).await;
    controller.kill();
    bed.stop().await;
}

/// The same long line shared by two shards (`--shards 2`): each holds
/// the waiters beyond the object that it wrote last, whichever shard
/// owns them, and shard 0 is SIGKILLed while the line is long. Every
/// workflow still runs once, never more than the limit at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_line_across_two_shards_runs_each_once_within_the_limit_through_a_kill() {
    let bed = Bed::start().await;
    let (log, go) = (bed.path("runs.log"), bed.path("go"));
    let shard = |i: u32| {
        let (shards, me) = ("--shards=2".to_string(), format!("--shard={i}"));
        bed.controller(&format!("shard-{i}"), &[shards.as_str(), me.as_str()])
    };
    let (mut first, second) = (shard(0), shard(1));
    let names = line_up(&bed, "two", 24, &go, &log).await;
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    let sampler = Sampler::start(locks.clone(), "semaphore.line");
    line_beyond(&locks).await;
    first.kill();
    first = shard(0);
    std::fs::write(&go, "").unwrap();
    let done = wait_all(&api, &names, 180).await;
    line_ran(&done, &log, sampler.stop().await, &locks).await;
    first.kill();
    drop(second);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_three_runs_twelve_nodes_at_most_three_at_once() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-1", &[]);
    let nodes: String = (0..12)
        .map(|i| {
            format!(
                "    - {{id: n{i}, synchronization: {{semaphore: {{name: three, limit: 3}}}}, task: {}}}\n",
                recorded(&format!("n{i}"), &log, 0.5)
            )
        })
        .collect();
    create(&bed, &workflow("sem", &format!("  nodes:\n{nodes}"))).await;
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);

    // Waiting nodes say so in `weft get`, naming the semaphore.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = weft(&bed.kubeconfig, &["get", "sem", "-n", &bed.ns]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        // (The very first round finds no Lock yet: "waiting for semaphore/three".)
        if text.contains("WaitingForLock")
            && text.contains("waiting for semaphore/three, held by sem/n")
        {
            assert!(text.contains("(3/3); number "), "{text}");
            // `weft sync list` shows the holders and the line.
            let out = weft(&bed.kubeconfig, &["sync", "list", "-n", &bed.ns]).await;
            let list = String::from_utf8_lossy(&out.stdout);
            let row = list
                .lines()
                .find(|l| l.contains("semaphore/three"))
                .unwrap_or_default();
            assert!(row.contains("sem/n"), "{list}");
            let wide = weft(
                &bed.kubeconfig,
                &["sync", "list", "-n", &bed.ns, "-o", "wide"],
            )
            .await;
            let wide = String::from_utf8_lossy(&wide.stdout);
            assert!(wide.contains("holds") && wide.contains("waits"), "{wide}");
            break;
        }
        assert!(Instant::now() < deadline, "no node seen waiting: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = succeeded(&api, "sem", 120).await;
    assert!(
        status
            .nodes
            .values()
            .all(|n| n.phase == NodePhase::Succeeded && n.reason.is_none())
    );
    let runs = intervals(&log);
    assert_eq!(runs.len(), 12, "{runs:?}");
    let most = most_at_once(&runs);
    assert!(most <= 3, "{most} nodes ran at once: {runs:?}");
    assert_eq!(most, 3, "the semaphore never filled: {runs:?}");
    controller.kill();
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_holder_hands_its_lock_over_within_a_second() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-2", &[]);
    let spec = |secs: f64, who: &str| on_mutex("one", who, &log, secs);
    create(&bed, &workflow("holder", &spec(60.0, "holder"))).await;
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    until_logged(&log, "start holder").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    create(&bed, &workflow("next", &spec(0.1, "next"))).await;
    loop {
        let l = locks.get("mutex.one").await.unwrap();
        if l.spec.waiters.iter().any(|w| w.workflow == "next") {
            break;
        }
        assert!(Instant::now() < deadline, "next never queued: {:?}", l.spec);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = kubectl(
        &bed.kubeconfig,
        &[
            "delete",
            "workflow",
            "holder",
            "-n",
            &bed.ns,
            "--wait=false",
        ],
        None,
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deleted = Instant::now();
    loop {
        let l = locks.get("mutex.one").await.unwrap();
        if l.spec.holders.iter().any(|h| h.workflow == "next") {
            assert!(
                l.spec.holders.iter().all(|h| h.workflow != "holder"),
                "{:?}",
                l.spec
            );
            break;
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(5),
            "not handed over: {:?}",
            l.spec
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = deleted.elapsed();
    assert!(took <= Duration::from_secs(1), "handed over after {took:?}");
    let wf = wait_all(&api, &["next".to_string()], 60).await.remove(0);
    assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Succeeded);
    controller.kill();
    bed.stop().await;
}

/// A holder deleted while no controller runs leaves its entry in the
/// Lock (nothing saw it go): the next controller's first sweep, once its
/// caches are listed, releases it, and the waiter starts within seconds
/// rather than after the sweep's 30 s period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_deleted_while_no_controller_ran_is_released_at_the_next_start() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-7", &[]);
    let spec = |secs: f64, who: &str| on_mutex("gone", who, &log, secs);
    create(&bed, &workflow("holder", &spec(120.0, "holder"))).await;
    until_logged(&log, "start holder").await;
    controller.kill();
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    let held = locks.get("mutex.gone").await.unwrap();
    assert!(
        held.spec.holders.iter().any(|h| h.workflow == "holder"),
        "{:?}",
        held.spec
    );
    let args = ["delete", "workflow", "holder", "-n", &bed.ns, "--wait=true"];
    let out = kubectl(&bed.kubeconfig, &args, None).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    create(&bed, &workflow("next", &spec(0.1, "next"))).await;

    let started = Instant::now();
    controller = bed.controller("sync-7", &[]);
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    succeeded(&api, "next", 60).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "next waited {took:?} for a holder that was gone"
    );
    assert_free(&locks, "mutex.gone").await;
    controller.kill();
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_parallelism_one_queued_workflows_start_by_priority_then_creation() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-3", &["--parallelism", "1"]);
    let spec = |priority: i32, task: String| {
        format!("  priority: {priority}\n  nodes:\n    - {{id: a, task: {task}}}\n")
    };
    // The first takes the only slot and keeps it until the five are in
    // line behind it (how long that takes is the machine's business, not
    // the test's).
    let release = bed.path("release-first");
    let first = format!(
        "{{type: pod, config: {{image: busybox, command: [sh, -c, 'echo start first $(date +%s%N) >> {log}; until [ -e {release} ]; do sleep 0.05; done; echo end first $(date +%s%N) >> {log}']}}}}",
        log = log.display(),
        release = release.display()
    );
    create(&bed, &workflow("first", &spec(0, first))).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("start first")
    {
        assert!(
            Instant::now() < deadline,
            "the first workflow never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let queued = [
        ("low-1", 1),
        ("high-1", 3),
        ("low-2", 1),
        ("mid", 2),
        ("high-2", 3),
    ];
    for (name, priority) in queued {
        let task = recorded(name, &log, 0.2);
        create(&bed, &workflow(name, &spec(priority, task))).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::all(bed.client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The controller-wide lock lives in the controller's namespace.
        let all = locks.list(&Default::default()).await.unwrap().items;
        let waiting = all
            .into_iter()
            .filter(|l| l.metadata.name.as_deref() == Some("parallelism.controller"))
            .flat_map(|l| l.spec.waiters)
            .filter(|c| queued.iter().any(|(n, _)| *n == c.workflow))
            .count();
        if waiting >= queued.len() {
            break;
        }
        assert!(Instant::now() < deadline, "{waiting} of the five in line");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its waiting status is written once the status hold (2 s) ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = loop {
        let s = api.get("low-2").await.unwrap().status.unwrap_or_default();
        if s.message.is_some() || Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(waiting.phase, WorkflowPhase::Pending, "{waiting:?}");
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.starts_with("waiting for parallelism/controller, held by first (1/1)"),
        "{message}"
    );
    std::fs::write(&release, "").unwrap();
    let names: Vec<String> = std::iter::once("first")
        .chain(queued.iter().map(|(n, _)| *n))
        .map(String::from)
        .collect();
    for wf in wait_all(&api, &names, 120).await {
        assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Succeeded);
    }
    let mut runs = intervals(&log);
    runs.sort_by_key(|(_, start, _)| *start);
    let order: Vec<&str> = runs.iter().map(|(who, ..)| who.as_str()).collect();
    assert_eq!(
        order,
        ["first", "high-1", "high-2", "mid", "low-1", "low-2"]
    );
    assert_eq!(most_at_once(&runs), 1, "{runs:?}");
    controller.kill();
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_pool_caps_a_task_type_across_workflows_of_a_namespace() {
    let bed = Bed::start().await;
    let log = bed.path("runs.log");
    let mut controller = bed.controller("sync-4", &["--resource-pool", "pod=2"]);
    // Two workflows of three pod nodes each share the namespace's pool.
    for w in ["pool-a", "pool-b"] {
        let nodes: String = (0..3)
            .map(|i| {
                format!(
                    "    - {{id: n{i}, task: {}}}\n",
                    recorded(&format!("{w}/n{i}"), &log, 0.4)
                )
            })
            .collect();
        create(&bed, &workflow(w, &format!("  nodes:\n{nodes}"))).await;
    }
    // And an array of four pod items: each item is a task of its own,
    // with its own slot (the array sets no parallelism of its own).
    let item = format!(
        "{{type: pod, config: {{image: busybox, command: [sh, -c, 'echo start pool-c/$WEFT_INPUT_WHO $(date +%s%N) >> {log}; sleep 0.4; echo end pool-c/$WEFT_INPUT_WHO $(date +%s%N) >> {log}']}}}}",
        log = log.display()
    );
    let array = format!(
        "  nodes:\n    - id: each\n      inputs: {{who: '${{item}}'}}\n      array: {{over: [i0, i1, i2, i3], task: {item}}}\n"
    );
    create(&bed, &workflow("pool-c", &array)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = weft(&bed.kubeconfig, &["get", "pool-b", "-n", &bed.ns]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("WaitingForResources")
            && text.contains("waiting for pool/pod, held by pool-")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no node seen waiting for the pool: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let names = ["pool-a", "pool-b", "pool-c"].map(String::from);
    for wf in wait_all(&api, &names, 120).await {
        let status = wf.status.unwrap();
        assert_eq!(
            status.phase,
            WorkflowPhase::Succeeded,
            "{:?}",
            status.message
        );
        assert!(
            status.nodes.values().all(|n| n.reason.is_none()),
            "{:?}",
            status.nodes
        );
    }
    let runs = intervals(&log);
    assert_eq!(runs.len(), 10, "{runs:?}");
    assert!(runs.iter().any(|(who, ..)| who == "pool-c/i3"), "{runs:?}");
    assert_eq!(most_at_once(&runs), 2, "{runs:?}");
    controller.kill();
    bed.stop().await;
}

/// Asserts the Lock `name` has neither holders nor waiters.
async fn assert_free(locks: &Api<Lock>, name: &str) {
    let l = locks.get(name).await.unwrap();
    let spec = &l.spec;
    assert!(
        spec.holders.is_empty() && spec.waiters.is_empty(),
        "{name}: {spec:?}"
    );
}

/// A workflow of one recorded task of `secs` holding mutex `lock`.
fn on_mutex(lock: &str, who: &str, log: &Path, secs: f64) -> String {
    format!(
        "  synchronization: {{mutexes: [{{name: {lock}}}]}}\n  nodes:\n    - {{id: a, task: {}}}\n",
        recorded(who, log, secs)
    )
}

/// Waits until `log` records `what`.
async fn until_logged(log: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(what)
    {
        assert!(Instant::now() < deadline, "never logged: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A task that records its start, runs until `release` exists, and
/// records its end.
fn held_until(who: &str, log: &Path, release: &Path) -> String {
    format!(
        "{{type: pod, config: {{image: busybox, command: [sh, -c, 'echo start {who} $(date +%s%N) >> {log}; until [ -e {release} ]; do sleep 0.05; done; echo end {who} $(date +%s%N) >> {log}']}}}}",
        log = log.display(),
        release = release.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_lock_starts_its_workflow_at_once_and_a_waiter_first_says_its_place() {
    let bed = Bed::start().await;
    let (log, release) = (bed.path("runs.log"), bed.path("release"));
    let mut controller = bed.controller("sync-gate", &[]);
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let seen = statuses(api.clone(), &["solo", "second"]);
    let spec = |task: String| {
        format!(
            "  synchronization: {{mutex: {{name: m}}}}\n  nodes:\n    - {{id: a, task: {task}}}\n"
        )
    };
    create(
        &bed,
        &workflow("solo", &spec(held_until("solo", &log, &release))),
    )
    .await;
    until_logged(&log, "start solo").await;
    create(
        &bed,
        &workflow("second", &spec(recorded("second", &log, 0.1))),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = api.get("second").await.unwrap().status.unwrap_or_default();
        if s.synchronization
            .as_ref()
            .is_some_and(|x| x.waiting.is_some())
        {
            break;
        }
        assert!(Instant::now() < deadline, "second never waited: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&release, "").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(120), seen)
        .await
        .expect("both finished")
        .unwrap();
    // The free mutex: taken in the first reconcile, never a waiting status.
    let solo = &seen["solo"];
    assert_eq!(solo.last().unwrap().phase, WorkflowPhase::Succeeded);
    for s in solo {
        let waited = s.synchronization.as_ref().and_then(|x| x.waiting.clone());
        assert!(waited.is_none(), "solo waited: {s:?}");
    }
    // The waiter: its first waiting status names the holder and its place.
    let second = &seen["second"];
    let first_wait = second
        .iter()
        .find(|s| {
            s.synchronization
                .as_ref()
                .is_some_and(|x| x.waiting.is_some())
        })
        .unwrap();
    let message = first_wait.message.clone().unwrap_or_default();
    assert_eq!(
        message, "waiting for mutex/m, held by solo (1/1); number 1 in line",
        "{second:?}"
    );
    assert_eq!(second.last().unwrap().phase, WorkflowPhase::Succeeded);
    assert_eq!(intervals(&log).len(), 2);
    controller.kill();
    bed.stop().await;
}

/// A wait that ends within `--status-hold` writes no waiting status: the
/// waiter is in the Lock's line (kubectl shows it) while its status stays
/// unwritten, and the status written next is its start's, so it never
/// shows a waiting status at all. (A longer wait is written when the hold
/// ends: the test above, at the default 2 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_shorter_than_the_status_hold_writes_no_waiting_status() {
    let bed = Bed::start().await;
    let (log, release) = (bed.path("runs.log"), bed.path("release"));
    let mut controller = bed.controller("sync-short", &["--status-hold", "60s"]);
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &bed.ns);
    let seen = statuses(api.clone(), &["first", "short"]);
    let spec = |task: String| {
        format!(
            "  synchronization: {{mutex: {{name: brief}}}}\n  nodes:\n    - {{id: a, task: {task}}}\n"
        )
    };
    create(
        &bed,
        &workflow("first", &spec(held_until("first", &log, &release))),
    )
    .await;
    until_logged(&log, "start first").await;
    create(
        &bed,
        &workflow("short", &spec(recorded("short", &log, 0.1))),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lock = locks.get_opt("mutex.brief").await.unwrap();
        let waiters = lock.map(|l| l.spec.waiters).unwrap_or_default();
        if waiters.iter().any(|c| c.workflow == "short") {
            break;
        }
        assert!(Instant::now() < deadline, "short never joined the line");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waiting = api.get("short").await.unwrap();
    assert!(waiting.status.is_none(), "{:?}", waiting.status);
    std::fs::write(&release, "").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(120), seen)
        .await
        .expect("both finished")
        .unwrap();
    for s in &seen["short"] {
        let waited = s.synchronization.as_ref().and_then(|x| x.waiting.clone());
        assert!(waited.is_none(), "short wrote a waiting status: {s:?}");
    }
    assert_eq!(
        seen["short"].last().unwrap().phase,
        WorkflowPhase::Succeeded
    );
    let runs = intervals(&log);
    assert_eq!(runs.len(), 2, "{runs:?}");
    controller.kill();
    bed.stop().await;
}

/// `--parallelism` keeps its Lock in the controller's namespace: a
/// Workflow of another namespace that becomes its holder is woken in its
/// own (it waited for the next minute's reconcile before). On the dev
/// cluster only: on the shared control plane a test's controller watches
/// its own namespace, where the controller-wide Lock then lives too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_wide_limit_wakes_a_workflow_of_another_namespace() {
    let bed = Bed::start().await;
    if bed.watched().is_some() {
        return bed.stop().await;
    }
    let home = bed.namespace_beside("home").await;
    let (log, release) = (bed.path("runs.log"), bed.path("release"));
    let args = [
        "--parallelism",
        "1",
        "--leader-elect-namespace",
        home.as_str(),
    ];
    let mut controller = bed.controller("sync-home", &args);
    let spec = |task: String| format!("  nodes:\n    - {{id: a, task: {task}}}\n");
    create(
        &bed,
        &workflow("one", &spec(held_until("one", &log, &release))),
    )
    .await;
    until_logged(&log, "start one").await;
    create(&bed, &workflow("two", &spec(recorded("two", &log, 0.1)))).await;
    let locks: Api<Lock> = Api::namespaced(bed.client.clone(), &home);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = locks.get_opt("parallelism.controller").await.unwrap();
        let waiter = l
            .iter()
            .flat_map(|l| &l.spec.waiters)
            .find(|c| c.workflow == "two");
        if let Some(c) = waiter {
            assert_eq!(c.namespace.as_deref(), Some(bed.ns.as_str()), "{c:?}");
            break;
        }
        assert!(Instant::now() < deadline, "two never queued: {l:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&release, "").unwrap();
    let api: Api<Workflow> = Api::namespaced(bed.client.clone(), &bed.ns);
    for wf in wait_all(&api, &["one".into(), "two".into()], 120).await {
        assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Succeeded);
    }
    let runs = intervals(&log);
    let at = |who: &str, end: bool| {
        let r = runs.iter().find(|r| r.0 == who).unwrap();
        if end { r.2 } else { r.1 }
    };
    // Woken by the release, not by the minute's requeue of a waiter.
    let gap = Duration::from_nanos((at("two", false) - at("one", true)) as u64);
    assert!(
        gap < Duration::from_secs(20),
        "two started {gap:?} after one ended"
    );
    controller.kill();
    bed.stop().await;
}
