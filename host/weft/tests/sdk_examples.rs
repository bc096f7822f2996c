//! The SDK examples (C, Python, JavaScript), built from source by `make
//! guests` into target/sdk-examples: each passes the conformance checks
//! and runs as a task in one workflow on the dev cluster, hot-loaded from
//! ConfigMaps (the Python component, 9 MB compressed, through split
//! ConfigMaps). The test plays the Ray and Job operators.

mod common;

use std::time::Duration;

use common::{Env, node, root};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
};
use serde_json::{Value, json};
use weft_dag::WorkflowPhase;
use weft_plugin::{EngineConfig, Pinning, Plugin, PluginEngine, TaskContext, manifest::Manifest};

/// name in target/sdk-examples, its task file, the plugin's kind of child.
const EXAMPLES: [(&str, &str); 3] = [
    ("c-configmap", "sdk/c/examples/configmap-writer/task.json"),
    ("py-rayjob", "sdk/python/examples/rayjob/task.json"),
    ("js-job", "sdk/js/examples/k8s-job/task.json"),
];

fn task_file(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).expect("task file");
    serde_json::from_str(&text).expect("task JSON")
}

fn example(name: &str) -> (Vec<u8>, String) {
    let dir = root().join("target/sdk-examples");
    let wasm = std::fs::read(dir.join(format!("{name}.wasm")))
        .unwrap_or_else(|e| panic!("{name}.wasm: {e}: build the SDK examples (make guests)"));
    let yaml = std::fs::read_to_string(dir.join(format!("{name}.yaml"))).unwrap();
    (wasm, yaml)
}

/// An engine with the tests' shared compile cache.
fn engine() -> PluginEngine {
    PluginEngine::new(EngineConfig {
        cache_dir: Some(root().join("target/weft-test-cache")),
        ..EngineConfig::default()
    })
    .unwrap()
}

/// The example `name` (a path under target/sdk-examples) as a task plugin.
fn load(engine: &PluginEngine, name: &str) -> std::sync::Arc<weft_plugin::TaskPlugin> {
    let (wasm, yaml) = example(name);
    let manifest = Manifest::parse(&yaml, name).unwrap();
    match Plugin::load(engine, &wasm, manifest, name).unwrap() {
        (Plugin::Task(p), _) => p,
        _ => panic!("{name} is not a task plugin"),
    }
}

/// A task file's task with `config`.
fn context(t: &Value, config: Value) -> TaskContext {
    TaskContext::for_attempt(
        "example",
        "00000000-0000-0000-0000-000000000000",
        "default",
        "task",
        0,
        t["taskType"].as_str().unwrap(),
        config,
        t.get("inputs").cloned().unwrap_or(json!({})),
    )
}

#[test]
fn every_sdk_example_passes_the_conformance_checks() {
    let engine = engine();
    // The JavaScript example also as built with SpiderMonkey
    // (WEFT_JS_ENGINE=starlingmonkey; QuickJS is the default).
    let spidermonkey = ("starlingmonkey/js-job", "sdk/js/examples/k8s-job/task.json");
    for (name, task) in EXAMPLES.into_iter().chain([spidermonkey]) {
        let plugin = load(&engine, name);
        let t = task_file(task);
        let report = weft_plugin::conformance::check(&plugin, &[context(&t, t["config"].clone())]);
        assert!(report.passed(), "{name}: {report:#?}");
    }
}

/// The JavaScript example built with QuickJS (the default) answers what
/// the SpiderMonkey build answers: the same Job, the same phases for the same
/// observed objects, the same refusal of a bad config.
#[test]
fn both_javascript_engines_answer_alike() {
    let engine = engine();
    let (spidermonkey, quickjs) = (
        load(&engine, "starlingmonkey/js-job"),
        load(&engine, "js-job"),
    );
    let t = task_file("sdk/js/examples/k8s-job/task.json");
    let ctx = |config: Value| context(&t, config);
    let good = ctx(t["config"].clone());
    let (a, b) = (
        spidermonkey.build_resource(&good).unwrap().0,
        quickjs.build_resource(&good).unwrap().0,
    );
    assert_eq!(a, b);
    assert_eq!(a["kind"], "Job", "{a}");
    let observed = [
        json!({}),
        json!({"status": {"active": 1}}),
        json!({"status": {"succeeded": 1}}),
        json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "bäckoff ✗"}]}}),
        json!({"status": "garbage"}),
    ];
    for o in &observed {
        let (a, b) = (
            spidermonkey.get_task_phase(&good, o).unwrap().0,
            quickjs.get_task_phase(&good, o).unwrap().0,
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "observed {o}");
    }
    let bad = ctx(json!({"image": 7}));
    let (a, b) = (
        spidermonkey.build_resource(&bad).unwrap_err().to_string(),
        quickjs.build_resource(&bad).unwrap_err().to_string(),
    );
    assert_eq!(a, b);
    assert!(a.contains("image"), "{a}");
}

/// A plugin built with the SDK's default engine (QuickJS, which has no
/// console and no TextEncoder of its own) may use both: `console.*` lines
/// reach the host's log at their level, text survives a UTF-8 round trip.
/// Built and run as an author would: `sdk/js/build.sh`, `weft plugin test`.
#[test]
fn quickjs_plugins_get_a_console_and_text_codecs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("console-task");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.js"),
        r#"import { definePlugin, phase } from 'weft-plugin-sdk';
export const k8sTask = definePlugin({
  buildResource(ctx) {
    console.log('hello from console', { n: 1 });
    console.warn('careful');
    const text = new TextDecoder().decode(new TextEncoder().encode('naïve ✓ 😀'));
    return { apiVersion: 'v1', kind: 'ConfigMap', metadata: ctx.metadata(), data: { text } };
  },
  getTaskPhase() { return phase.success({}); },
});
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("weft-plugin.yaml"),
        "name: console-task\nversion: 0.1.0\nworld: k8s-task-plugin\ntaskTypes: [console]\n\
         resources:\n  - {apiVersion: v1, kind: ConfigMap}\nlimits: {deadline: 2s, memory: 64Mi}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("task.json"),
        r#"{"taskType": "console", "config": {}}"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    let build = std::process::Command::new("bash")
        .current_dir(root())
        .args([
            "sdk/js/build.sh",
            dir.to_str().unwrap(),
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&build.stdout);
    assert!(
        build.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&build.stderr)
    );
    assert!(said.contains("(quickjs)"), "{said}");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["plugin", "test", "--log-format", "json"])
        .arg(out.join("console-task.wasm"))
        .arg("--task")
        .arg(dir.join("task.json"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("text: naïve ✓ 😀"), "{stdout}");
    let line = |msg: &str| -> Value {
        stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(msg))
            })
            .unwrap_or_else(|| panic!("no log line with {msg:?}: {stderr}"))
    };
    let hello = line("hello from console");
    assert_eq!(hello["level"], "INFO", "{hello}");
    assert_eq!(hello["fields"]["message"], r#"hello from console {"n":1}"#);
    assert_eq!(line("careful")["level"], "WARN");
}

fn rayjob_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "rayjobs.ray.io"},
        "spec": {
            "group": "ray.io",
            "scope": "Namespaced",
            "names": {"kind": "RayJob", "plural": "rayjobs", "singular": "rayjob", "listKind": "RayJobList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

async fn child(
    env: &Env,
    gvk: &GroupVersionKind,
    plural: &str,
    workflow: &str,
) -> (Api<DynamicObject>, String) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(gvk, plural),
    );
    for _ in 0..600 {
        let list = api
            .list(&ListParams::default().labels(&format!("weft.dev/workflow={workflow}")))
            .await
            .unwrap();
        if let Some(o) = list.items.first() {
            return (api.clone(), o.metadata.name.clone().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {} for {workflow}", gvk.kind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_example_runs_as_a_task_hot_loaded_from_configmaps() {
    let env = Env::start_hotload(|ns| weft::hotload::HotloadConfig {
        namespaces: vec![ns.into()],
        ..Default::default()
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.create(&PostParams::default(), &rayjob_crd())
        .await
        .unwrap();

    let mut nodes = Vec::new();
    for (name, task) in EXAMPLES {
        let (wasm, yaml) = example(name);
        let packed =
            weft::hotload::push(&env.client, "default", name, &wasm, &yaml, Pinning::Pinned)
                .await
                .expect("push");
        // Split exactly when compressed it is over one part (the Python
        // component, 9 MB; the JavaScript one, 1.8 MB with QuickJS, fits).
        let compressed = weft::hotload::package::compress(&wasm).len();
        assert_eq!(
            !packed.parts.is_empty(),
            compressed > weft::hotload::package::PART_SIZE,
            "{name}: {} bytes, {compressed} compressed, {} parts",
            wasm.len(),
            packed.parts.len()
        );
        let t = task_file(task);
        let task_type = t["taskType"].as_str().unwrap().to_string();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while env.registry.task_plugin(&task_type).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{name} never served {task_type}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        nodes.push(json!({
            "id": name,
            "inputs": t.get("inputs").cloned().unwrap_or(json!({})),
            "task": {"type": task_type, "config": t["config"]},
        }));
    }
    let spec = serde_yaml::to_string(&json!({"nodes": nodes})).unwrap();
    env.submit("sdk", &spec).await;

    // The operators' moves.
    let (rayjobs, ray) = child(
        &env,
        &GroupVersionKind::gvk("ray.io", "v1", "RayJob"),
        "rayjobs",
        "sdk",
    )
    .await;
    rayjobs
        .patch_status(
            &ray,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                "jobId": "raysubmit_123", "dashboardURL": "ray-head:8265"}}),
            ),
        )
        .await
        .unwrap();
    let (jobs, job) = child(
        &env,
        &GroupVersionKind::gvk("batch", "v1", "Job"),
        "jobs",
        "sdk",
    )
    .await;
    jobs.patch_status(
        &job,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"succeeded": 1,
            "conditions": [{"type": "Complete", "status": "True"}]}})),
    )
    .await
    .unwrap();

    let done = env.finish("sdk", 120).await;
    assert_eq!(
        done.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{:#?}",
        done.status
    );
    assert_eq!(
        node(&done, "py-rayjob").outputs.as_ref().unwrap()["jobId"],
        "raysubmit_123"
    );
    assert!(node(&done, "c-configmap").outputs.is_some());
    env.stop().await;
}
