//! Weft's admission webhook end to end, as a cluster install runs it and as
//! a user meets it: `weft webhook` behind the Service and the webhook
//! configurations deploy/ ships, called by the dev cluster over TLS, driven
//! with kubectl. The four-error Workflow is refused with all four messages;
//! a task's secrets reach its pod as a variable and a file and nowhere else;
//! a webhook that is down refuses under `Fail` and lets the controller fail
//! the Workflow under `Ignore`; a certificate that lives seconds is renewed
//! again and again with no failed request; `weft run` and `weft dev` run it
//! by default.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use weft::api::Workflow;

const NS: &str = "weft-system";

const FOUR_ERRORS: &str = r#"apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata:
  name: four-errors
spec:
  nodes:
    - {id: a, dependsOn: [b], task: {type: pod}}
    - {id: b, dependsOn: [a], task: {type: pod}}
    - {id: c, dependsOn: [ghost], task: {type: pod}}
    - {id: d, when: "1 +", task: {type: pod}}
    - {id: e, task: {type: no-such-type}}
"#;

/// The four problems, as the validator words them.
const FOUR_MESSAGES: [&str; 4] = [
    "cycle",
    "\"ghost\" is not a node",
    "node d: when: invalid CEL",
    "no plugin serves task type \"no-such-type\"",
];

/// A real `weft webhook` process, its log in a file; killed when dropped.
struct WebhookProcess {
    child: std::process::Child,
    log: PathBuf,
}

impl WebhookProcess {
    fn start(kubeconfig: &Path, port: u16, args: &[&str]) -> Self {
        let log = kubeconfig.with_file_name(format!("webhook-{port}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["--log-format", "json", "webhook", "--webhook-port"])
            .arg(port.to_string())
            .arg("--plugins")
            .arg(common::root().join("target/plugins"))
            .arg("--cache-dir")
            .arg(common::root().join("target/weft-test-cache"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", NS)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start weft webhook");
        WebhookProcess { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WebhookProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Service and the two configurations, as deploy/ installs them, with
/// the Service pointing at `port` on this machine (where the dev cluster's
/// pods live).
async fn install(kubeconfig: &Path, dir: &Path, port: u16) {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "weft-webhook", "namespace": NS},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    let configs = weft::webhook::configurations(
        |path| json!({"service": {"namespace": NS, "name": "weft-webhook", "path": path, "port": 443}}),
    );
    let docs: Vec<String> = std::iter::once(svc)
        .chain(configs)
        .map(|d| serde_yaml::to_string(&d).unwrap())
        .collect();
    let file = dir.join("webhook.yaml");
    std::fs::write(&file, docs.join("---\n")).unwrap();
    kubectl(kubeconfig, &["create", "namespace", NS]).await;
    let (ok, _, err) = kubectl(kubeconfig, &["create", "-f", file.to_str().unwrap()]).await;
    assert!(ok, "{err}");
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until the webhook has patched both caBundles; returns the CA.
async fn patched_ca(kubeconfig: &Path, webhook: &WebhookProcess) -> String {
    for _ in 0..600 {
        let mut bundles = Vec::new();
        for kind in [
            "validatingwebhookconfiguration/weft-validating",
            "mutatingwebhookconfiguration/weft-pod-secrets",
        ] {
            let (_, out, _) = kubectl(
                kubeconfig,
                &[
                    "get",
                    kind,
                    "-o",
                    "jsonpath={.webhooks[0].clientConfig.caBundle}",
                ],
            )
            .await;
            bundles.push(out);
        }
        if !bundles[0].is_empty() && bundles[0] == bundles[1] {
            return bundles.remove(0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the caBundles were never patched; log:\n{}", webhook.log());
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

async fn sha16(value: &str) -> String {
    let mut child = tokio::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use tokio::io::AsyncWriteExt as _;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(value.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

const WITH_SECRETS: &str = r#"apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata:
  name: with-secrets
spec:
  nodes:
    - id: use
      task:
        type: pod
        secrets:
          - {name: db, key: password}
          - {name: db, key: token, mountAs: file}
        config:
          image: busybox:1.36
          command: [sh, -c]
          args:
            - |
              e=$(printf %s "$WEFT_SECRET_DB_PASSWORD" | sha256sum | cut -c1-16)
              f=$(cat /etc/weft/secrets/db/token | sha256sum | cut -c1-16)
              printf '{"env": "%s", "file": "%s"}' "$e" "$f" > /dev/termination-log
"#;

async fn finished(api: &Api<Workflow>, name: &str) -> Workflow {
    for _ in 0..1200 {
        if let Ok(wf) = api.get(name).await
            && wf.status.as_ref().is_some_and(|s| {
                matches!(
                    s.phase,
                    weft_dag::WorkflowPhase::Succeeded | weft_dag::WorkflowPhase::Failed
                )
            })
        {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("workflow {name} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_refuses_mounts_secrets_and_fails_as_configured() {
    let (dir, _cluster, kubeconfig, client) = common::dev_cluster().await;
    let dir = dir.path();
    let port = common::free_port();
    install(&kubeconfig, dir, port).await;
    let mut webhook = WebhookProcess::start(&kubeconfig, port, &[]);
    let ca = patched_ca(&kubeconfig, &webhook).await;
    let secret: Secret = Api::namespaced(client.clone(), NS)
        .get("weft-webhook-certs")
        .await
        .unwrap();
    use base64::Engine as _;
    let want = base64::engine::general_purpose::STANDARD.encode(&secret.data.unwrap()["ca.crt"].0);
    assert_eq!(ca, want, "the caBundle is the managed CA");
    let controller = common::ControllerProcess::start(&kubeconfig, "admission", &[]);
    controller.metrics().await;

    // Refused at submission, every problem at once.
    let bad = write(dir, "bad.yaml", FOUR_ERRORS);
    let (ok, _, err) = kubectl(&kubeconfig, &["create", "-f", &bad]).await;
    assert!(!ok);
    assert!(
        err.contains("admission webhook \"workflows.validate.weft.dev\" denied the request: invalid workflow spec"),
        "{err}"
    );
    for m in FOUR_MESSAGES {
        assert!(err.contains(m), "{m} in {err}");
    }
    templates_are_checked_at_submission(&kubeconfig, dir).await;

    // Secrets reach the pod as a variable and a file, and nothing else.
    let (password, token) = ("pa55-w0rd-7f3a", "t0ken-91c2-e8");
    let (ok, _, err) = kubectl(
        &kubeconfig,
        &[
            "create",
            "secret",
            "generic",
            "db",
            &format!("--from-literal=password={password}"),
            &format!("--from-literal=token={token}"),
        ],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(
        &kubeconfig,
        &["create", "-f", &write(dir, "s.yaml", WITH_SECRETS)],
    )
    .await;
    assert!(ok, "{err}");
    let workflows: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let wf = finished(&workflows, "with-secrets").await;
    let status = serde_json::to_value(wf.status.as_ref().unwrap()).unwrap();
    if status["phase"] != "Succeeded" {
        let (_, pods, _) = kubectl(&kubeconfig, &["get", "pods", "-o", "yaml"]).await;
        panic!("{status:#}\n{pods}\nwebhook log:\n{}", webhook.log());
    }
    let outputs = &status["nodes"]["use"]["outputs"];
    assert_eq!(outputs["env"], sha16(password).await, "{status:#}");
    assert_eq!(outputs["file"], sha16(token).await, "{status:#}");
    let (_, pods, _) = kubectl(&kubeconfig, &["get", "pods", "-o", "json"]).await;
    let pods: Value = serde_json::from_str(&pods).unwrap();
    let pod = &pods["items"][0];
    let env = &pod["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "WEFT_SECRET_DB_PASSWORD"
                && e["valueFrom"]["secretKeyRef"] == json!({"name": "db", "key": "password"})),
        "{env}"
    );
    let (_, wf_yaml, _) = kubectl(&kubeconfig, &["get", "wf", "with-secrets", "-o", "yaml"]).await;
    let (_, events, _) = kubectl(&kubeconfig, &["get", "events", "-A", "-o", "yaml"]).await;
    for (what, text) in [
        ("the Workflow", wf_yaml),
        ("the Events", events),
        ("the controller's log", controller.log()),
        ("the webhook's log", webhook.log()),
        ("the pod", pods.to_string()),
    ] {
        assert!(
            !text.contains(password) && !text.contains(token),
            "a secret value in {what}"
        );
    }

    // Down under Fail: refused, in the API server's words.
    webhook.kill();
    let good = write(
        dir,
        "good.yaml",
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {name: good}\nspec:\n  nodes: [{id: a, task: {type: pod, config: {image: x, command: [\"true\"]}}}]\n",
    );
    let (ok, _, err) = kubectl(&kubeconfig, &["create", "-f", &good]).await;
    assert!(!ok);
    assert!(
        err.contains("Internal error occurred: failed calling webhook \"workflows.validate.weft.dev\": failed to call webhook: Post \"https://weft-webhook.weft-system.svc:443/validate?timeout=10s\""),
        "{err}"
    );
    // Under Ignore: admitted, and the controller fails it with all four.
    let (ok, _, err) = kubectl(
        &kubeconfig,
        &[
            "patch",
            "validatingwebhookconfiguration",
            "weft-validating",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]"#,
        ],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(&kubeconfig, &["create", "-f", &bad]).await;
    assert!(ok, "{err}");
    let wf = finished(&workflows, "four-errors").await;
    let status = serde_json::to_value(wf.status.as_ref().unwrap()).unwrap();
    assert_eq!(status["phase"], "Failed");
    let message = status["message"].as_str().unwrap_or_default();
    for m in FOUR_MESSAGES {
        assert!(message.contains(m), "{m} in {message}");
    }
}

/// A certificate that lives 4 s is renewed every second or so while
/// Workflows are created as fast as one client can: none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_admission_working_with_no_failed_request() {
    let (dir, _cluster, kubeconfig, client) = common::dev_cluster().await;
    let port = common::free_port();
    install(&kubeconfig, dir.path(), port).await;
    let webhook = WebhookProcess::start(&kubeconfig, port, &["--webhook-cert-validity", "4s"]);
    let ca = patched_ca(&kubeconfig, &webhook).await;
    let workflows: Api<Workflow> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut expiries = std::collections::BTreeSet::new();
    let start = std::time::Instant::now();
    let mut created = 0;
    while start.elapsed() < Duration::from_secs(10) {
        let wf: Workflow = serde_yaml::from_str(&format!(
            "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: r{created}}}\nspec:\n  nodes: [{{id: a, task: {{type: pod}}}}]\n"
        ))
        .unwrap();
        if let Err(e) = workflows.create(&PostParams::default(), &wf).await {
            panic!(
                "request {created} failed during rotation: {e}\nwebhook log:\n{}",
                webhook.log()
            );
        }
        created += 1;
        let s = secrets.get("weft-webhook-certs").await.unwrap();
        expiries.insert(s.metadata.annotations.unwrap()["weft.dev/not-after"].clone());
    }
    assert!(created > 20, "only {created} requests");
    assert!(
        expiries.len() >= 4,
        "renewed {} times: {expiries:?}",
        expiries.len() - 1
    );
    // The CA stayed, so the caBundle did too, and refusals still come.
    assert_eq!(patched_ca(&kubeconfig, &webhook).await, ca);
    let wf: Workflow = serde_yaml::from_str(FOUR_ERRORS).unwrap();
    let e = workflows
        .create(&PostParams::default(), &wf)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("denied the request"), "{e}");
}

/// `weft run` runs the webhook by default: a bad file is refused at
/// submission with every problem, as kubectl would be on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_run_refuses_a_bad_workflow_at_submission() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.yaml", FOUR_ERRORS);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .current_dir(common::root())
        .args(["run", &bad, "--data-dir"])
        .arg(dir.path().join("dev"))
        .env(
            "WEFT_CACHE_DIR",
            common::root().join("target/weft-test-cache"),
        )
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("admission webhook at https://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("admission webhook \"workflows.validate.weft.dev\" denied the request"),
        "{text}"
    );
    for m in FOUR_MESSAGES {
        assert!(text.contains(m), "{m} in {text}");
    }
}

/// A WorkflowTemplate with a cycle is refused; launches of a good one with
/// a missing or mistyped input are refused naming the input.
async fn templates_are_checked_at_submission(kubeconfig: &Path, dir: &Path) {
    let template = |deps: &str| {
        format!(
            "apiVersion: weft.dev/v1alpha1\nkind: WorkflowTemplate\nmetadata: {{name: sized}}\nspec:\n  inputs:\n    size: {{type: integer}}\n  nodes:\n    - {{id: a, dependsOn: [{deps}], inputs: {{size: '${{inputs.size}}'}}, task: {{type: pod}}}}\n"
        )
    };
    let (ok, _, err) = kubectl(
        kubeconfig,
        &["create", "-f", &write(dir, "t1.yaml", &template("a"))],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("invalid workflow template:\nnode a: dependsOn: cycle: a -> a"),
        "{err}"
    );
    let (ok, _, err) = kubectl(
        kubeconfig,
        &["create", "-f", &write(dir, "t2.yaml", &template(""))],
    )
    .await;
    assert!(ok, "{err}");
    let selfish = "apiVersion: weft.dev/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: selfish}\nspec:\n  nodes:\n    - {id: again, workflow: {templateRef: selfish}}\n";
    let (ok, _, err) = kubectl(
        kubeconfig,
        &["create", "-f", &write(dir, "t3.yaml", selfish)],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains(
            "node again: workflow.templateRef: templates launch themselves: selfish -> selfish"
        ),
        "{err}"
    );
    let launch = |inputs: &str| {
        format!(
            "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{generateName: sized-}}\nspec:\n  workflowTemplateRef: {{name: sized, inputs: {inputs}}}\n"
        )
    };
    for (inputs, want) in [
        ("{}", "inputs.size: required input (integer) is missing"),
        (
            "{size: big}",
            "workflowTemplateRef.inputs.size: expected integer, got string \"big\"",
        ),
    ] {
        let (ok, _, err) = kubectl(
            kubeconfig,
            &["create", "-f", &write(dir, "l.yaml", &launch(inputs))],
        )
        .await;
        assert!(!ok, "{inputs}");
        assert!(
            err.contains("denied the request: invalid workflow spec:"),
            "{err}"
        );
        assert!(err.contains(want), "{want} in {err}");
    }
    let (ok, _, err) = kubectl(
        kubeconfig,
        &["create", "-f", &write(dir, "l.yaml", &launch("{size: 3}"))],
    )
    .await;
    assert!(ok, "{err}");
}
