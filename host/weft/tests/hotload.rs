//! Hot loading from ConfigMaps against the embedded dev cluster (or
//! kube-apiserver, `WEFT_TEST_CLUSTER=k8s`, a namespace per test), with the
//! real controller and real components (`make guests`): swaps under load,
//! rejection, compression and splitting, pinning, the circuit breaker and
//! removal.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::cluster::Bed;
use common::{Env, node, root};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::json;
use weft::hotload::{HotloadConfig, PluginStatus, package};
use weft_dag::WorkflowPhase;
use weft_plugin::{Pinning, TaskContext, breaker::BreakerConfig, engine::Digest};

fn config(ns: &str) -> HotloadConfig {
    HotloadConfig {
        namespaces: vec![ns.into()],
        prune_every: Duration::from_millis(200),
        breaker: BreakerConfig {
            max_faults: 2,
            window: Duration::from_secs(60),
        },
        ..Default::default()
    }
}

fn guest(name: &str) -> Vec<u8> {
    let path = root().join(format!("target/test-guests/{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: build the guests first: make guests",
            path.display()
        )
    })
}

fn leb128(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A component with a custom section appended: it loads and behaves like
/// the original, with another digest (and size).
fn salted(mut component: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let name = b"weft-test-salt";
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend(name);
    body.extend(payload);
    component.push(0);
    leb128(body.len(), &mut component);
    component.extend(body);
    component
}

/// A version of `guest` distinguished by `salt`.
fn version(guest_name: &str, salt: &str) -> Vec<u8> {
    salted(guest(guest_name), salt.as_bytes())
}

fn manifest(plugin: &str, task_type: &str, version: &str) -> String {
    format!(
        "name: {plugin}\nversion: {version}\nworld: k8s-task-plugin\ntaskTypes: [{task_type}]\nresources: [{{apiVersion: v1, kind: Pod}}]\n"
    )
}

async fn push(env: &Env, name: &str, component: &[u8], manifest: &str) -> Digest {
    weft::hotload::push(
        &env.client,
        &env.ns,
        name,
        component,
        manifest,
        Pinning::Pinned,
    )
    .await
    .expect("push")
    .digest
}

/// The digest serving `task_type` now, if any.
fn serving(env: &Env, task_type: &str) -> Option<Digest> {
    env.registry.task_plugin(task_type).ok().map(|p| p.digest())
}

/// Polls until `task_type` is served by `digest`; returns how long it took.
async fn served_by(env: &Env, task_type: &str, digest: Digest, secs: u64) -> Duration {
    let start = Instant::now();
    while serving(env, task_type) != Some(digest) {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "{task_type} not served by {digest} after {secs}s (serving {:?})",
            serving(env, task_type)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

async fn events_for(env: &Env, configmap: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("ConfigMap")
                && e.involved_object.name.as_deref() == Some(configmap)
        })
        .collect()
}

async fn wait_event(env: &Env, configmap: &str, reason: &str) -> Event {
    for _ in 0..200 {
        if let Some(e) = events_for(env, configmap)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
        {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {reason} event on configmap {configmap}");
}

fn configmaps(env: &Env) -> Api<ConfigMap> {
    Api::namespaced(env.client.clone(), &env.ns)
}

async fn status_of(env: &Env, configmap: &str) -> Option<PluginStatus> {
    let cm = configmaps(env).get(configmap).await.ok()?;
    serde_json::from_str(cm.annotations().get(package::ANNOTATION_STATUS)?).ok()
}

async fn wait_status(
    env: &Env,
    configmap: &str,
    what: &str,
    ok: impl Fn(&PluginStatus) -> bool,
) -> PluginStatus {
    let mut last = None;
    for _ in 0..200 {
        last = status_of(env, configmap).await;
        if let Some(s) = &last
            && ok(s)
        {
            return s.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("status of {configmap} never showed {what}: {last:?}");
}

/// Runs the `weft` binary off the async workers (the dev cluster serving
/// it runs on them).
async fn weft_cli(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let kubeconfig = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&argv)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Writes a component and its manifest into `dir`; returns the `.wasm` path.
fn files(dir: &std::path::Path, name: &str, component: &[u8], manifest: &str) -> String {
    let wasm = dir.join(format!("{name}.wasm"));
    std::fs::write(&wasm, component).unwrap();
    std::fs::write(dir.join(format!("{name}.yaml")), manifest).unwrap();
    wasm.to_str().unwrap().to_string()
}

/// Records a failed call, keeping the first few messages only.
fn note(failures: &std::sync::Mutex<Vec<String>>, message: String) {
    let mut f = failures.lock().unwrap();
    if f.len() < 100 {
        f.push(message);
    }
}

fn task(task_type: &str, node: &str) -> TaskContext {
    TaskContext::for_attempt(
        "load",
        "uid-load",
        "default",
        node,
        0,
        task_type,
        json!({}),
        json!({}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_updated_configmap_is_serving_within_a_second() {
    let env = Env::start_hotload(config).await;
    let m = manifest("hot", "hot", "0.1.0");
    let d1 = push(&env, "hot", &version("echo", "serve-1"), &m).await;
    served_by(&env, "hot", d1, 30).await;
    let d2 = push(&env, "hot", &version("echo", "serve-2"), &m).await;
    let took = served_by(&env, "hot", d2, 10).await;
    eprintln!("update served after {took:?} (compile included unless cached)");
    let loaded = wait_event(&env, "hot", "PluginLoaded").await;
    assert!(loaded.message.unwrap().contains("hot 0.1.0"));
    let s = wait_status(&env, "hot", "the new digest", |s| {
        s.serving == Some(d2.to_string())
    })
    .await;
    assert_eq!(s.desired, Some(d2.to_string()));
    assert_eq!(s.retained.len(), 1, "the previous version stays: {s:?}");
    assert!(env.ctx.metrics.plugin_loads_total("loaded") >= 2);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_swaps_under_continuous_calls_fail_no_call() {
    // No breaker here: a fault must show up as a failed call, not be hidden
    // by a rollback.
    let env = Env::start_hotload(|ns| HotloadConfig {
        breaker: BreakerConfig {
            max_faults: 0,
            window: Duration::from_secs(60),
        },
        ..config(ns)
    })
    .await;
    let m = manifest("swap", "swap", "1.0.0");
    let mut digests = vec![push(&env, "swap", &version("echo", "swap-0"), &m).await];
    served_by(&env, "swap", digests[0], 30).await;

    /// Stops the workers however the test ends (a panic included).
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(stop.clone());
    let calls = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let (registry, stop, calls, failures, seen) = (
                env.registry.clone(),
                stop.clone(),
                calls.clone(),
                failures.clone(),
                seen.clone(),
            );
            std::thread::spawn(move || {
                let ctx = task("swap", &format!("w{w}"));
                while !stop.load(Ordering::Relaxed) {
                    // What the executor does: one lookup, then calls on that version.
                    let result = registry.task_plugin("swap").map_err(|e| e.to_string());
                    let result = result.and_then(|p| {
                        let (pod, _) = p.build_resource(&ctx).map_err(|e| e.to_string())?;
                        let obs = json!({"status": {"phase": "Succeeded"}});
                        p.get_task_phase(&ctx, &obs).map_err(|e| e.to_string())?;
                        Ok((p.digest(), pod))
                    });
                    calls.fetch_add(1, Ordering::Relaxed);
                    match result {
                        Ok((d, pod)) if pod["kind"] == "Pod" => {
                            seen.lock().unwrap().insert(d);
                        }
                        Ok((d, pod)) => note(&failures, format!("{d}: {pod}")),
                        Err(e) => note(&failures, e),
                    }
                }
            })
        })
        .collect();
    let mut took = Vec::new();
    for i in 1..=20 {
        let d = push(&env, "swap", &version("echo", &format!("swap-{i}")), &m).await;
        took.push(served_by(&env, "swap", d, 30).await);
        digests.push(d);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    let seen = seen.lock().unwrap().clone();
    let n = calls.load(Ordering::Relaxed);
    took.sort();
    eprintln!(
        "{n} calls during 20 swaps; {} versions served; swap p50 {:?} max {:?}",
        seen.len(),
        took[took.len() / 2],
        took.last().unwrap()
    );
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(n > 20, "the workers called ({n})");
    assert!(
        seen.iter().all(|d| digests.contains(d)),
        "every call was served by a pushed version"
    );
    assert!(seen.len() >= 2, "calls saw the swaps: {seen:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_plugin_is_rejected_with_an_event_and_the_old_one_keeps_serving() {
    let env = Env::start_hotload(config).await;
    let m = manifest("good", "good", "0.1.0");
    let d1 = push(&env, "good", &version("echo", "good-1"), &m).await;
    served_by(&env, "good", d1, 30).await;

    // Not WebAssembly at all.
    push(&env, "good", b"this is not a component", &m).await;
    let ev = wait_event(&env, "good", "PluginRejected").await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.message
            .as_deref()
            .unwrap()
            .contains("not a WebAssembly binary"),
        "{ev:?}"
    );
    let s = wait_status(&env, "good", "the error", |s| s.error.is_some()).await;
    assert_eq!(
        s.serving,
        Some(d1.to_string()),
        "the old version serves: {s:?}"
    );
    let cm = configmaps(&env).get("good").await.unwrap();
    assert!(cm.annotations()[package::ANNOTATION_ERROR].contains("not a WebAssembly binary"));
    assert_eq!(serving(&env, "good"), Some(d1));
    let p = env.registry.task_plugin("good").unwrap();
    p.build_resource(&task("good", "n")).unwrap();

    // A middleware where the manifest promises a task plugin: wrong world.
    push(&env, "good", &guest("mw-test"), &m).await;
    wait_status(&env, "good", "the wrong world", |s| {
        s.error
            .as_deref()
            .is_some_and(|e| e.contains("does not implement world"))
    })
    .await;
    // A digest that does not match.
    let mut cm = configmaps(&env).get("good").await.unwrap();
    cm.data
        .as_mut()
        .unwrap()
        .insert(package::KEY_DIGEST.into(), Digest::of(b"x").to_string());
    cm.metadata.managed_fields = None;
    configmaps(&env)
        .replace("good", &Default::default(), &cm)
        .await
        .unwrap();
    wait_status(&env, "good", "the digest mismatch", |s| {
        s.error
            .as_deref()
            .is_some_and(|e| e.contains("digest mismatch"))
    })
    .await;
    assert_eq!(serving(&env, "good"), Some(d1));
    assert!(env.ctx.metrics.plugin_loads_total("rejected") >= 3);
    assert!(env.ctx.metrics.render().contains("reason=\"wrong_world\""));

    // A good version clears the error.
    let d2 = push(&env, "good", &version("echo", "good-2"), &m).await;
    served_by(&env, "good", d2, 30).await;
    let s = wait_status(&env, "good", "no error", |s| s.error.is_none()).await;
    assert_eq!(s.serving, Some(d2.to_string()));
    let cm = configmaps(&env).get("good").await.unwrap();
    assert!(!cm.annotations().contains_key(package::ANNOTATION_ERROR));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_over_a_mib_loads_through_compression_and_splitting() {
    let env = Env::start_hotload(config).await;
    // 1.5 MiB that does not compress and 1.5 MiB that does: 3 MiB, about
    // 1.5 MiB compressed, so two parts.
    let mut payload = Vec::with_capacity(3 << 20);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while payload.len() < 3 << 19 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        payload.extend(x.to_le_bytes());
    }
    payload.resize(3 << 20, 0);
    let big = salted(guest("echo"), &payload);
    assert!(big.len() > 3 << 20);
    let d = push(&env, "big", &big, &manifest("big", "big", "0.1.0")).await;
    assert_eq!(d, Digest::of(&big));
    let cms = configmaps(&env)
        .list(&ListParams::default().labels(&format!("{}=big", package::LABEL_PART)))
        .await
        .unwrap()
        .items;
    assert!(cms.len() >= 2, "split into {} parts", cms.len());
    for cm in &cms {
        assert!(package::payload_size(cm) <= package::CONFIGMAP_LIMIT);
        assert_eq!(cm.owner_references()[0].name, "big", "owned by the head");
    }
    let head = configmaps(&env).get("big").await.unwrap();
    assert!(package::payload_size(&head) <= package::CONFIGMAP_LIMIT);
    let took = served_by(&env, "big", d, 60).await;
    eprintln!(
        "{} byte component in {} parts served after {took:?}",
        big.len(),
        cms.len()
    );
    let p = env.registry.task_plugin("big").unwrap();
    p.build_resource(&task("big", "n")).unwrap();
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_workflow_finishes_on_its_digest_while_a_new_one_uses_the_new_digest() {
    let env = Env::start_hotload(config).await;
    let m = manifest("pin", "pin", "1.0.0");
    let d1 = push(&env, "pin", &version("echo", "pin-1"), &m).await;
    served_by(&env, "pin", d1, 30).await;
    env.submit(
        "old",
        "nodes:\n  - {id: first, task: {type: pin}}\n  - {id: ok, dependsOn: [first], gate: {approval: {}}}\n  - {id: second, dependsOn: [ok], task: {type: pin}}\n",
    )
    .await;
    env.wait_for("old", 30, |wf| {
        wf.status
            .as_ref()
            .and_then(|s| s.nodes.get("ok"))
            .is_some_and(|n| n.task_phase.as_deref() == Some("waiting-for-approval"))
    })
    .await;

    // Two upgrades: d1 is then neither current nor the rollback target,
    // only pinned.
    let m2 = manifest("pin", "pin", "2.0.0");
    let d2 = push(&env, "pin", &version("echo", "pin-2"), &m2).await;
    served_by(&env, "pin", d2, 30).await;
    let d3 = push(&env, "pin", &version("echo", "pin-3"), &m2).await;
    served_by(&env, "pin", d3, 30).await;
    env.submit("new", "nodes:\n  - {id: first, task: {type: pin}}\n")
        .await;
    let new = env.finish("new", 30).await;
    assert_eq!(new.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    assert_eq!(
        node(&new, "first").plugin.as_ref().unwrap().digest,
        d3.to_string()
    );

    let s = wait_status(&env, "pin", "the pin on d1", |s| {
        s.retained
            .iter()
            .any(|r| r.digest == d1.to_string() && r.pins == 1)
    })
    .await;
    assert_eq!(s.serving, Some(d3.to_string()));
    assert!(
        env.registry.snapshot().version(d1).is_some(),
        "d1 stays loaded while pinned"
    );

    let patch = json!({"metadata": {"annotations": {"approve.weft.dev/ok": "true"}}});
    env.workflows()
        .patch("old", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let old = env.finish("old", 30).await;
    assert_eq!(old.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    for n in ["first", "second"] {
        assert_eq!(
            node(&old, n).plugin.as_ref().unwrap().digest,
            d1.to_string(),
            "node {n} of the pinned workflow"
        );
    }
    // Unpinned now: unloaded at the next prune.
    let start = Instant::now();
    while env.registry.snapshot().version(d1).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "d1 was never unloaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        env.registry.snapshot().version(d2).is_some(),
        "the rollback target stays"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_rolls_back_a_version_that_traps() {
    let env = Env::start_hotload(config).await;
    let good = version("echo", "flaky-good");
    let dg = push(&env, "flaky", &good, &manifest("flaky", "flaky", "1.0.0")).await;
    served_by(&env, "flaky", dg, 30).await;
    let db = push(
        &env,
        "flaky",
        &guest("panic"),
        &manifest("flaky", "flaky", "2.0.0"),
    )
    .await;
    served_by(&env, "flaky", db, 30).await;

    env.submit(
        "trips",
        "nodes:\n  - {id: t, retries: {limit: 0, systemLimit: 6, backoff: 100ms}, task: {type: flaky}}\n",
    )
    .await;
    served_by(&env, "flaky", dg, 60).await;
    let ev = wait_event(&env, "flaky", "PluginRolledBack").await;
    let message = ev.message.unwrap();
    assert!(
        message.contains(&format!("rolled back to {dg}")),
        "{message}"
    );
    assert!(message.contains("guest panicked on purpose"), "{message}");
    let s = wait_status(&env, "flaky", "the breaker", |s| s.breaker.is_some()).await;
    let b = s.breaker.unwrap();
    assert_eq!(
        (b.tripped, b.rolled_back_to),
        (db.to_string(), Some(dg.to_string()))
    );
    assert_eq!(
        s.desired,
        Some(db.to_string()),
        "the ConfigMap still holds the bad one"
    );
    assert!(
        env.ctx
            .metrics
            .render()
            .contains("weft_plugin_rollbacks_total{plugin=\"flaky\"} 1")
    );

    // The workflow's retry runs on the good version.
    let wf = env.finish("trips", 60).await;
    let t = node(&wf, "t");
    assert_eq!(
        wf.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{t:?}"
    );
    assert_eq!(t.plugin.as_ref().unwrap().digest, dg.to_string());
    assert!(t.system_failures >= 3, "{t:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_configmap_unloads_the_plugin_and_the_cli_shows_status() {
    let env = Env::start_hotload(config).await;
    let kc = env.kubeconfig.clone();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("gone.wasm");
    std::fs::write(&wasm, version("echo", "gone")).unwrap();
    let yaml = dir.path().join("gone.yaml");
    std::fs::write(&yaml, manifest("gone", "gone", "0.3.0")).unwrap();
    let weft = async |args: &[&str]| {
        let out = weft_cli(&kc, args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "weft {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let pushed = weft(&[
        "plugin",
        "push",
        wasm.to_str().unwrap(),
        "--manifest",
        yaml.to_str().unwrap(),
    ])
    .await;
    assert!(pushed.contains("plugin gone 0.3.0 sha256:"), "{pushed}");
    let d = Digest::of(&std::fs::read(&wasm).unwrap());
    served_by(&env, "gone", d, 30).await;
    wait_status(&env, "gone", "serving", |s| s.serving.is_some()).await;
    let table = weft(&["plugin", "status"]).await;
    assert!(table.contains(&format!("{}/gone", env.ns)), "{table}");
    assert!(table.contains(&d.hex()[..12]), "{table}");
    assert!(
        table.contains("0.3.0") && table.contains("pinned"),
        "{table}"
    );

    configmaps(&env)
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    let start = Instant::now();
    while env.registry.snapshot().version(d).is_some() {
        assert!(start.elapsed() < Duration::from_secs(10), "never unloaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = env.registry.task_plugin("gone").unwrap_err().to_string();
    assert!(err.contains("no plugin serves task type \"gone\""), "{err}");
    // The loader counts the unload right after the registry drops it.
    let unloaded = || {
        env.ctx
            .metrics
            .render()
            .contains("weft_plugin_unloads_total{plugin=\"gone\"} 1")
    };
    while !unloaded() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}",
            env.ctx.metrics.render()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.stop().await;
}

fn job_manifest(plugin: &str, priority: i32) -> String {
    format!(
        "name: {plugin}\nversion: 1.0.0\nworld: k8s-task-plugin\ntaskTypes: [job]\npriority: {priority}\nresources: [{{apiVersion: v1, kind: Pod}}]\n"
    )
}

/// The owner of `job` as the registry has it now.
fn job_owner(env: &Env) -> Option<String> {
    env.registry
        .task_plugin("job")
        .ok()
        .map(|p| p.name().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_plugin_for_a_task_type_is_rejected_as_a_conflict_and_workflows_keep_running() {
    let env = Env::start_hotload(config).await;
    let kc = env.kubeconfig.clone();
    let js = push(
        &env,
        "js-job",
        &version("echo", "js"),
        &job_manifest("js-job", 0),
    )
    .await;
    served_by(&env, "job", js, 30).await;
    // A second author ships `job` too, through the CLI, and waits for it.
    let dir = tempfile::tempdir().unwrap();
    let py = files(
        dir.path(),
        "py-job",
        &version("echo", "py"),
        &job_manifest("py-job", 0),
    );
    let out = weft_cli(&kc, &["plugin", "push", &py, "--wait", "--timeout", "60s"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "push --wait of a losing plugin fails: {stderr}"
    );
    assert!(
        stderr.contains("conflict") && stderr.contains(&format!("\"py-job\" claims task type \"job\", which plugin \"js-job\" (configmap {}/js-job) already serves (it was loaded first)", env.ns)),
        "{stderr}"
    );
    let ev = wait_event(&env, "py-job", "PluginConflict").await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.message.as_deref().unwrap_or_default().contains("js-job"),
        "{ev:?}"
    );
    let st = wait_status(&env, "py-job", "conflict", |s| s.state == "conflict").await;
    assert!(st.error.unwrap().contains("higher `priority`"));
    let cm = configmaps(&env).get("py-job").await.unwrap();
    assert!(cm.annotations()[package::ANNOTATION_ERROR].contains("js-job"));
    assert!(
        env.ctx.metrics.render().contains(
            "weft_plugin_loads_total{plugin=\"py-job\",result=\"rejected\",reason=\"conflict\"} 1"
        ),
        "{}",
        env.ctx.metrics.render()
    );
    // A plugin pushed where no controller watches is shown as unseen.
    let ns = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some("elsewhere".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap();
    weft::hotload::push(
        &env.client,
        "elsewhere",
        "stray",
        &version("echo", "stray"),
        &job_manifest("stray", 0),
        Pinning::Pinned,
    )
    .await
    .unwrap();
    let table = weft_cli(&kc, &["plugin", "status"]).await;
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    let row = |cm: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{}/{cm} ", env.ns)))
            .unwrap_or_else(|| panic!("no row for {cm}: {table}"))
            .to_string()
    };
    assert!(row("js-job").contains(" serving "), "{table}");
    assert!(row("py-job").contains(" conflict "), "{table}");
    let stray = table
        .lines()
        .find(|l| l.starts_with("elsewhere/stray "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        stray.contains(" unseen ") && stray.contains("no controller has seen this version"),
        "{stray}"
    );

    // New workflows of the type run on the owner (they used to fail).
    env.submit("uses-job", "nodes:\n  - {id: a, task: {type: job}}\n")
        .await;
    let wf = env.finish("uses-job", 30).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    assert_eq!(node(&wf, "a").plugin.as_ref().unwrap().name, "js-job");

    // A higher priority takes the type over; the displaced owner is told.
    let urgent = push(
        &env,
        "urgent-job",
        &version("echo", "urgent"),
        &job_manifest("urgent-job", 10),
    )
    .await;
    served_by(&env, "job", urgent, 30).await;
    let ev = wait_event(&env, "js-job", "PluginConflict").await;
    assert!(
        ev.message
            .as_deref()
            .unwrap_or_default()
            .contains("urgent-job serves it (higher priority 10)"),
        "{ev:?}"
    );
    wait_status(&env, "js-job", "conflict", |s| s.state == "conflict").await;

    // When the owners go, the rejected plugin is loaded after all.
    for cm in ["urgent-job", "js-job"] {
        configmaps(&env)
            .delete(cm, &DeleteParams::default())
            .await
            .unwrap();
    }
    let py_digest = Digest::of(&std::fs::read(&py).unwrap());
    served_by(&env, "job", py_digest, 30).await;
    wait_status(&env, "py-job", "serving", |s| s.state == "serving").await;
    assert_eq!(job_owner(&env).as_deref(), Some("py-job"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_waits_for_a_plugin_being_loaded_instead_of_failing() {
    let env = Env::start_hotload(config).await;
    // A compile in flight for a type nobody serves yet (held open here so
    // the wait can be watched; the real loader holds the same guard).
    let compiling = env.registry.begin_loading("slow", &["slow".to_string()]);
    env.submit("early", "nodes:\n  - {id: a, task: {type: slow}}\n")
        .await;
    let wf = env
        .wait_for("early", 30, |wf| {
            wf.status
                .as_ref()
                .and_then(|s| s.nodes.get("a"))
                .is_some_and(|n| n.reason.as_deref() == Some("WaitingForPlugin"))
        })
        .await;
    let a = node(&wf, "a");
    assert_eq!(a.phase, weft_dag::NodePhase::Pending);
    assert!(
        a.message
            .as_deref()
            .unwrap()
            .contains("waiting for plugin slow to finish loading"),
        "{a:?}"
    );
    assert!(env.pods_of("early").await.is_empty());
    // The load finishes: the node starts on what was loaded.
    let d = push(
        &env,
        "slow",
        &version("echo", "slow"),
        &manifest("slow", "slow", "1.0.0"),
    )
    .await;
    served_by(&env, "slow", d, 30).await;
    drop(compiling);
    let wf = env.finish("early", 30).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Succeeded);
    assert_eq!(
        node(&wf, "a").plugin.as_ref().unwrap().digest,
        d.to_string()
    );
    assert_eq!(node(&wf, "a").waiting_since, None);

    // A type that is neither served nor loading still fails at once.
    env.submit("unknown", "nodes:\n  - {id: a, task: {type: nobody}}\n")
        .await;
    let wf = env.finish("unknown", 30).await;
    assert_eq!(wf.status.as_ref().unwrap().phase, WorkflowPhase::Failed);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_created_right_after_an_update_runs_on_the_new_version() {
    let env = Env::start_hotload(config).await;
    let kc = env.kubeconfig.clone();
    let m = manifest("upd", "upd", "1.0.0");
    let d1 = push(&env, "upd", &version("echo", "upd-1"), &m).await;
    served_by(&env, "upd", d1, 30).await;
    // The new version is a bigger component, so its compile is not instant
    // (the k8s-resource plugin, salted so no cache has it).
    let big = salted(
        std::fs::read(root().join("target/plugins/k8s-resource.wasm")).unwrap(),
        format!("{:?}", Instant::now()).as_bytes(),
    );
    let dir = tempfile::tempdir().unwrap();
    let wasm = files(dir.path(), "upd", &big, &m.replace("1.0.0", "2.0.0"));
    let pushed = weft_cli(&kc, &["plugin", "push", &wasm]).await;
    assert!(pushed.status.success());
    let d2 = Digest::of(&big);
    // Once the loader has seen the change (a watch event away), a new
    // workflow waits for d2 rather than running d1.
    let start = Instant::now();
    while env.registry.loading("upd").is_none() && serving(&env, "upd") != Some(d2) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the loader never saw the push"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    env.submit("after-push", "nodes:\n  - {id: a, task: {type: upd, config: {manifest: {apiVersion: v1, kind: Pod, metadata: {name: x}}}}}\n").await;
    let wf = env
        .wait_for("after-push", 60, |wf| {
            wf.status
                .as_ref()
                .and_then(|s| s.nodes.get("a"))
                .is_some_and(|n| n.plugin.is_some())
        })
        .await;
    assert_eq!(
        node(&wf, "a").plugin.as_ref().unwrap().digest,
        d2.to_string()
    );
    // And `push --wait` of the same version returns at once: it serves.
    let again = weft_cli(&kc, &["plugin", "push", &wasm, "--wait"]).await;
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(stdout.contains(&format!("serving {d2}")), "{stdout}");
    env.stop().await;
}

/// Polls a Workflow until `ok` holds (for tests whose controller is a process).
async fn poll_workflow(
    api: &Api<weft::api::Workflow>,
    name: &str,
    secs: u64,
    ok: impl Fn(&weft::api::Workflow) -> bool,
) -> weft::api::Workflow {
    let start = Instant::now();
    loop {
        let wf = api.get(name).await.unwrap();
        if ok(&wf) {
            return wf;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "workflow {name}: {}",
            serde_json::to_string_pretty(&wf.status).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_versions_survive_a_controller_sigkill_and_each_workflow_finishes_on_its_own() {
    let bed = Bed::start().await;
    let client = bed.client.clone();
    let args = ["--plugin-namespace", bed.ns.as_str()];
    let mut controller = bed.controller("pins-1", &args);
    controller.metrics().await;
    let workflows: Api<weft::api::Workflow> = Api::default_namespaced(client.clone());
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let serving = async |d: Digest| {
        let start = Instant::now();
        loop {
            let st = cms.get("pin").await.ok().and_then(|cm| {
                serde_json::from_str::<PluginStatus>(
                    cm.annotations().get(package::ANNOTATION_STATUS)?,
                )
                .ok()
            });
            if st.as_ref().and_then(|s| s.serving.clone()) == Some(d.to_string()) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{d} never served: {st:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let gated = "nodes:\n  - {id: first, task: {type: pin}}\n  - {id: ok, dependsOn: [first], gate: {approval: {}}}\n  - {id: second, dependsOn: [ok], task: {type: pin}}\n";
    let waiting = |wf: &weft::api::Workflow| {
        wf.status
            .as_ref()
            .and_then(|s| s.nodes.get("ok"))
            .is_some_and(|n| n.task_phase.as_deref() == Some("waiting-for-approval"))
    };
    let mut digests = Vec::new();
    for (i, wf) in ["on-v1", "on-v2"].iter().enumerate() {
        let m = manifest("pin", "pin", &format!("{}.0.0", i + 1));
        let d = weft::hotload::push(
            &client,
            &bed.ns,
            "pin",
            &version("echo", wf),
            &m,
            Pinning::Pinned,
        )
        .await
        .unwrap()
        .digest;
        serving(d).await;
        let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(gated).unwrap();
        let w = weft::api::Workflow::new(wf, weft::api::WorkflowResourceSpec { spec });
        workflows.create(&Default::default(), &w).await.unwrap();
        poll_workflow(&workflows, wf, 60, waiting).await;
        digests.push(d);
    }
    // A third version: both pinned ones are now replaced versions.
    let d3 = weft::hotload::push(
        &client,
        &bed.ns,
        "pin",
        &version("echo", "v3"),
        &manifest("pin", "pin", "3.0.0"),
        Pinning::Pinned,
    )
    .await
    .unwrap()
    .digest;
    serving(d3).await;
    let archives = async || {
        cms.list(&ListParams::default().labels(package::LABEL_ARCHIVE))
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|cm| cm.data.as_ref()?.get(package::KEY_DIGEST).cloned())
            .collect::<std::collections::BTreeSet<String>>()
    };
    let want: std::collections::BTreeSet<String> = digests.iter().map(|d| d.to_string()).collect();
    let start = Instant::now();
    while archives().await != want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "archives: {:?}",
            archives().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    controller.kill();
    let restarted = bed.controller("pins-2", &args);
    restarted.metrics().await;
    let patch = json!({"metadata": {"annotations": {"approve.weft.dev/ok": "true"}}});
    for wf in ["on-v1", "on-v2"] {
        workflows
            .patch(wf, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    for (wf, d) in ["on-v1", "on-v2"].iter().zip(&digests) {
        let done = poll_workflow(&workflows, wf, 60, |w| {
            w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await;
        assert_eq!(
            done.status.as_ref().unwrap().phase,
            WorkflowPhase::Succeeded,
            "{wf}"
        );
        for n in ["first", "second"] {
            assert_eq!(
                node(&done, n).plugin.as_ref().unwrap().digest,
                d.to_string(),
                "{wf} node {n} after the restart; log:\n{}",
                restarted.log()
            );
        }
    }
    // Unpinned now: the archives go.
    let start = Instant::now();
    while !archives().await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "archives stay: {:?}",
            archives().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(restarted);
    bed.stop().await;
}

/// Plugin configuration from a Secret, as a user sets it up: `weft plugin
/// push` of a manifest naming the Secret, `kubectl create secret`, a
/// rotation with `kubectl apply`, the operator's `--registry-config`
/// overrides (one from another Secret), against a real `weft controller`.
/// The guest gets the values (the echo guest shows its plugin config on the
/// Pod it builds); ConfigMaps, Events, Workflow status, metrics, the
/// controller's log and `weft plugin status` never show them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_config_comes_from_secrets_and_never_shows_their_values() {
    let bed = Bed::start().await;
    let (kc, client) = (bed.kubeconfig.clone(), bed.client.clone());
    let registry_config = bed.dir.path().join("registry.yaml");
    std::fs::write(
        &registry_config,
        "plugins:\n  sec:\n    config:\n      plain: overridden\n      opKey: {valueFrom: {secretKeyRef: {name: op-creds, key: k}}}\n",
    )
    .unwrap();
    let op =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: op-creds}\nstringData: {k: op-s3cret}\n";
    let out = common::kubectl(&kc, &["apply", "-f", "-"], Some(op)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let controller = bed.controller(
        "secrets",
        &[
            "--plugin-namespace",
            &bed.ns,
            "--registry-config",
            registry_config.to_str().unwrap(),
        ],
    );
    controller.metrics().await;
    let kubectl = async |args: &[&str], stdin: Option<&str>| {
        let out = common::kubectl(&kc, args, stdin).await;
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let manifest = format!(
        "{}config:\n  greeting:\n    valueFrom: {{secretKeyRef: {{name: sec-creds, key: greeting}}}}\n  tokens:\n    valueFrom: {{secretKeyRef: {{name: sec-creds, key: tokens.json, format: json}}}}\n  extra:\n    valueFrom: {{secretKeyRef: {{name: sec-creds, key: absent, optional: true}}}}\n  plain: visible\n",
        manifest("sec", "sec", "1.0.0")
    );
    let wasm = files(
        bed.dir.path(),
        "sec",
        &version("echo", "secrets"),
        &manifest,
    );
    let yaml = wasm.replace(".wasm", ".yaml");

    // No Secret yet: refused, naming the Secret and the key.
    let out = weft_cli(
        &kc,
        &[
            "plugin",
            "push",
            &wasm,
            "--manifest",
            &yaml,
            "--wait",
            "--timeout",
            "90s",
        ],
    )
    .await;
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "Secret {}/sec-creds key \"greeting\": not found",
            bed.ns
        )),
        "{said}"
    );

    // The Secret appears: the plugin loads on its own.
    kubectl(
        &[
            "create",
            "secret",
            "generic",
            "sec-creds",
            "--from-literal=greeting=hunter2-v1",
            "--from-literal=tokens.json={\"t0k3n-v1\": \"robot:ci\"}",
        ],
        None,
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let status = async || -> Option<PluginStatus> {
        let cm = cms.get("sec").await.ok()?;
        serde_json::from_str(cm.annotations().get(package::ANNOTATION_STATUS)?).ok()
    };
    let start = Instant::now();
    while status().await.is_none_or(|s| s.state != "serving") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{:?}\n{}",
            status().await,
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let workflows: Api<weft::api::Workflow> = Api::default_namespaced(client.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(client.clone());
    let run = async |wf: &str| -> serde_json::Value {
        let yaml = format!(
            "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {wf}}}\nspec:\n  nodes:\n    - {{id: a, task: {{type: sec}}}}\n"
        );
        kubectl(&["create", "-f", "-"], Some(&yaml)).await;
        let done = poll_workflow(&workflows, wf, 60, |w| {
            w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await;
        assert_eq!(
            done.status.as_ref().unwrap().phase,
            WorkflowPhase::Succeeded,
            "{wf}"
        );
        let pod = pods
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={wf}")))
            .await
            .unwrap()
            .items
            .remove(0);
        serde_json::from_str(&pod.annotations()["echo.weft.dev/plugin-config"]).unwrap()
    };
    assert_eq!(
        run("uses-v1").await,
        json!({"greeting": "hunter2-v1", "tokens": {"t0k3n-v1": "robot:ci"}, "plain": "overridden", "opKey": "op-s3cret"})
    );

    // Rotation: the serving plugin is configured again, same digest.
    let rotated = kubectl(
        &[
            "create",
            "secret",
            "generic",
            "sec-creds",
            "--from-literal=greeting=hunter2-v2",
            "--from-literal=tokens.json={\"t0k3n-v2\": \"robot:ci\"}",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
        None,
    )
    .await;
    kubectl(&["apply", "-f", "-"], Some(&rotated)).await;
    let events = async || kubectl(&["get", "events", "-o", "yaml"], None).await;
    let start = Instant::now();
    while !events().await.contains("PluginReconfigured") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(run("uses-v2").await["greeting"], "hunter2-v2");

    // A required key gone: the last good values keep serving, with a Warning.
    let broken = rotated.replace("greeting:", "renamed:");
    kubectl(&["apply", "-f", "-"], Some(&broken)).await;
    let start = Instant::now();
    while !events().await.contains("PluginConfigError") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        events().await.contains("keeps its previous configuration"),
        "{}",
        events().await
    );
    assert_eq!(run("uses-v2-still").await["greeting"], "hunter2-v2");

    // Nowhere else: not in ConfigMaps, Events, Workflows, metrics, logs or status.
    let cli = weft_cli(&kc, &["plugin", "status"]).await;
    let places = [
        (
            "configmaps",
            kubectl(&["get", "configmaps", "-A", "-o", "yaml"], None).await,
        ),
        ("events", events().await),
        (
            "workflows",
            kubectl(&["get", "workflows", "-o", "yaml"], None).await,
        ),
        ("metrics", controller.metrics().await),
        ("controller log", controller.log()),
        (
            "weft plugin status",
            String::from_utf8_lossy(&cli.stdout).into_owned(),
        ),
    ];
    for (place, text) in places {
        for value in ["hunter2", "t0k3n", "op-s3cret"] {
            assert!(!text.contains(value), "{value} shows in {place}:\n{text}");
        }
    }
}

async fn push_rollout(
    env: &Env,
    name: &str,
    component: &[u8],
    manifest: &str,
    mode: weft_plugin::rollout::RolloutMode,
) -> Digest {
    weft::hotload::push_with(
        &env.client,
        &env.ns,
        name,
        component,
        manifest,
        Pinning::Pinned,
        Some(mode),
    )
    .await
    .expect("push")
    .digest
}

fn plugin_file(name: &str) -> Vec<u8> {
    std::fs::read(root().join(format!("target/plugins/{name}.wasm"))).expect("make guests")
}

const ONE_NODE: &str =
    "nodes:\n  - {id: a, task: {type: ro, config: {image: busybox, command: [\"true\"]}}}\n";

/// Shadow: a candidate that builds a different Pod is compared on real
/// calls and reported (status --diff, metric), while every workflow keeps
/// running on the serving version; `weft plugin promote` then serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_is_compared_on_real_calls_and_promoted() {
    let env = Env::start_hotload(config).await;
    let kc = env.kubeconfig.clone();
    let echo = push(
        &env,
        "ro",
        &version("echo", "serving"),
        &manifest("ro", "ro", "1.0.0"),
    )
    .await;
    served_by(&env, "ro", echo, 30).await;
    // The pod plugin as version 2 of `ro`: it builds another Pod.
    let pod = push_rollout(
        &env,
        "ro",
        &plugin_file("pod"),
        &manifest("ro", "ro", "2.0.0"),
        weft_plugin::rollout::RolloutMode::Shadow,
    )
    .await;
    wait_status(&env, "ro", "the shadow", |s| s.state == "shadow").await;
    wait_event(&env, "ro", "PluginRolloutStarted").await;
    for i in 0..3 {
        let wf = format!("shadowed-{i}");
        env.submit(&wf, ONE_NODE).await;
        let done = env.finish(&wf, 60).await;
        assert_eq!(
            done.status.as_ref().unwrap().phase,
            WorkflowPhase::Succeeded
        );
        assert_eq!(
            node(&done, "a").plugin.as_ref().unwrap().digest,
            echo.to_string()
        );
        let pod = &env.pods_of(&wf).await[0];
        assert!(
            pod.annotations().contains_key("echo.weft.dev/calls"),
            "the serving version built it"
        );
    }
    let st = wait_status(&env, "ro", "differences", |s| {
        s.rollout
            .as_ref()
            .and_then(|r| r.shadow.as_ref())
            .is_some_and(|sh| sh.diffs >= 3)
    })
    .await;
    let shadow = st.rollout.unwrap().shadow.unwrap();
    assert!(
        shadow
            .samples
            .iter()
            .any(|d| d.starts_with("build-resource of shadowed-")),
        "{shadow:?}"
    );
    assert!(
        shadow
            .samples
            .iter()
            .any(|d| d.contains("/metadata/annotations")),
        "{shadow:?}"
    );
    let m = env.ctx.metrics.render();
    assert!(
        common::sample(
            &m,
            "weft_plugin_shadow_calls_total{plugin=\"ro\",call=\"build-resource\",result=\"diff\"}"
        )
        .is_some_and(|v| v >= 3.0),
        "{m}"
    );
    let out = weft_cli(&kc, &["plugin", "status", "--diff"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shadow 2.0.0") && text.contains("differing"),
        "{text}"
    );
    assert!(text.contains("  - build-resource of shadowed-"), "{text}");

    let out = weft_cli(&kc, &["plugin", "promote", "ro"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    served_by(&env, "ro", pod, 30).await;
    wait_status(&env, "ro", "serving", |s| {
        s.state == "serving" && s.rollout.is_none()
    })
    .await;
    env.submit("promoted", ONE_NODE).await;
    let done = env.finish("promoted", 60).await;
    assert_eq!(
        node(&done, "a").plugin.as_ref().unwrap().digest,
        pod.to_string()
    );
    env.stop().await;
}

/// Canary 25%: of 100 new workflows exactly 25 run on the candidate, each
/// workflow on one version throughout; `weft plugin abort` sends the rest
/// back to the serving version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_takes_its_share_of_new_workflows_and_is_aborted() {
    let env = Env::start_hotload(config).await;
    let kc = env.kubeconfig.clone();
    let stable = push(
        &env,
        "ro",
        &version("echo", "stable"),
        &manifest("ro", "ro", "1.0.0"),
    )
    .await;
    served_by(&env, "ro", stable, 30).await;
    let out = weft_cli(
        &kc,
        &[
            "plugin",
            "push",
            &files(
                &tempfile::tempdir().unwrap().keep(),
                "ro",
                &version("echo", "canary"),
                &manifest("ro", "ro", "2.0.0"),
            ),
            "--canary",
            "25",
            "--wait",
        ],
    )
    .await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("rolled out as canary 25%"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let canary = Digest::of(&version("echo", "canary"));
    let two = "nodes:\n  - {id: a, task: {type: ro, config: {}}}\n  - {id: b, dependsOn: [a], task: {type: ro, config: {}}}\n";
    for i in 0..100 {
        env.submit(&format!("c-{i}"), two).await;
    }
    let mut on_canary = 0;
    for i in 0..100 {
        let done = env.finish(&format!("c-{i}"), 120).await;
        let (a, b) = (node(&done, "a"), node(&done, "b"));
        let d = a.plugin.as_ref().unwrap().digest.clone();
        assert_eq!(
            Some(&d),
            b.plugin.as_ref().map(|p| &p.digest),
            "one version per workflow"
        );
        on_canary += usize::from(d == canary.to_string());
    }
    assert!(
        (24..=26).contains(&on_canary),
        "{on_canary} of 100 on the canary"
    );
    // The status annotation is refreshed after the workflows finish.
    let st = wait_status(&env, "ro", "all 100 routed", |s| {
        s.rollout.as_ref().is_some_and(|r| r.routed == 100)
    })
    .await;
    let r = st.rollout.unwrap();
    assert_eq!((r.routed, r.to_candidate), (100, on_canary as u64));

    let out = weft_cli(&kc, &["plugin", "abort", "ro"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_status(&env, "ro", "aborted", |s| s.state == "aborted").await;
    wait_event(&env, "ro", "PluginRolloutAborted").await;
    for i in 0..8 {
        let wf = format!("after-{i}");
        env.submit(&wf, two).await;
        let done = env.finish(&wf, 60).await;
        assert_eq!(
            node(&done, "a").plugin.as_ref().unwrap().digest,
            stable.to_string()
        );
    }
    env.stop().await;
}

/// A canary that traps is aborted by the circuit breaker on its own: a
/// Warning Event, the metric, `rollout: aborted` on its head, and new
/// workflows on the serving version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_aborts_a_trapping_canary() {
    let env = Env::start_hotload(config).await;
    let stable = push(
        &env,
        "ro",
        &version("echo", "stable"),
        &manifest("ro", "ro", "1.0.0"),
    )
    .await;
    served_by(&env, "ro", stable, 30).await;
    push_rollout(
        &env,
        "ro",
        &guest("panic"),
        &manifest("ro", "ro", "2.0.0"),
        weft_plugin::rollout::RolloutMode::Canary { percent: 100 },
    )
    .await;
    wait_status(&env, "ro", "the canary", |s| s.state == "canary").await;
    for i in 0..3 {
        env.submit(&format!("trap-{i}"), ONE_NODE).await;
    }
    let e = wait_event(&env, "ro", "PluginRolloutAborted").await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(
        e.message
            .as_deref()
            .unwrap_or_default()
            .contains("circuit breaker aborted"),
        "{e:?}"
    );
    let st = wait_status(&env, "ro", "aborted", |s| s.state == "aborted").await;
    assert_eq!(st.serving, Some(stable.to_string()));
    let head = configmaps(&env).get("ro").await.unwrap();
    assert_eq!(head.data.unwrap()[package::KEY_ROLLOUT], "aborted");
    let m = env.ctx.metrics.render();
    assert_eq!(
        common::sample(&m, "weft_plugin_rollouts_aborted_total{plugin=\"ro\"}"),
        Some(1.0),
        "{m}"
    );
    env.submit("after-trap", ONE_NODE).await;
    let done = env.finish("after-trap", 60).await;
    assert_eq!(
        done.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded
    );
    assert_eq!(
        node(&done, "a").plugin.as_ref().unwrap().digest,
        stable.to_string()
    );
    env.stop().await;
}

/// A canary survives a controller restart: the serving version comes back
/// from its archive (the head holds the candidate), the candidate is loaded
/// beside it again, and new workflows still split between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_survives_a_controller_restart() {
    let bed = Bed::start().await;
    let (kc, client) = (bed.kubeconfig.clone(), bed.client.clone());
    let args = ["--plugin-namespace", bed.ns.as_str()];
    let mut first = bed.controller("canary-1", &args);
    first.metrics().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let status = async || -> Option<PluginStatus> {
        let cm = cms.get("ro").await.ok()?;
        serde_json::from_str(cm.annotations().get(package::ANNOTATION_STATUS)?).ok()
    };
    let stable_file = files(
        bed.dir.path(),
        "ro",
        &version("echo", "stable"),
        &manifest("ro", "ro", "1.0.0"),
    );
    let out = weft_cli(&kc, &["plugin", "push", &stable_file, "--wait"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stable = Digest::of(&version("echo", "stable")).to_string();
    let canary_dir = tempfile::tempdir().unwrap();
    let canary_file = files(
        canary_dir.path(),
        "ro",
        &version("echo", "canary"),
        &manifest("ro", "ro", "2.0.0"),
    );
    let out = weft_cli(
        &kc,
        &["plugin", "push", &canary_file, "--canary", "50", "--wait"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let canary = Digest::of(&version("echo", "canary")).to_string();

    first.kill();
    let second = bed.controller("canary-2", &args);
    second.metrics().await;
    let start = Instant::now();
    loop {
        let st = status().await;
        let ok = st.as_ref().is_some_and(|s| {
            s.state == "canary"
                && s.serving.as_deref() == Some(stable.as_str())
                && s.rollout.as_ref().is_some_and(|r| r.candidate == canary)
        });
        if ok {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{st:?}\n{}",
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let workflows: Api<weft::api::Workflow> = Api::default_namespaced(client.clone());
    let mut on = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..4 {
        let name = format!("after-restart-{i}");
        let spec: weft_dag::WorkflowSpec =
            serde_yaml::from_str("nodes:\n  - {id: a, task: {type: ro, config: {}}}\n").unwrap();
        let w = weft::api::Workflow::new(&name, weft::api::WorkflowResourceSpec { spec });
        workflows.create(&Default::default(), &w).await.unwrap();
        let done = poll_workflow(&workflows, &name, 60, |w| {
            w.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        })
        .await;
        *on.entry(node(&done, "a").plugin.as_ref().unwrap().digest.clone())
            .or_default() += 1;
    }
    assert_eq!(on.get(&stable), Some(&2), "{on:?}");
    assert_eq!(on.get(&canary), Some(&2), "{on:?}");
}
