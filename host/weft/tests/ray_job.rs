//! The `ray-job` web-API plugin against a real Ray head (from PyPI, on
//! loopback, with Ray's token authentication on), a real dev cluster and a
//! real `weft controller` process: one head, one cluster and one
//! controller for the whole file (a head takes ~3 s and ~600 MiB).
//!
//! Checked through Ray's own Job API: a job runs to Succeeded with its
//! outputs; a job that raises fails the node with Ray's message; aborting
//! the Workflow stops the job; a SIGKILL of the controller between
//! `create` and the first `get` submits nothing twice; a request outside
//! the operator's allow-list is denied naming the URL and never connects;
//! a response over the size cap is refused; the token, which only the
//! host injects (from a Secret), is in no status, Event or log line.

mod common;

use std::{path::Path, process::Command, time::Duration};

use kube::api::{Api, Patch, PatchParams};
use weft::api::Workflow;
use weft_dag::{NodePhase, WorkflowPhase};

const TOKEN: &str = "ray-tok-7f3a9c1e5b2d";

/// A Ray head for this file, stopped when dropped.
struct RayHead {
    dir: tempfile::TempDir,
    url: String,
}

impl RayHead {
    fn start() -> RayHead {
        let script = common::root().join("tests/support/ray-head.sh");
        let ok = Command::new("bash")
            .arg(&script)
            .arg("install")
            .status()
            .unwrap();
        assert!(ok.success(), "installing Ray failed");
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(dir.path())
            .env("WEFT_RAY_AUTH_TOKEN", TOKEN)
            .env("WEFT_RAY_WATCH_PID", std::process::id().to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ray head: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        RayHead { dir, url }
    }

    /// `GET path` on the Job API, as a user with the token would: (status, body).
    fn get(&self, path: &str) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-H"])
            .arg(format!("Authorization: Bearer {TOKEN}"))
            .arg(format!("{}{path}", self.url))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// `POST /api/jobs/` as a user would.
    fn submit(&self, body: &serde_json::Value) -> (u16, String) {
        let out = Command::new("curl")
            .args([
                "-s",
                "-w",
                "\n%{http_code}",
                "-H",
                "content-type: application/json",
                "-H",
            ])
            .arg(format!("Authorization: Bearer {TOKEN}"))
            .arg("--data")
            .arg(body.to_string())
            .arg(format!("{}/api/jobs/", self.url))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    fn job(&self, id: &str) -> Option<serde_json::Value> {
        match self.get(&format!("/api/jobs/{id}")) {
            (200, body) => serde_json::from_str(&body).ok(),
            _ => None,
        }
    }

    /// Whether job `id` reaches `status` within `secs` seconds (Ray's own answer).
    async fn reaches(&self, id: &str, status: &str, secs: u64) -> bool {
        for _ in 0..secs * 5 {
            if self.job(id).is_some_and(|j| j["status"] == status) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// Every job the head knows.
    fn jobs(&self) -> Vec<serde_json::Value> {
        let (_, body) = self.get("/api/jobs/");
        serde_json::from_str(&body).unwrap_or_default()
    }
}

impl Drop for RayHead {
    fn drop(&mut self) {
        let script = common::root().join("tests/support/ray-head.sh");
        let _ = Command::new("bash")
            .arg(script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    common::kubectl_ok(kubeconfig, args, stdin).await
}

fn workflow_yaml(name: &str, nodes: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodes:\n{nodes}"
    )
}

fn ray_node(id: &str, address: &str, entrypoint: &str) -> String {
    let entrypoint = serde_json::to_string(entrypoint).unwrap();
    format!(
        "    - {{id: {id}, task: {{type: ray-job, config: {{address: '{address}', entrypoint: {entrypoint}}}}}}}\n"
    )
}

async fn wait_workflow(
    api: &Api<Workflow>,
    name: &str,
    secs: u64,
    done: impl Fn(&Workflow) -> bool,
) -> Workflow {
    for _ in 0..secs * 5 {
        if let Ok(wf) = api.get(name).await
            && done(&wf)
        {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{name}: not there in {secs} s: {:?}",
        api.get(name).await.ok().and_then(|w| w.status)
    );
}

fn terminal(wf: &Workflow) -> bool {
    wf.status.as_ref().is_some_and(|s| s.phase.is_terminal())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ray_jobs_run_fail_abort_survive_a_crash_and_stay_in_their_lane() {
    let head = RayHead::start();
    let (dir, _cluster, kubeconfig, client) = common::dev_cluster().await;
    // The token, only in a Secret; the operator's settings name it and
    // narrow the plugin to the head's address.
    let port: u16 = head.url.rsplit(':').next().unwrap().parse().unwrap();
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: ray-token, namespace: default}}\nstringData: {{token: {TOKEN}}}\n"
    );
    kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&secret)).await;
    let registry_config = dir.path().join("registry.yaml");
    std::fs::write(
        &registry_config,
        format!(
            "plugins:\n  ray-job: &ray\n    config:\n      credentials:\n        - header: Authorization\n          prefix: 'Bearer '\n          value: {{valueFrom: {{secretKeyRef: {{name: ray-token, key: token}}}}}}\n      egress:\n        allow: [{{host: 127.0.0.1, ports: [{port}], methods: [GET, POST], schemes: [http]}}]\n  ray-hot: *ray\n"
        ),
    )
    .unwrap();
    let args = [
        "--plugin-namespace",
        "default",
        "--workflow-events",
        "all",
        "--registry-config",
        registry_config.to_str().unwrap(),
    ];
    let mut controller = common::ControllerProcess::start(&kubeconfig, "ray", &args);
    controller.metrics().await;
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let url = head.url.clone();

    // 1. A job that prints its outputs succeeds with them; a job that
    // raises fails with Ray's message. Created with kubectl.
    let ok = "python -c \"import json; print(json.dumps({'weft.outputs': {'answer': 42, 'who': 'ray'}}))\"";
    let boom = "python -c \"raise ValueError('boom 42')\"";
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-basic", &ray_node("ok", &url, ok))),
    )
    .await;
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-boom", &ray_node("boom", &url, boom))),
    )
    .await;
    let wf = wait_workflow(&api, "ray-basic", 120, terminal).await;
    let st = wf.status.unwrap();
    let okn = &st.nodes["ok"];
    assert_eq!(okn.phase, NodePhase::Succeeded, "{:?}", okn.message);
    let outputs = okn.outputs.as_ref().unwrap();
    assert_eq!(outputs["answer"], 42);
    assert_eq!(outputs["who"], "ray");
    let r = okn.resource.as_ref().unwrap();
    assert_eq!(
        (r.kind.as_str(), r.name.as_str()),
        ("ray-job", "ray-basic-ok-0")
    );
    assert!(
        r.meta.as_deref().unwrap().contains("ray-basic-ok-0"),
        "{r:?}"
    );
    assert!(
        okn.log_links
            .iter()
            .any(|l| l.uri.contains("ray-basic-ok-0")),
        "{:?}",
        okn.log_links
    );
    assert_eq!(head.job("ray-basic-ok-0").unwrap()["status"], "SUCCEEDED");
    let wf = wait_workflow(&api, "ray-boom", 120, terminal).await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Failed);
    let boomn = &st.nodes["boom"];
    assert_eq!(boomn.phase, NodePhase::Failed);
    let msg = boomn.message.as_deref().unwrap_or_default();
    assert!(msg.contains("ValueError: boom 42"), "{msg}");
    assert_eq!(head.job("ray-boom-boom-0").unwrap()["status"], "FAILED");
    // kubectl shows the same outputs.
    let out = kubectl(
        &kubeconfig,
        &[
            "get",
            "workflow",
            "ray-basic",
            "-o",
            "jsonpath={.status.nodes.ok.outputs.answer}",
        ],
        None,
    )
    .await;
    assert_eq!(out.trim(), "42");

    // 2. Abort: the running Ray job is stopped, as Ray's API tells.
    let sleeper = ray_node("long", &url, "python -c \"import time; time.sleep(300)\"");
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-abort", &sleeper)),
    )
    .await;
    let running = head.reaches("ray-abort-long-0", "RUNNING", 60).await;
    assert!(
        running,
        "the long job never ran: {:?}",
        head.job("ray-abort-long-0")
    );
    api.patch(
        "ray-abort",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"abort": true}})),
    )
    .await
    .unwrap();
    let wf = wait_workflow(&api, "ray-abort", 60, terminal).await;
    assert_eq!(wf.status.unwrap().phase, WorkflowPhase::Aborted);
    let stopped = head.reaches("ray-abort-long-0", "STOPPED", 30).await;
    assert!(
        stopped,
        "Ray job not stopped: {:?}",
        head.job("ray-abort-long-0")
    );

    // 2b. The node's timeout counts the remote job's time: the attempt
    // fails and its job is stopped.
    let timed = format!(
        "    - {{id: slow, timeout: 4s, task: {{type: ray-job, config: {{address: '{url}', entrypoint: 'sleep 300'}}}}}}\n"
    );
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-timeout", &timed)),
    )
    .await;
    let wf = wait_workflow(&api, "ray-timeout", 90, terminal).await;
    let n = &wf.status.unwrap().nodes["slow"];
    assert_eq!(n.phase, NodePhase::Failed);
    assert!(
        n.message.as_deref().unwrap_or_default().contains("4s"),
        "{:?}",
        n.message
    );
    let stopped = head.reaches("ray-timeout-slow-0", "STOPPED", 30).await;
    assert!(
        stopped,
        "timed-out job not stopped: {:?}",
        head.job("ray-timeout-slow-0")
    );

    // 3. SIGKILL once Ray has the job, before the first get (1 s later):
    // the restarted controller adopts the job instead of submitting again.
    let before = head.jobs().len();
    let quick = ray_node(
        "once",
        &url,
        "python -c \"import json,time; time.sleep(2); print(json.dumps({'weft.outputs': {'n': 1}}))\"",
    );
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-crash", &quick)),
    )
    .await;
    let mut created = false;
    for _ in 0..500 {
        if head.job("ray-crash-once-0").is_some() {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(created, "the job was never created");
    controller.kill();
    let killed_log = controller.log();
    controller = common::ControllerProcess::start(&kubeconfig, "ray-2", &args);
    let wf = wait_workflow(&api, "ray-crash", 120, terminal).await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Succeeded, "{:?}", st.message);
    assert_eq!(st.nodes["once"].outputs.as_ref().unwrap()["n"], 1);
    assert!(st.nodes["once"].attempts <= 1, "one attempt");
    let jobs = head.jobs();
    assert_eq!(jobs.len(), before + 1, "one job more, not two: {jobs:?}");
    let log: serde_json::Value =
        serde_json::from_str(&head.get("/api/jobs/ray-crash-once-0/logs").1).unwrap();
    let log = log["logs"].as_str().unwrap();
    assert_eq!(log.matches("Running entrypoint").count(), 1, "{log}");
    assert_eq!(
        log.matches("{\"weft.outputs\"").count(),
        1,
        "the entrypoint ran once: {log}"
    );

    // 3b. A create whose answer was lost (the job exists under the
    // attempt's key, submitted before the controller heard back): the
    // plugin adopts it rather than submitting another, so the node gets
    // that job's outputs.
    let earlier = serde_json::json!({"entrypoint": "python -c \"import json; print(json.dumps({'weft.outputs': {'n': 7}}))\"", "submission_id": "ray-adopt-a-0"});
    assert_eq!(head.submit(&earlier).0, 200);
    let before = head.jobs().len();
    let other = ray_node(
        "a",
        &url,
        "python -c \"import json; print(json.dumps({'weft.outputs': {'n': 99}}))\"",
    );
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-adopt", &other)),
    )
    .await;
    let wf = wait_workflow(&api, "ray-adopt", 120, terminal).await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Succeeded, "{:?}", st.message);
    assert_eq!(
        st.nodes["a"].outputs.as_ref().unwrap()["n"],
        7,
        "adopted, not submitted again"
    );
    assert_eq!(head.jobs().len(), before);

    // 4. Outside the operator's allow-list: denied naming the URL, and
    // no connection is ever made to it.
    let trap = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let elsewhere = format!("http://127.0.0.2:{}", trap.local_addr().unwrap().port());
    let denied = ray_node("out", &elsewhere, "python -c 'print(1)'");
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-denied", &denied)),
    )
    .await;
    let wf = wait_workflow(&api, "ray-denied", 60, terminal).await;
    let n = &wf.status.unwrap().nodes["out"];
    assert_eq!(n.phase, NodePhase::Failed);
    let msg = n.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains(&format!("may not POST {elsewhere}/api/jobs/"))
            && msg.contains("operator's egress.allow"),
        "{msg}"
    );
    assert!(
        trap.accept().is_err(),
        "a connection reached the denied address"
    );

    // 5. A response over the cap (4 MiB): the job's log of 5 MB.
    let chatty = ray_node(
        "chatty",
        &url,
        "python -c \"import sys; sys.stdout.write(('x' * 1023 + chr(10)) * 5000)\"",
    );
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-big", &chatty)),
    )
    .await;
    let wf = wait_workflow(&api, "ray-big", 120, terminal).await;
    let n = &wf.status.unwrap().nodes["chatty"];
    assert_eq!(n.phase, NodePhase::Failed);
    let msg = n.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains("/api/jobs/ray-big-chatty-0/logs")
            && msg.contains("over the limit of 4194304 bytes"),
        "{msg}"
    );

    // 5b. Hot-loaded: the same component under another name, pushed as a
    // ConfigMap with `weft plugin push`, serves its task type at once.
    let hot_wasm = dir.path().join("ray-hot.wasm");
    std::fs::copy(
        common::root().join("target/plugins/ray-job.wasm"),
        &hot_wasm,
    )
    .unwrap();
    let manifest =
        std::fs::read_to_string(common::root().join("target/plugins/ray-job.yaml")).unwrap();
    let manifest = manifest
        .replacen("name: ray-job", "name: ray-hot", 1)
        .replacen("taskTypes: [ray-job]", "taskTypes: [ray-hot]", 1);
    assert!(manifest.contains("taskTypes: [ray-hot]"), "{manifest}");
    std::fs::write(dir.path().join("ray-hot.yaml"), manifest).unwrap();
    let pushed = common::weft_ok(
        &kubeconfig,
        &["plugin", "push", hot_wasm.to_str().unwrap(), "--wait"],
    )
    .await;
    assert!(pushed.contains("ray-hot"), "{pushed}");
    let hot = format!(
        "    - {{id: h, task: {{type: ray-hot, config: {{address: '{url}', entrypoint: {ok:?}}}}}}}\n"
    );
    kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        Some(&workflow_yaml("ray-hot", &hot)),
    )
    .await;
    let wf = wait_workflow(&api, "ray-hot", 120, terminal).await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Succeeded, "{:?}", st.message);
    assert_eq!(st.nodes["h"].outputs.as_ref().unwrap()["answer"], 42);
    assert_eq!(head.job("ray-hot-h-0").unwrap()["status"], "SUCCEEDED");

    // 6. The token is nowhere a user or operator reads.
    let status = kubectl(&kubeconfig, &["get", "workflows", "-o", "yaml"], None).await;
    let events = kubectl(&kubeconfig, &["get", "events", "-o", "yaml"], None).await;
    assert!(
        events.contains("ray-boom") && events.contains("ray-basic"),
        "no Events to check"
    );
    for (what, text) in [
        ("status", status),
        ("events", events),
        ("first controller's log", killed_log),
        ("controller log", controller.log()),
    ] {
        assert!(!text.contains(TOKEN), "the token is in the {what}");
    }
    drop(controller);
    plugin_test_records_and_replays(&head, dir.path());
    drop(head);
}

/// `weft plugin test --record` against the head, then `--replay` of the
/// recording with no network: the same answer; the token is in no
/// recording; a request the recording lacks is named.
fn plugin_test_records_and_replays(head: &RayHead, dir: &Path) {
    let wasm = common::root().join("target/plugins/ray-job.wasm");
    let task = dir.join("task.yaml");
    let ok = "python -c \"import json; print(json.dumps({'weft.outputs': {'answer': 42}}))\"";
    std::fs::write(
        &task,
        format!(
            "workflow: cli\nnodeId: rec\nconfig: {{entrypoint: {}}}\n",
            serde_json::to_string(ok).unwrap()
        ),
    )
    .unwrap();
    let config = serde_json::json!({
        "address": head.url,
        "credentials": [{"header": "Authorization", "prefix": "Bearer ", "value": TOKEN, "hosts": ["127.0.0.1"]}],
    })
    .to_string();
    let tape = dir.join("ray.json");
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["plugin", "test"])
            .arg(&wasm)
            .arg("--task")
            .arg(&task)
            .args(["--plugin-config", &config])
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.code(),
            text,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, live, err) = run(&["--record", tape.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        live.contains("phase: success") && live.contains("answer: 42"),
        "{live}"
    );
    let recorded = std::fs::read_to_string(&tape).unwrap();
    assert!(
        recorded.contains("/api/jobs/cli-rec-0") && !recorded.contains(TOKEN),
        "{recorded}"
    );
    let (code, replayed, err) = run(&["--replay", tape.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let result = |s: &str| s[s.find("result:").unwrap()..].to_string();
    assert_eq!(result(&replayed), result(&live));
    // A recording without the logs request: the replay names what it lacks.
    let mut exchanges: Vec<serde_json::Value> = serde_json::from_str(&recorded).unwrap();
    exchanges.retain(|e| !e["request"]["url"].as_str().unwrap().ends_with("/logs"));
    std::fs::write(&tape, serde_json::to_string(&exchanges).unwrap()).unwrap();
    let (code, _, err) = run(&["--replay", tape.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains(&format!(
            "no recorded exchange left for GET {}/api/jobs/cli-rec-0/logs",
            head.url
        )),
        "{err}"
    );
}
