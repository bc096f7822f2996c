//! Execution history end to end (issue 43): real `weft controller`
//! processes recording into a real PostgreSQL (Debian's server, one
//! cluster for the file and one more for the test that stops it), every
//! outcome read from the database's rows. On the dev cluster and, with
//! `WEFT_TEST_CLUSTER=k8s`, on kube-apiserver with `weft node` running
//! the pods.

#[path = "history/bed.rs"]
mod bed;
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use sqlx::Row;
use weft::admin::pb;
use weft::api::Workflow;
use weft_dag::WorkflowPhase;

use bed::HistoryBed;

/// (kind, node, attempt, phase): an event's id within its workflow.
type EventKey = (String, String, i64, String);

/// A two-node workflow: `make` writes an output; `flaky` fails its first
/// attempt (its pod's name ends in `-0`) and succeeds after a 1 s
/// back-off.
fn flaky_spec() -> Value {
    let pod = |script: &str| {
        json!({"type": "pod", "config": {"image": "busybox:1.36",
            "command": ["sh", "-c"], "args": [script]}})
    };
    json!({"nodes": [
        {"id": "make", "task": pod("echo '{\"n\": 7}' > /dev/termination-log")},
        {"id": "flaky", "dependsOn": ["make"], "retries": {"limit": 1, "backoff": "1s"},
         "task": pod("case \"$HOSTNAME\" in *-0) exit 3 ;; esac")}]})
}

/// The events [`flaky_spec`] makes, each exactly once.
fn flaky_events() -> Vec<EventKey> {
    let mut keys = vec![
        ("workflow", "", 1, "Running"),
        ("workflow", "", 1, "Succeeded"),
    ];
    for kind in ["node", "task"] {
        keys.extend([
            (kind, "make", 1, "Running"),
            (kind, "make", 1, "Succeeded"),
            (kind, "flaky", 1, "Running"),
            (kind, "flaky", 1, "Retrying"),
            (kind, "flaky", 2, "Running"),
            (kind, "flaky", 2, "Succeeded"),
        ]);
    }
    let mut keys: Vec<EventKey> = keys
        .into_iter()
        .map(|(k, n, a, p)| (k.into(), n.into(), a, p.into()))
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaves_each_event_once_and_its_archive_with_outputs() {
    let url = common::postgres::database("one_run").await;
    let t = HistoryBed::start(url).await;
    t.create("flaky", flaky_spec()).await;
    let wf = t.finish("flaky").await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    let uid = wf.uid().unwrap();
    let archived = t.archived(&uid, 30).await;
    assert_eq!(t.events(&uid).await, flaky_events());

    // The archive is the final object: the node timeline and outputs.
    let status = &archived["status"];
    assert_eq!(status["phase"], "Succeeded");
    assert_eq!(status["nodes"]["make"]["outputs"], json!({"n": 7}));
    assert_eq!(status["nodes"]["flaky"]["attempts"], 2);
    assert!(status["nodes"]["flaky"]["startedAt"].is_string());
    assert_eq!(archived["metadata"]["labels"]["team"], "ml");
    assert!(archived["metadata"].get("managedFields").is_none());

    // The rows a user filters on, and the events' details.
    let pool = common::postgres::pool(&t.url).await;
    let row = sqlx::query(
        "SELECT namespace, name, phase, started_at, finished_at, size_bytes FROM executions \
         WHERE uid = $1",
    )
    .bind(&uid)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.get::<String, _>("namespace"), t.bed.ns);
    assert_eq!(row.get::<String, _>("phase"), "Succeeded");
    assert!(row.get::<i64, _>("finished_at") >= row.get::<i64, _>("started_at"));
    assert!(row.get::<i64, _>("size_bytes") > 100);
    let label = sqlx::query("SELECT value FROM execution_labels WHERE uid = $1 AND key = 'team'")
        .bind(&uid)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(label.get::<String, _>("value"), "ml");
    let make = sqlx::query(
        "SELECT outputs, plugin, plugin_digest, resource FROM events WHERE workflow_uid = $1 \
         AND node = 'make' AND phase = 'Succeeded' AND kind = $2",
    );
    let node = make.bind(&uid).bind("node").fetch_one(&pool).await.unwrap();
    let outputs: Value = serde_json::from_str(&node.get::<String, _>("outputs")).unwrap();
    assert_eq!(outputs, json!({"n": 7}));
    let task = sqlx::query(
        "SELECT plugin, plugin_digest, resource, message FROM events WHERE workflow_uid = $1 \
         AND node = 'flaky' AND attempt = 1 AND phase = 'Retrying' AND kind = 'task'",
    )
    .bind(&uid)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(task.get::<String, _>("plugin"), "pod");
    assert!(
        task.get::<String, _>("plugin_digest")
            .starts_with("sha256:")
    );
    assert_eq!(task.get::<String, _>("resource"), "v1/Pod/flaky-flaky-0");
    let message: Option<String> = task.get("message");
    assert!(
        message.is_some_and(|m| m.contains('3')),
        "the exit code is told"
    );
    pool.close().await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_down_for_a_minute_and_five_sigkills_lose_and_duplicate_nothing() {
    // A server of its own: this test stops it.
    let pg = common::postgres::Postgres::start();
    let url = pg.database("outage").await;
    let mut t = HistoryBed::start(url).await;
    let names: Vec<String> = (0..20).map(|i| format!("run-{i}")).collect();
    for n in &names {
        t.create(n, flaky_spec()).await;
    }
    // Mid-run: the first has started (or already finished: the others
    // have not).
    common::wait_workflow(&t.api(), &names[0], |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase != WorkflowPhase::Pending)
    })
    .await;
    pg.stop();
    let stopped = Instant::now();
    let mut degraded = String::new();
    for _ in 0..100 {
        degraded = common::http_get(t.controller().metrics_port, "/readyz")
            .await
            .unwrap_or_default();
        if degraded.contains("history: degraded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        degraded.contains("history: degraded"),
        "/readyz: {degraded}"
    );
    let metrics = t.controller().metrics().await;
    assert_eq!(common::sample(&metrics, "weft_history_up"), Some(0.0));

    // Five crashes while the database is away: the events are only in
    // the Workflows' status outboxes then.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        t.kill_controller();
        t.start_controller();
    }
    let mut uids = BTreeMap::new();
    for n in &names {
        let wf = t.finish(n).await;
        let phase = wf.status.as_ref().unwrap().phase;
        assert_eq!(phase, WorkflowPhase::Succeeded, "{n}");
        uids.insert(n.clone(), wf.uid().unwrap());
    }
    // The last controller (once it holds the lease) has found the
    // finished Workflows' events in their outboxes.
    let mut pending = None;
    for _ in 0..300 {
        let metrics = t.controller().metrics().await;
        pending = common::sample(&metrics, "weft_history_outbox_pending");
        if pending.is_some_and(|p| p > 0.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pending.is_some_and(|p| p > 0.0), "pending: {pending:?}");
    if let Some(left) = Duration::from_secs(60).checked_sub(stopped.elapsed()) {
        tokio::time::sleep(left).await;
    }
    pg.restart();

    for (n, uid) in &uids {
        t.archived(uid, 60).await;
        assert_eq!(t.events(uid).await, flaky_events(), "{n}");
    }
    let metrics = t.controller().metrics().await;
    assert_eq!(common::sample(&metrics, "weft_history_up"), Some(1.0));
    assert_eq!(
        common::sample(&metrics, "weft_history_outbox_pending"),
        Some(0.0)
    );
    t.stop().await;
    pg.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_deletion_waits_for_the_archive_which_keeps_the_run() {
    let url = common::postgres::database("ttl").await;
    let t = HistoryBed::start(url).await;
    let mut spec = flaky_spec();
    spec["ttlStrategy"] = json!({"secondsAfterCompletion": 3});
    t.create("short", spec).await;
    let wf = t.finish("short").await;
    let uid = wf.uid().unwrap();
    for _ in 0..300 {
        if t.api().get_opt("short").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        t.api().get_opt("short").await.unwrap().is_none(),
        "TTL deleted it"
    );
    let archived = t.archived(&uid, 1).await;
    assert_eq!(
        archived["status"]["nodes"]["make"]["outputs"],
        json!({"n": 7})
    );
    assert_eq!(t.events(&uid).await, flaky_events());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_degrades_history_and_workflows_still_run() {
    let url = common::postgres::database("newer").await;
    let out = common::weft(
        std::path::Path::new("/nonexistent"),
        &["db", "migrate", "--history-db", &url],
    )
    .await;
    assert!(out.status.success(), "{}", common::stderr(&out));
    let pool = common::postgres::pool(&url).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99, 'from a newer weft', true, '\\x00'::bytea, 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let out = common::weft(
        std::path::Path::new("/nonexistent"),
        &["db", "migrate", "--history-db", &url],
    )
    .await;
    let err = common::stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("has schema version 99, newer than this weft's 2") && err.contains("***"),
        "{err}"
    );
    assert!(!err.contains(&url), "the password is not shown: {err}");

    let t = HistoryBed::start(url).await;
    t.create("runs", flaky_spec()).await;
    let wf = t.finish("runs").await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    let ready = common::http_get(t.controller().metrics_port, "/readyz")
        .await
        .unwrap_or_default();
    assert!(
        ready.starts_with("ok\n")
            && ready.contains("history: degraded: ")
            && ready.contains("newer than this weft's"),
        "{ready}"
    );
    assert!(t.controller().log().contains("history degraded"));
    // History queries say so; the live list still answers.
    let mut client = t.client().await;
    let req = pb::ListExecutionsRequest {
        namespace: t.bed.ns.clone(),
        include_archived: true,
        ..Default::default()
    };
    let err = client.list_executions(req).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("execution history is unavailable: ")
            && err.message().contains("newer than"),
        "{}",
        err.message()
    );
    let live = pb::ListExecutionsRequest {
        namespace: t.bed.ns.clone(),
        ..Default::default()
    };
    let page = client.list_executions(live).await.unwrap().into_inner();
    assert_eq!(page.executions.len(), 1);
    t.stop().await;
}

/// From now on, forwards connections to `port` on loopback to `to`: a
/// database that comes up late at the address the controller was given.
fn forward(port: u16, to: u16) {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move {
        while let Ok((mut a, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut b) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                }
            });
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_unreachable_at_start_gets_every_event_once_it_comes() {
    let mut url = url::Url::parse(&common::postgres::database("late").await).unwrap();
    let (db_port, port) = (url.port().unwrap(), common::free_port());
    url.set_port(Some(port)).unwrap();
    let t = HistoryBed::start(url.to_string()).await;
    t.create("early", flaky_spec()).await;
    let wf = t.finish("early").await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    let ready = || common::http_get(t.controller().metrics_port, "/readyz");
    // Degraded, ready all the same ("not connected yet" until the pool's
    // first connection attempt gives up, then "... is unreachable").
    let degraded = ready().await.unwrap_or_default();
    assert!(
        degraded.starts_with("ok\n") && degraded.contains("history: degraded: "),
        "{degraded}"
    );
    let mut client = t.client().await;
    let archived = pb::ListExecutionsRequest {
        namespace: t.bed.ns.clone(),
        include_archived: true,
        ..Default::default()
    };
    let err = client.list_executions(archived.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    // The database comes: the run's events and archive follow, once each.
    forward(port, db_port);
    let deadline = Instant::now() + Duration::from_secs(120);
    while ready().await.unwrap_or_default().contains("degraded") {
        assert!(Instant::now() < deadline, "history still degraded");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let uid = wf.uid().unwrap();
    t.archived(&uid, 60).await;
    assert_eq!(t.events(&uid).await, flaky_events());
    let page = client.list_executions(archived).await.unwrap().into_inner();
    assert_eq!(page.executions.len(), 1, "{page:?}");
    assert_eq!(page.executions[0].uid, uid);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_db_migrate_upgrades_a_database_of_the_previous_schema_keeping_its_rows() {
    let url = common::postgres::database("upgrade").await;
    let nowhere = std::path::Path::new("/nonexistent");
    let out = common::weft_ok(
        nowhere,
        &["db", "migrate", "--history-db", &url, "--to", "1"],
    )
    .await;
    assert!(out.contains("applied 1; schema version 1"), "{out}");
    let pool = common::postgres::pool(&url).await;
    sqlx::query(
        "INSERT INTO executions (uid, namespace, name, phase, created_at, started_at, \
         archived_at, labels, workflow) VALUES ('u1', 'ns', 'old', 'Succeeded', 1, 2, 3, '{}', '{}')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let out = common::weft_ok(nowhere, &["db", "version", "--history-db", &url]).await;
    assert_eq!(out.trim(), "database 1, weft 2");
    let out = common::weft_ok(nowhere, &["db", "migrate", "--history-db", &url]).await;
    assert!(out.contains("applied 2; schema version 2"), "{out}");
    let out = common::weft_ok(nowhere, &["db", "migrate", "--history-db", &url]).await;
    assert!(out.contains("schema version 2, nothing to apply"), "{out}");
    let row = sqlx::query("SELECT name, size_bytes FROM executions WHERE uid = 'u1'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>("name"), "old");
    assert_eq!(row.get::<i64, _>("size_bytes"), 0);
    pool.close().await;
}

/// Waits until `name` is gone from the API server.
async fn gone(t: &HistoryBed, name: &str) {
    for _ in 0..600 {
        if t.api().get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_runs_are_listed_got_deleted_and_resubmitted_through_the_api_and_the_cli() {
    let url = common::postgres::database("admin").await;
    let t = HistoryBed::start(url).await;
    let mut short = flaky_spec();
    short["ttlStrategy"] = json!({"secondsAfterCompletion": 1});
    t.create("alpha", short.clone()).await;
    let alpha = t.finish("alpha").await;
    t.create("beta", short).await;
    t.finish("beta").await;
    t.create("gamma", flaky_spec()).await;
    let gamma = t.finish("gamma").await;
    gone(&t, "alpha").await;
    gone(&t, "beta").await;
    t.archived(&gamma.uid().unwrap(), 30).await;

    // Live and archived together, newest start first, a page at a time.
    let mut client = t.client().await;
    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let req = pb::ListExecutionsRequest {
            namespace: t.bed.ns.clone(),
            include_archived: true,
            limit: 1,
            page_token: token.clone(),
            ..Default::default()
        };
        let page = client.list_executions(req).await.unwrap().into_inner();
        for e in &page.executions {
            names.push((e.id.clone().unwrap().name, e.archived));
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(
        names,
        [
            ("gamma".to_string(), false),
            ("beta".into(), true),
            ("alpha".into(), true)
        ]
    );
    let req = pb::ListExecutionsRequest {
        namespace: t.bed.ns.clone(),
        name_prefix: "al".into(),
        phase: "Succeeded".into(),
        label_selector: "team=ml".into(),
        ..Default::default()
    };
    let page = client.list_executions(req).await.unwrap().into_inner();
    assert_eq!(page.executions.len(), 1);
    assert_eq!(page.executions[0].uid, alpha.uid().unwrap());

    // A TTL-deleted run, with its outputs and timeline.
    let got = client
        .get_execution(pb::GetExecutionRequest { id: t.id("alpha") })
        .await
        .unwrap()
        .into_inner();
    assert!(got.archived);
    assert_eq!(got.phase, "Succeeded");
    let make = got.nodes.iter().find(|n| n.id == "make").unwrap();
    assert_eq!(make.outputs, r#"{"n":7}"#);
    let flaky = got.nodes.iter().find(|n| n.id == "flaky").unwrap();
    assert_eq!(flaky.attempts, 2);
    assert_eq!(got.events.len(), flaky_events().len());
    let retried = got
        .events
        .iter()
        .find(|e| e.phase == "Retrying" && e.kind == "task")
        .unwrap();
    assert_eq!(
        (
            retried.node_id.as_str(),
            retried.attempt,
            retried.plugin.as_str()
        ),
        ("flaky", 1, "pod")
    );

    // Its nodes in full, as the console's node panel asks for them.
    let node = client
        .get_node(pb::GetNodeRequest {
            id: t.id("alpha"),
            node_id: "flaky".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let record = node.node.unwrap();
    assert_eq!((record.phase.as_str(), record.attempts), ("Succeeded", 2));

    // The same through the CLI.
    let ns = t.bed.ns.as_str();
    let listed = t.weft_ok(&["archive", "list", "-n", ns]).await;
    let lines: Vec<&str> = listed.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[1].starts_with("gamma"),
        "{listed}"
    );
    assert!(
        lines[3].starts_with("alpha") && lines[3].contains(" yes "),
        "{listed}"
    );
    let listed = t
        .weft_ok(&["list", "--archived", "-n", ns, "--prefix", "be"])
        .await;
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(listed.contains("beta"), "{listed}");
    let described = t.weft_ok(&["archive", "get", "alpha", "-n", ns]).await;
    assert!(described.contains("Archived:  yes"), "{described}");
    assert!(
        described.contains("flaky") && described.contains("Retrying"),
        "{described}"
    );

    // Resubmitted from the archive: a new run with the same spec.
    let out = t
        .weft_ok(&[
            "archive",
            "resubmit",
            "alpha",
            "-n",
            ns,
            "--name",
            "alpha-again",
        ])
        .await;
    assert!(
        out.contains(&format!("workflow {ns}/alpha-again created")),
        "{out}"
    );
    let again = t.finish("alpha-again").await;
    assert_eq!(
        again.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded
    );

    // Deleted from the archive: gone from the API and the database.
    let out = t.weft_ok(&["archive", "delete", "alpha", "-n", ns]).await;
    assert!(out.contains(&alpha.uid().unwrap()), "{out}");
    let err = client
        .get_execution(pb::GetExecutionRequest { id: t.id("alpha") })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    assert!(t.events(&alpha.uid().unwrap()).await.is_empty());
    t.stop().await;
}

/// `weft dev` in `dir` as a user starts it; the process and its admin
/// API's address.
async fn weft_dev(dir: &std::path::Path) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["dev", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .current_dir(common::root())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("weft dev");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(a) = line.strip_prefix("admin API at ") {
                return a.to_string();
            }
        }
        panic!("weft dev ended without serving");
    })
    .await
    .expect("weft dev serves within two minutes");
    // Keep reading its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("http://{addr}"))
}

async fn sigterm(mut child: tokio::process::Child) {
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("weft dev stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_dev_keeps_its_history_in_sqlite_across_a_restart() {
    if common::cluster::real() {
        return; // `weft dev` is its own cluster: once is enough.
    }
    let dir = tempfile::tempdir().unwrap();
    let (dev, admin) = weft_dev(dir.path()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    let wf = json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "kept", "namespace": "default"}, "spec": flaky_spec()});
    common::kubectl_ok(&kubeconfig, &["create", "-f", "-"], Some(&wf.to_string())).await;
    let client = common::k8s::client_for(&kubeconfig).await;
    let api: Api<Workflow> = Api::namespaced(client, "default");
    let done = common::wait_workflow(&api, "kept", |w| {
        w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
    })
    .await;
    let uid = done.uid().unwrap();
    let db = sqlx::SqlitePool::connect(&format!(
        "sqlite:{}",
        dir.path().join("history.db").display()
    ))
    .await
    .unwrap();
    for _ in 0..300 {
        let n: i64 = sqlx::query("SELECT COUNT(*) FROM executions WHERE uid = $1")
            .bind(&uid)
            .fetch_one(&db)
            .await
            .unwrap()
            .get(0);
        if n == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.close().await;
    common::kubectl_ok(&kubeconfig, &["delete", "workflow", "kept"], None).await;
    sigterm(dev).await;

    // Started again on the same data dir: the run is in its history.
    let (dev, admin2) = weft_dev(dir.path()).await;
    let _ = admin;
    let out = common::weft_ok(&kubeconfig, &["archive", "get", "kept", "--admin", &admin2]).await;
    assert!(
        out.contains("Archived:  yes") && out.contains(&uid),
        "{out}"
    );
    assert_eq!(
        out.matches("Retrying").count(),
        2,
        "its node and task events: {out}"
    );
    let listed = common::weft_ok(&kubeconfig, &["list", "--archived", "--admin", &admin2]).await;
    assert!(
        listed.contains("kept") && listed.contains(" yes "),
        "{listed}"
    );
    sigterm(dev).await;
}
