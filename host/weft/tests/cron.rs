//! CronWorkflows with real `weft controller` processes against the dev
//! cluster, driven with kubectl: every tick of `@every 2s` launched exactly
//! once while controllers are SIGKILLed and the leader changes; `Forbid`
//! skipping ticks while a run holds; `Replace` aborting it. One cluster
//! for the file: the dev cluster, or kube-apiserver with
//! `WEFT_TEST_CLUSTER=k8s`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{ControllerProcess, kubectl};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use weft::api::{CronWorkflow, Workflow};
use weft_dag::WorkflowPhase;

const LEASE: &str = "weft-controller";

fn replica(kubeconfig: &Path, identity: &str) -> ControllerProcess {
    let args = [
        "--leader-elect",
        "--leader-elect-lease-duration=3000ms",
        "--leader-elect-renew-deadline=2000ms",
        "--leader-elect-retry-period=500ms",
    ];
    ControllerProcess::start(kubeconfig, identity, &args)
}

async fn holder(kubeconfig: &Path) -> String {
    let args = [
        "get",
        "lease",
        LEASE,
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ];
    let out = kubectl(kubeconfig, &args, None).await;
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn wait_for_holder(kubeconfig: &Path, candidates: &[&str]) -> String {
    for _ in 0..300 {
        let h = holder(kubeconfig).await;
        if candidates.contains(&h.as_str()) {
            return h;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no leader among {candidates:?}");
}

async fn apply(kubeconfig: &Path, yaml: &str) {
    let out = kubectl(kubeconfig, &["apply", "-f", "-"], Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CronWorkflow running `workflow_spec` (YAML, indented for the spec).
fn cron(name: &str, schedule: &str, extra: &str, workflow_spec: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: CronWorkflow\nmetadata: {{name: {name}}}\nspec:\n  schedule: '{schedule}'\n{extra}  workflowSpec:\n{workflow_spec}"
    )
}

const QUICK: &str = "    inputs:\n      scheduledTime: {type: string}\n    nodes:\n      - id: stamp\n        inputs: {at: '${inputs.scheduledTime}'}\n        task: {type: pod, config: {image: busybox:1.36, command: [sh, -c, 'echo \"{\\\"at\\\": \\\"$WEFT_INPUT_AT\\\"}\" > /dev/termination-log']}}\n";

const HOLD: &str = "    nodes:\n      - {id: hold, gate: {approval: {}}}\n";

/// The Workflows a CronWorkflow launched.
async fn runs(client: &Client, cron: &str) -> Vec<Workflow> {
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels(&format!("weft.dev/cron-workflow={cron}"));
    api.list(&lp).await.unwrap().items
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The tick a Workflow was launched for, from its annotation.
fn tick_of(wf: &Workflow) -> u64 {
    let at = &wf.annotations()["weft.dev/scheduled-time"];
    secs(humantime::parse_rfc3339(at).unwrap())
}

async fn cron_status(client: &Client, name: &str) -> weft_dag::cron::CronWorkflowStatus {
    let api: Api<CronWorkflow> = Api::namespaced(client.clone(), "default");
    api.get(name).await.unwrap().status.unwrap_or_default()
}

async fn events(client: &Client, object: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tick_runs_once_through_kills_and_failover_and_policies_hold() {
    let cluster = common::cluster::TestCluster::start().await;
    let (kc, client) = (cluster.kubeconfig.clone(), cluster.client.clone());
    let mut a = replica(&kc, "replica-a");
    let mut b = replica(&kc, "replica-b");
    a.metrics().await;
    b.metrics().await;
    wait_for_holder(&kc, &["replica-a", "replica-b"]).await;

    let extra = "  startingDeadlineSeconds: 60\n  successfulJobsHistoryLimit: 100\n";
    apply(&kc, &cron("tick", "@every 2s", extra, QUICK)).await;
    let crons: Api<CronWorkflow> = Api::namespaced(client.clone(), "default");
    let created = crons
        .get("tick")
        .await
        .unwrap()
        .metadata
        .creation_timestamp
        .unwrap();
    let created = SystemTime::from(created.0);
    // Two SIGKILLs of the leader, each followed by the other replica taking
    // over (a failover) and the killed one coming back as the standby.
    for round in 0..2 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        let leader = holder(&kc).await;
        let (killed, other) = match leader.as_str() {
            "replica-a" => (&mut a, "replica-b"),
            _ => (&mut b, "replica-a"),
        };
        killed.kill();
        let identity = killed.identity.clone();
        wait_for_holder(&kc, &[other]).await;
        *killed = replica(&kc, &identity);
        eprintln!("round {round}: killed {identity}, {other} leads");
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    apply(
        &kc,
        &cron(
            "tick",
            "@every 2s",
            &format!("{extra}  suspend: true\n"),
            QUICK,
        ),
    )
    .await;
    // The last tick is whatever the status says was scheduled last, once
    // it stops moving.
    let mut last = cron_status(&client, "tick").await.last_scheduled_time;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = cron_status(&client, "tick").await.last_scheduled_time;
        if now == last {
            break;
        }
        last = now;
    }
    let last = secs(humantime::parse_rfc3339(&last.expect("ticks ran")).unwrap());
    // Ticks strictly after the CronWorkflow's creation.
    let first = secs(created) / 2 * 2 + 2;
    let want: BTreeSet<u64> = (first..=last).step_by(2).collect();
    assert!(
        want.len() >= 10,
        "only {} ticks in {first}..={last}",
        want.len()
    );
    let launched = runs(&client, "tick").await;
    let got: Vec<u64> = launched.iter().map(tick_of).collect();
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(got.len(), unique.len(), "a tick launched twice: {got:?}");
    assert_eq!(
        unique, want,
        "every tick exactly once (no gaps, catch-up within the deadline)"
    );
    // One Launched Event per created Workflow: a SIGKILL between a create
    // and its Event may lose that Event (the retry finds AlreadyExists), never add one.
    let launches = events(&client, "tick", "Launched").await.len();
    assert!(
        launches <= want.len() && launches + 2 >= want.len(),
        "{launches} Events"
    );
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    for wf in &launched {
        let done = finished(&api, &wf.name_any()).await;
        let status = done.status.unwrap();
        assert_eq!(status.phase, WorkflowPhase::Succeeded, "{}", wf.name_any());
        let at = status.nodes["stamp"].outputs.clone().unwrap()["at"].clone();
        assert_eq!(at, wf.annotations()["weft.dev/scheduled-time"].as_str());
    }
    b.kill();
    policies(&kc, &client).await;
    cli(&kc, &client).await;
    // The leader counts its CronWorkflow reconciles as controller-runtime
    // does; the queue it does not see has no series.
    let metrics = a.metrics().await;
    let count = |series: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let reconciles = count(
        r#"controller_runtime_reconcile_total{controller="cronworkflow",result="requeue_after"}"#,
    );
    assert!(reconciles.is_some_and(|n| n >= 1.0), "{metrics}");
    assert!(
        count(r#"controller_runtime_max_concurrent_reconciles{controller="cronworkflow"}"#)
            == Some(0.0)
    );
    assert!(!metrics.contains(r#"workqueue_depth{controller="cronworkflow""#));
    drop(a);
}

/// `weft cron` against the same cluster, as a user runs it.
fn weft(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

async fn cli(kc: &Path, client: &Client) {
    let (ok, table, err) = weft(kc, &["cron", "list"]);
    assert!(ok, "{err}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "SCHEDULE",
            "SUSPENDED",
            "LAST",
            "NEXT",
            "ACTIVE",
            "AGE"
        ]
    );
    let row = |name: &str| -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {table}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(row("tick")[1..3], ["@every".to_string(), "2s".into()]);
    assert_eq!(row("tick")[3], "true", "{table}");
    assert_eq!(row("forbid")[3], "false", "{table}");
    let crons: Api<CronWorkflow> = Api::namespaced(client.clone(), "default");
    let (ok, out, err) = weft(kc, &["cron", "suspend", "forbid"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "cronworkflow.weft.dev/forbid suspended");
    assert!(crons.get("forbid").await.unwrap().spec.spec.suspend);
    assert!(weft(kc, &["cron", "resume", "forbid"]).0);
    assert!(!crons.get("forbid").await.unwrap().spec.spec.suspend);
    // A run now, outside the schedule, of the suspended `tick`.
    let before = runs(client, "tick").await.len();
    let (ok, out, err) = weft(kc, &["cron", "trigger", "tick"]);
    assert!(ok, "{err}");
    let name = out
        .trim()
        .strip_prefix("workflow.weft.dev/")
        .unwrap()
        .strip_suffix(" created")
        .unwrap();
    assert!(name.starts_with("tick-manual-"), "{name}");
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let done = finished(&api, name).await;
    assert_eq!(done.status.unwrap().phase, WorkflowPhase::Succeeded);
    assert_eq!(runs(client, "tick").await.len(), before + 1);
    let (ok, _, err) = weft(kc, &["cron", "suspend", "nope"]);
    assert!(!ok);
    assert!(
        err.contains("CronWorkflow nope in namespace default"),
        "{err}"
    );
}

async fn finished(api: &Api<Workflow>, name: &str) -> Workflow {
    for _ in 0..600 {
        let wf = api.get(name).await.unwrap();
        if wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} did not finish");
}

/// Forbid skips ticks while a run holds; Replace aborts it.
async fn policies(kc: &Path, client: &Client) {
    apply(
        kc,
        &cron("forbid", "@every 2s", "  concurrencyPolicy: Forbid\n", HOLD),
    )
    .await;
    let replace = "  concurrencyPolicy: Replace\n  failedJobsHistoryLimit: 10\n";
    apply(kc, &cron("replace", "@every 2s", replace, HOLD)).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let held = runs(client, "forbid").await;
    assert_eq!(held.len(), 1, "Forbid launched while one ran");
    let skipped = events(client, "forbid", "SkippedTicks").await;
    assert!(
        skipped
            .iter()
            .any(|m| m.contains("is still running (concurrencyPolicy Forbid)")),
        "{skipped:?}"
    );
    let first = held[0].name_any();
    let annotate = ["annotate", "workflow", &first, "approve.weft.dev/hold=true"];
    assert!(kubectl(kc, &annotate, None).await.status.success());
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        finished(&api, &first).await.status.unwrap().phase,
        WorkflowPhase::Succeeded
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        runs(client, "forbid").await.len(),
        2,
        "a tick after the run ended launches"
    );

    // Suspended, so no tick aborts the newest run while it is looked at.
    let suspended = format!("{replace}  suspend: true\n");
    apply(kc, &cron("replace", "@every 2s", &suspended, HOLD)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut replaced = runs(client, "replace").await;
    assert!(replaced.len() >= 3, "{}", replaced.len());
    replaced.sort_by_key(tick_of);
    let newest = replaced.pop().unwrap();
    for old in &replaced {
        let s = finished(&api, &old.name_any()).await.status.unwrap();
        assert_eq!(s.phase, WorkflowPhase::Aborted, "{}", old.name_any());
    }
    let newest = api.get(&newest.name_any()).await.unwrap();
    assert!(
        !newest
            .status
            .as_ref()
            .is_some_and(|s| s.phase.is_terminal())
    );
    let why = events(client, "replace", "Replaced").await;
    assert!(
        why.iter()
            .any(|m| m.contains("(concurrencyPolicy Replace)")),
        "{why:?}"
    );
    // With the default history limit of failed and aborted runs (1), the
    // rest are deleted.
    let default_limit = "  concurrencyPolicy: Replace\n  suspend: true\n";
    apply(kc, &cron("replace", "@every 2s", default_limit, HOLD)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = runs(client, "replace").await;
    let aborted = left
        .iter()
        .filter(|w| {
            w.status
                .as_ref()
                .is_some_and(|s| s.phase == WorkflowPhase::Aborted)
        })
        .count();
    assert_eq!(
        (aborted, left.len()),
        (1, 2),
        "one aborted run kept, and the running one"
    );
}
