//! Per-plugin RBAC, enforced by the API server: the dev cluster with RBAC
//! on (or kube-apiserver's RBAC, `WEFT_TEST_CLUSTER=k8s`), deploy/'s Roles applied, and the real `weft controller` running as
//! its ServiceAccount with `--impersonate-plugins`, as deploy/ runs it; and
//! a web-API task's Secrets read as its plugin's ServiceAccount.

mod common;

use std::time::Duration;

use common::{ControllerProcess, kubectl, kustomize, root};
use kube::{Api, api::PostParams};
use weft_dag::{NodePhase, WorkflowPhase};

const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";

/// Applies YAML with the admin kubeconfig (no token: the cluster admin).
async fn apply(kubeconfig: &std::path::Path, yaml: &str) {
    let out = kubectl(kubeconfig, &["apply", "-f", "-"], Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// deploy/'s namespace, ServiceAccounts and RBAC (production overlay).
fn deployed_rbac() -> String {
    let keep = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    kustomize("deploy/overlays/production")
        .split("\n---\n")
        .filter(|doc| {
            keep.iter().any(|k| {
                doc.contains(&format!("\nkind: {k}\n")) || doc.starts_with(&format!("kind: {k}\n"))
            })
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

async fn run(
    workflows: &Api<weft::api::Workflow>,
    name: &str,
    task_type: &str,
) -> weft::api::Workflow {
    let spec = format!(
        "nodes:\n  - {{id: a, task: {{type: {task_type}, config: {{image: busybox, command: [\"true\"]}}}}}}\n"
    );
    let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(&spec).unwrap();
    let wf = weft::api::Workflow::new(name, weft::api::WorkflowResourceSpec { spec });
    workflows.create(&PostParams::default(), &wf).await.unwrap();
    finished(workflows, name).await
}

/// The Workflow once it has finished (up to 60 s).
async fn finished(workflows: &Api<weft::api::Workflow>, name: &str) -> weft::api::Workflow {
    for _ in 0..600 {
        let wf = workflows.get(name).await.unwrap();
        if wf.status.as_ref().is_some_and(|s| s.phase.is_terminal()) {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} did not finish");
}

/// A cluster with RBAC on and deploy/'s RBAC applied, and the controller
/// as deploy/ runs it: as its ServiceAccount with `--impersonate-plugins`,
/// loading `plugins` (folder under the repo, name) and `args`. On the dev
/// cluster (RBAC on) the ServiceAccount's name is its token; on the real
/// control plane (`WEFT_TEST_CLUSTER=k8s`) the token comes from the
/// TokenRequest API, and the test works in a namespace of its own.
struct Rbac {
    /// The dev cluster; none on the real control plane.
    cluster: Option<weft_cluster::DevCluster>,
    admin: kube::Client,
    /// The admin's kubeconfig, whose context names `ns`.
    admin_kubeconfig: std::path::PathBuf,
    /// The controller's kubeconfig (deploy/'s ServiceAccount).
    controller_kubeconfig: std::path::PathBuf,
    ns: String,
    controller: ControllerProcess,
    _dir: tempfile::TempDir,
}

impl Rbac {
    /// The allowed requests, as the API server audited them.
    fn audit(&self) -> Vec<weft_cluster::AuditRecord> {
        match &self.cluster {
            Some(c) => c.audit(),
            None => common::k8s::shared().audit_records(),
        }
    }

    /// A client with the controller's credentials impersonating `user`.
    async fn impersonating(&self, user: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.controller_kubeconfig).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        config.auth_info.impersonate = Some(user.into());
        kube::Client::try_from(config).unwrap()
    }

    async fn stop(self) {
        drop(self.controller);
        if let Some(c) = self.cluster {
            c.shutdown().await;
        }
    }
}

/// Where an RBAC test runs, before its controller starts.
struct Bed {
    dir: tempfile::TempDir,
    /// The dev cluster (none on kube-apiserver).
    cluster: Option<weft_cluster::DevCluster>,
    /// A cluster admin's client and kubeconfig.
    admin: kube::Client,
    admin_kubeconfig: std::path::PathBuf,
    /// The controller's own credentials (deploy/'s ServiceAccount).
    controller_kubeconfig: std::path::PathBuf,
    ns: String,
    /// The controller's extra flags (its namespace on kube-apiserver).
    extra: Vec<String>,
}

async fn dev_bed() -> Bed {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft::dev::start_with(dir.path(), weft_cluster::Authorization::Rbac)
        .await
        .unwrap();
    let admin = weft::runtime::client_for(&cluster.base_url()).unwrap();
    weft::runtime::install_crd(&admin).await.unwrap();
    let admin_kubeconfig = dir.path().join("kubeconfig");
    apply(&admin_kubeconfig, &deployed_rbac()).await;
    let kubeconfig = dir.path().join("controller.kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig_as(CONTROLLER)).unwrap();
    Bed {
        dir,
        cluster: Some(cluster),
        admin,
        admin_kubeconfig,
        controller_kubeconfig: kubeconfig,
        ns: "default".to_string(),
        extra: vec![],
    }
}

async fn real_bed() -> Bed {
    static APPLIED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    let bed = common::cluster::Bed::start().await;
    let cluster = common::k8s::shared();
    APPLIED
        .get_or_init(|| async { apply(&cluster.kubeconfig, &deployed_rbac()).await })
        .await;
    let kubeconfig = cluster.controller_kubeconfig(&format!("weft-controller-{}", bed.ns));
    let extra = bed.controller_args();
    let common::cluster::Bed {
        dir,
        client,
        kubeconfig: admin_kubeconfig,
        ns,
        ..
    } = bed;
    Bed {
        dir,
        cluster: None,
        admin: client,
        admin_kubeconfig,
        controller_kubeconfig: kubeconfig,
        ns,
        extra,
    }
}

async fn rbac_cluster(plugins: &[(&str, &str)], args: &[&str]) -> Rbac {
    let Bed {
        dir,
        cluster,
        admin,
        admin_kubeconfig,
        controller_kubeconfig: kubeconfig,
        ns,
        extra,
    } = match common::cluster::real() {
        true => real_bed().await,
        false => dev_bed().await,
    };
    let folder = dir.path().join("plugins");
    std::fs::create_dir(&folder).unwrap();
    for (from, name) in plugins {
        for ext in ["wasm", "yaml"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(root().join(from).join(&file), folder.join(&file)).unwrap();
        }
    }
    let mut all = vec![
        "--plugins",
        folder.to_str().unwrap(),
        "--plugin-namespace=weft-system",
        "--impersonate-plugins",
    ];
    all.extend(args);
    all.extend(extra.iter().map(String::as_str));
    let controller = ControllerProcess::start(&kubeconfig, "weft-controller-0", &all);
    controller.metrics().await;
    Rbac {
        cluster,
        admin,
        admin_kubeconfig,
        controller_kubeconfig: kubeconfig,
        ns,
        controller,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_write_as_their_service_accounts_and_the_api_server_refuses_undeclared_kinds() {
    // The pod plugin (whose RBAC is in deploy/base), the echo guest
    // (declares Pods; no RBAC applied) and a guest that builds a kind it
    // did not declare.
    let plugins = [
        ("target/plugins", "pod"),
        ("target/test-guests", "echo"),
        ("target/test-guests", "undeclared-kind"),
    ];
    let bed = rbac_cluster(&plugins, &[]).await;
    let (admin_kubeconfig, controller) = (&bed.admin_kubeconfig, &bed.controller);
    let workflows: Api<weft::api::Workflow> = Api::namespaced(bed.admin.clone(), &bed.ns);

    // The pod plugin's Pod is written as weft-plugin-pod.
    let ok = run(&workflows, "as-pod", "pod").await;
    assert_eq!(
        ok.status.as_ref().unwrap().phase,
        WorkflowPhase::Succeeded,
        "{}",
        controller.log()
    );
    let pod_sa = "system:serviceaccount:weft-system:weft-plugin-pod";
    let audit = bed.audit();
    assert!(
        audit.iter().any(|r| r.user == pod_sa
            && r.resource == "pods"
            && r.verb == "patch"
            && r.impersonator.as_deref() == Some(CONTROLLER)),
        "no Pod written as {pod_sa}"
    );
    assert!(
        !audit
            .iter()
            .any(|r| r.user == CONTROLLER && r.resource == "pods" && r.verb == "patch"),
        "the controller wrote a Pod as itself"
    );

    // echo declares Pods, but no Role grants its ServiceAccount anything:
    // the API server refuses, and the node fails saying so.
    let refused = run(&workflows, "as-echo", "echo").await;
    let status = refused.status.as_ref().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let message = status.nodes["a"].message.clone().unwrap_or_default();
    assert!(
        message.contains("User \"system:serviceaccount:weft-system:weft-plugin-echo\" cannot")
            && message.contains("resource \"pods\""),
        "{message}"
    );

    // A kind the plugin did not declare: the host refuses it first...
    let undeclared = run(&workflows, "as-undeclared", "test-undeclared-kind").await;
    let status = undeclared.status.as_ref().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Failed);
    let message = status.nodes["a"].message.clone().unwrap_or_default();
    assert!(
        message.contains("not declared") || message.contains("undeclared"),
        "{message}"
    );
    // ...and the API server refuses it too, as the plugin's ServiceAccount:
    // an impersonated apply of a ConfigMap as weft-plugin-pod (kube-rs, as
    // the controller's own credentials do it) and `kubectl --as`.
    let as_pod = bed.impersonating(pod_sa).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(as_pod, &bed.ns);
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "sneaky"}})).unwrap();
    let err = cms
        .patch(
            "sneaky",
            &kube::api::PatchParams::apply("weft").force(),
            &kube::api::Patch::Apply(&cm),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err}")
    };
    assert_eq!(s.code, 403);
    assert!(
        s.message.contains(&format!("User \"{pod_sa}\"")),
        "{}",
        s.message
    );
    let out = kubectl(
        admin_kubeconfig,
        &["--as", pod_sa, "create", "configmap", "sneaky"],
        None,
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is forbidden") && err.contains(pod_sa),
        "{err}"
    );
    bed.stop().await;
}

/// The loopback API of the credentials test: `/whoami` answers with the
/// Authorization header it got (as a careless server might).
fn whoami(req: &common::loopback::Seen) -> (u16, serde_json::Value) {
    let auth = req
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_default();
    (
        200,
        serde_json::json!({"auth": auth, "ok": !auth.is_empty()}),
    )
}

/// A Workflow with one `http` node calling `url` with `secret` (YAML).
fn with_secret(name: &str, url: &str, secret: &str) -> String {
    format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n  nodes:\n    - id: a\n      task:\n        type: http\n        config: {{url: '{url}', outputs: {{auth: response.json.auth, ok: response.json.ok}}}}\n        secrets: [{secret}]\n"
    )
}

/// Task-level credentials (issue 20): a web-API task names a Secret of its
/// namespace as a request header. The controller reads it as the plugin's
/// ServiceAccount, so the namespace consents by RBAC: refused (naming the
/// Secret and the grant that would allow it, and sending nothing) until the
/// namespace grants it, then sent as the header, and the value is in no
/// status, Event or log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_secret_is_sent_as_a_header_only_once_its_namespace_grants_the_plugin() {
    const TOKEN: &str = "s3cr3t-task-token-9";
    let server = common::loopback::Server::start(whoami);
    let url = server.url("/whoami");
    let bed = rbac_cluster(&[("target/plugins", "http")], &["--workflow-events=all"]).await;
    let (admin_kubeconfig, controller, ns) = (&bed.admin_kubeconfig, &bed.controller, &bed.ns);
    common::kubectl_ok(
        admin_kubeconfig,
        &["create", "secret", "generic", "api-token"],
        None,
    )
    .await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(bed.admin.clone(), ns);
    let header = "{name: api-token, key: token, mountAs: header, header: {name: Authorization, prefix: 'Bearer ', hosts: [127.0.0.1]}}";
    let node = |wf: &weft::api::Workflow| wf.status.as_ref().unwrap().nodes["a"].clone();
    let finished = |name: &'static str| finished(&workflows, name);

    // 1. No Role lets weft-plugin-http read the Secret: the node fails
    // before any request, naming the Secret, the user it was read as, and
    // the grant.
    let yaml = with_secret("creds-denied", &url, header);
    common::kubectl_ok(admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    let a = node(&finished("creds-denied").await);
    assert_eq!(a.phase, NodePhase::Failed);
    assert_eq!(a.reason.as_deref(), Some("SecretUnavailable"));
    let msg = a.message.clone().unwrap_or_default();
    let plugin_sa = "system:serviceaccount:weft-system:weft-plugin-http";
    assert!(
        msg.contains(&format!("plugin http may not get Secret {ns}/api-token"))
            && msg.contains(plugin_sa),
        "{msg}"
    );
    assert_eq!(server.count(), 0, "a request left without its consent");

    // The namespace grants it with the very commands the message gives
    // (run as given on kube-apiserver; on the dev cluster rendered by
    // kubectl, then applied: `kubectl create role` sends protobuf, which
    // the dev cluster does not read).
    let grant = msg
        .split("to let it send this Secret: ")
        .nth(1)
        .expect("the message says how to grant");
    for command in grant.split(" && ") {
        let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
        assert_eq!(command.split_whitespace().next(), Some("kubectl"));
        if bed.cluster.is_none() {
            common::kubectl_ok(admin_kubeconfig, &args, None).await;
            continue;
        }
        args.extend(["--dry-run=client", "-o", "yaml"]);
        let object = common::kubectl_ok(admin_kubeconfig, &args, None).await;
        apply(admin_kubeconfig, &object).await;
    }

    // 2. Readable now, but the Secret has no such key yet: named, nothing
    // sent.
    let yaml = with_secret("creds-nokey", &url, header);
    common::kubectl_ok(admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    let a = node(&finished("creds-nokey").await);
    assert_eq!(a.phase, NodePhase::Failed);
    let msg = a.message.clone().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "task.secrets[0]: Secret {ns}/api-token has no key \"token\""
        )),
        "{msg}\n{}",
        controller.log()
    );

    // 3. With the key, the header is sent.
    let patch = format!("{{\"stringData\": {{\"token\": \"{TOKEN}\"}}}}");
    common::kubectl_ok(
        admin_kubeconfig,
        &["patch", "secret", "api-token", "-p", &patch],
        None,
    )
    .await;
    let yaml = with_secret("creds-ok", &url, header);
    common::kubectl_ok(admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    let wf = finished("creds-ok").await;
    let a = node(&wf);
    assert_eq!(a.phase, NodePhase::Succeeded, "{a:?}\n{}", controller.log());
    let seen = server.seen("GET", "/whoami");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    // The server echoed it; the host cut it out of the outputs.
    let outputs = serde_json::Value::Object(a.outputs.clone().unwrap());
    assert_eq!(
        outputs,
        serde_json::json!({"auth": "[redacted]", "ok": true})
    );
    // Read as the plugin, never as the controller itself.
    let reads: Vec<_> = bed
        .audit()
        .into_iter()
        .filter(|r| r.resource == "secrets" && &r.namespace == ns && r.name == "api-token")
        .collect();
    assert!(
        reads.iter().any(|r| r.user == plugin_sa
            && r.verb == "get"
            && r.impersonator.as_deref() == Some(CONTROLLER)),
        "{reads:?}"
    );
    assert!(!reads.iter().any(|r| r.user == CONTROLLER), "{reads:?}");

    // 4. With the http plugin's egress open to any host, a credential
    // must name its hosts; a pod-only mount is refused for a web-API task.
    let open = "{name: api-token, key: token, mountAs: header, header: {name: Authorization}}";
    let yaml = with_secret("creds-open", &url, open);
    common::kubectl_ok(admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    let env = "{name: api-token, key: token}";
    let yaml = with_secret("creds-env", &url, env);
    common::kubectl_ok(admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    let msg = node(&finished("creds-open").await)
        .message
        .unwrap_or_default();
    assert!(
        msg.contains(
            "task.secrets[0].header.hosts: required, since the egress in force allows any host"
        ),
        "{msg}"
    );
    let env = node(&finished("creds-env").await);
    assert_eq!(env.reason.as_deref(), Some("SecretsNotMountable"));
    let msg = env.message.unwrap_or_default();
    assert!(
        msg.contains("task.secrets[0] (api-token/token): mountAs: env mounts into a pod")
            && msg.contains("web-API plugin http"),
        "{msg}"
    );
    assert_eq!(server.count(), 1, "only creds-ok sent a request");

    // The value is nowhere a user reads.
    let everything = [
        common::kubectl_ok(
            admin_kubeconfig,
            &["get", "workflows", "-A", "-o", "yaml"],
            None,
        )
        .await,
        common::kubectl_ok(
            admin_kubeconfig,
            &["get", "events", "-A", "-o", "yaml"],
            None,
        )
        .await,
        controller.log(),
    ];
    for text in &everything {
        assert!(!text.contains(TOKEN), "the token leaked:\n{text}");
    }
    assert!(
        everything[1].contains("creds-denied"),
        "Events were written"
    );
    bed.stop().await;
}

/// The most pods of `ns` not yet finished at once (what a `pods` quota
/// counts), sampled every 50 ms until `stop` is set, with that list's pods
/// (name, phase, deletion) so a failure says which they were.
async fn most_unfinished_pods(
    client: kube::Client,
    ns: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (usize, Vec<String>) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let mut most = (0, Vec::new());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let list = pods.list(&Default::default()).await.unwrap();
        let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
        let unfinished: Vec<String> = list
            .items
            .iter()
            .filter(|p| !matches!(phase(p).as_deref(), Some("Succeeded" | "Failed")))
            .map(|p| {
                let deleted = p.metadata.deletion_timestamp.is_some();
                let name = p.metadata.name.clone().unwrap_or_default();
                format!("{name} {:?} deleted={deleted}", phase(p))
            })
            .collect();
        if unfinished.len() > most.0 {
            most = (unfinished.len(), unfinished);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_over_a_resource_quota_wait_for_it_instead_of_failing() {
    // deploy/'s default: pods created as the pod plugin's ServiceAccount,
    // where a 403 used to fail the node for good; kube-apiserver answers
    // an exhausted ResourceQuota with a 403 too (issue 44).
    let bed = rbac_cluster(&[("target/plugins", "pod")], &[]).await;
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: two-pods}\nspec: {hard: {pods: \"2\"}}\n";
    apply(&bed.admin_kubeconfig, quota).await;
    let nodes: String = (0..6)
        .map(|i| {
            format!(
                "    - {{id: n{i}, task: {{type: pod, config: {{image: busybox, command: [sh, -c, 'sleep 1']}}}}}}\n"
            )
        })
        .collect();
    let yaml = format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: fan-out}}\nspec:\n  nodes:\n{nodes}"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn(most_unfinished_pods(
        bed.admin.clone(),
        bed.ns.clone(),
        stop.clone(),
    ));
    let out = kubectl(&bed.admin_kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // While some wait, `weft get` shows why, naming the quota.
    let workflows: Api<weft::api::Workflow> = Api::namespaced(bed.admin.clone(), &bed.ns);
    let mut seen_waiting = None;
    for _ in 0..300 {
        let out = common::weft(&bed.admin_kubeconfig, &["get", "fan-out", "-n", &bed.ns]).await;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("waiting-for-resources") {
            seen_waiting = Some(text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = seen_waiting.expect("no node was seen waiting for the quota in `weft get`");
    assert!(text.contains("ExceededQuota"), "{text}");
    assert!(
        text.contains("waiting for ResourceQuota two-pods"),
        "{text}"
    );

    let wf = finished(&workflows, "fan-out").await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (most, which) = sampler.await.unwrap();
    let status = wf.status.unwrap();
    assert_eq!(status.phase, WorkflowPhase::Succeeded, "{status:#?}");
    for (id, n) in &status.nodes {
        assert_eq!(n.phase, NodePhase::Succeeded, "{id}: {n:#?}");
        assert!(
            n.attempts <= 1 && n.user_failures + n.system_failures == 0,
            "{id}: {n:#?}"
        );
    }
    assert!(
        most <= 2,
        "{most} unfinished pods at once under a quota of 2: {which:?}"
    );

    // The Event says why they waited, naming the quota.
    let out = kubectl(
        &bed.admin_kubeconfig,
        &[
            "get",
            "events",
            "-n",
            &bed.ns,
            "--field-selector",
            "involvedObject.name=fan-out",
        ],
        None,
    )
    .await;
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(
        events.contains("ExceededQuota") && events.contains("exceeded quota: two-pods"),
        "{events}"
    );
    bed.stop().await;
}
