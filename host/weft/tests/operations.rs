//! What an operator relies on, checked in one end-to-end run of the real
//! `weft controller` binary configured as deploy/'s Deployment runs it
//! (leader election, plugins hot-loaded from weft-system, the admin API
//! with a Wasm middleware):
//!
//! - the RBAC review: every verb the controller used on every resource
//!   (from the dev cluster's audit log) is granted by deploy/'s Role and
//!   ClusterRole, and every verb they grant was used;
//! - `/metrics` exposes the metrics the dashboards need, with samples;
//! - the admin API's bearer tokens come from a Secret and rotate with it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{ControllerProcess, free_port, grant_set, kubectl, kustomize, root, sum};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use serde::Deserialize;
use tonic::{service::interceptor::InterceptedService, transport::Channel};
use weft::admin::pb;

type AdminClient =
    pb::admin_service_client::AdminServiceClient<InterceptedService<Channel, Bearer>>;

/// Sends `authorization: Bearer <token>`, the token swappable (rotation).
#[derive(Clone, Default)]
struct Bearer(Arc<Mutex<String>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let value = format!("Bearer {}", self.0.lock().unwrap());
        req.metadata_mut()
            .insert("authorization", value.parse().unwrap());
        Ok(req)
    }
}

/// The user the controller's kubeconfig names (its bearer token): the
/// service account deploy/ binds the roles to.
const CONTROLLER_USER: &str = "system:serviceaccount:weft-system:weft-controller";
const NS: &str = "weft-system";

/// The kubeconfig of the dev cluster at `server`, as user `token`.
fn kubeconfig_as(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dev\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: dev\n  context:\n    cluster: dev\n    user: u\n    namespace: default\ncurrent-context: dev\n"
    )
}

/// What a role grants: (apiGroup, resource, verb).
type Grant = (String, String, String);

/// What the production overlay's ClusterRole `name` (a plugin's) grants.
fn plugin_grants(name: &str) -> BTreeSet<Grant> {
    let yaml = kustomize("deploy/overlays/production");
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        if v["kind"] == "ClusterRole" && v["metadata"]["name"] == name {
            let r: ClusterRole = serde_json::from_value(v).unwrap();
            return grant_set(r.rules.as_deref().unwrap_or_default());
        }
    }
    panic!("no ClusterRole {name}");
}

/// The production overlay's ClusterRole and weft-system Role rules.
fn deployed_rbac() -> (BTreeSet<Grant>, BTreeSet<Grant>) {
    let yaml = kustomize("deploy/overlays/production");
    let (mut cluster, mut namespaced) = (BTreeSet::new(), BTreeSet::new());
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        match v["kind"].as_str() {
            Some("ClusterRole") if v["metadata"]["name"] == "weft-controller" => {
                let r: ClusterRole = serde_json::from_value(v).unwrap();
                cluster.extend(grant_set(r.rules.as_deref().unwrap_or_default()));
            }
            Some("Role") if v["metadata"]["name"] == "weft-controller" => {
                let r: Role = serde_json::from_value(v).unwrap();
                assert_eq!(r.metadata.namespace.as_deref(), Some(NS));
                namespaced.extend(grant_set(r.rules.as_deref().unwrap_or_default()));
            }
            _ => {}
        }
    }
    (cluster, namespaced)
}

async fn admin_client(port: u16, token: Bearer) -> AdminClient {
    for _ in 0..600 {
        let endpoint = Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
        if let Ok(c) = endpoint.connect().await {
            return pb::admin_service_client::AdminServiceClient::with_interceptor(c, token);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the admin API never listened on {port}");
}

fn id(name: &str) -> Option<pb::ExecutionId> {
    Some(pb::ExecutionId {
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    })
}

/// Hot-loads a test guest into weft-system as `weft plugin push` does.
fn push(server: &str, guest: &str) {
    let dir = root().join("target/test-guests");
    push_file(server, &dir.join(format!("{guest}.wasm")), guest);
}

/// `weft plugin push` of a component with the test guest's manifest.
fn push_file(server: &str, wasm: &std::path::Path, guest: &str) {
    let dir = root().join("target/test-guests");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["plugin", "push"])
        .arg(wasm)
        .arg("--manifest")
        .arg(dir.join(format!("{guest}.yaml")))
        .args(["--server", server, "-n", NS, "--wait"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "push {guest}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn wait_metric(p: &ControllerProcess, what: &str, ok: impl Fn(&str) -> bool) -> String {
    for _ in 0..600 {
        let m = p.metrics().await;
        if ok(&m) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{what}: never in /metrics:\n{}\nlog:\n{}",
        p.metrics().await,
        p.log()
    );
}

async fn wait_phase(client: &mut AdminClient, name: &str, phase: &str, secs: u64) {
    for _ in 0..secs * 10 {
        let e = client
            .get_execution(pb::GetExecutionRequest { id: id(name) })
            .await
            .unwrap()
            .into_inner();
        if e.phase == phase {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never reached {phase}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_controller_uses_exactly_its_rbac_and_exposes_its_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft::dev::start(dir.path()).await.unwrap();
    let server = cluster.base_url();
    let client = weft::runtime::client_for(&server).unwrap();
    weft::runtime::install_crd(&client).await.unwrap();
    let admin_kubeconfig = dir.path().join("kubeconfig");
    let out = kubectl(&admin_kubeconfig, &["create", "namespace", NS], None).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The controller as deploy/base/deployment.yaml runs it, under its
    // service account's name.
    let kubeconfig = dir.path().join("controller.kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_as(&server, CONTROLLER_USER)).unwrap();
    let admin_port = free_port();
    let admin_config = dir.path().join("admin.yaml");
    std::fs::write(
        &admin_config,
        format!("listen: 127.0.0.1:{admin_port}\nmiddleware: [request-id, auth-token]\n"),
    )
    .unwrap();
    // The base grants the pod plugin's kinds; other plugins' kinds come
    // with deploy/components (checked in tests/deploy.rs). So this
    // controller starts with the pod plugin and the middleware only.
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for f in [
        "pod.wasm",
        "pod.yaml",
        "request-id.wasm",
        "request-id.yaml",
        "auth-token.wasm",
        "auth-token.yaml",
    ] {
        std::fs::copy(root().join("target/plugins").join(f), plugins.join(f)).unwrap();
    }
    // auth-token's static tokens, from the Secret its manifest names (as
    // deploy/README.md says to create it).
    let tokens = |t: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: weft-auth-token, namespace: {NS}}}\nstringData:\n  tokens.json: '{{\"{t}\": \"ci-robot\"}}'\n"
        )
    };
    let out = kubectl(
        &admin_kubeconfig,
        &["apply", "-f", "-"],
        Some(&tokens("ops-token-1")),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The admission webhook as deploy/ installs it: its Service (here at
    // a free port of this machine) and its two configurations, whose
    // caBundle the controller fills; a certificate that lives 3 s makes
    // it renew (and so update its Secret) during the test.
    let webhook_port = free_port();
    let mut webhook_yaml: Vec<String> = weft::webhook::configurations(|path| {
        serde_json::json!({"service": {"namespace": NS, "name": "weft-webhook", "path": path, "port": 443}})
    })
    .iter()
    .map(|c| serde_yaml::to_string(c).unwrap())
    .collect();
    webhook_yaml.push(format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: weft-webhook, namespace: {NS}}}\nspec:\n  ports: [{{name: https, port: 443, targetPort: {webhook_port}}}]\n"
    ));
    let out = kubectl(
        &admin_kubeconfig,
        &["apply", "-f", "-"],
        Some(&webhook_yaml.join("---\n")),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let webhook_port_arg = format!("--webhook-port={webhook_port}");
    let controller = ControllerProcess::start(
        &kubeconfig,
        "weft-controller-0",
        &[
            &webhook_port_arg,
            "--webhook-cert-validity=3s",
            // Plugins are pushed right before workflows that use them.
            "--allow-unknown-task-types",
            "--plugin-namespace=weft-system",
            "--impersonate-plugins",
            "--leader-elect",
            "--leader-elect-namespace=weft-system",
            // The panic guest traps on every call: let the breaker trip.
            "--breaker-faults=3",
            "--plugins",
            plugins.to_str().unwrap(),
            "--admin-config",
            admin_config.to_str().unwrap(),
        ],
    );
    let bearer = Bearer::default();
    *bearer.0.lock().unwrap() = "ops-token-1".into();
    let mut admin = admin_client(admin_port, bearer.clone()).await;
    wait_metric(&controller, "leadership", |m| {
        m.contains("weft_leader{shard=\"0\"} 1")
    })
    .await;

    // Hot loading: two misbehaving plugins arrive as ConfigMaps.
    push(&server, "panic");
    push(&server, "loop-forever");
    wait_metric(&controller, "both plugins loaded", |m| {
        m.contains("weft_plugin_loads_total{plugin=\"panic\",result=\"loaded\"")
            && m.contains("weft_plugin_loads_total{plugin=\"loop-forever\",result=\"loaded\"")
    })
    .await;

    // A workflow with an approval gate, through the admin API, on a
    // hot-loaded plugin that gets a new version while it waits: the old
    // version is archived for it, and the archive deleted once it is done.
    push(&server, "echo");
    let gated = r#"{"nodes": [
        {"id": "hello", "task": {"type": "echo"}, "cache": {"version": "1"}},
        {"id": "approve", "dependsOn": ["hello"], "gate": {"approval": {}}},
        {"id": "after", "dependsOn": ["approve"], "task": {"type": "echo"}, "cache": {"version": "1"}, "inputs": {"n": 2}}
    ]}"#;
    admin
        .create_execution(pb::CreateExecutionRequest {
            namespace: "default".into(),
            name: "gated".into(),
            spec: gated.into(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}; log:\n{}", controller.log()));
    let mut watch = admin
        .watch_execution(pb::WatchExecutionRequest { id: id("gated") })
        .await
        .unwrap()
        .into_inner();
    wait_phase(&mut admin, "gated", "Running", 60).await;
    let workflows: kube::Api<weft::api::Workflow> =
        kube::Api::namespaced(client.clone(), "default");
    for _ in 0..600 {
        let wf = workflows.get("gated").await.unwrap();
        let hello = wf.status.and_then(|s| s.nodes.get("hello").cloned());
        if hello.is_some_and(|n| n.plugin.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut echo2 = std::fs::read(root().join("target/test-guests/echo.wasm")).unwrap();
    echo2.extend([0, 12, 9]);
    echo2.extend(b"weft-saltv2");
    let echo2_path = dir.path().join("echo.wasm");
    std::fs::write(&echo2_path, echo2).unwrap();
    push_file(&server, &echo2_path, "echo");
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), NS);
    let archives = async || {
        configmaps
            .list(&kube::api::ListParams::default().labels(weft::hotload::package::LABEL_ARCHIVE))
            .await
            .unwrap()
            .items
            .len()
    };
    for _ in 0..600 {
        if archives().await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(archives().await, 1, "the pinned version is archived");
    // While it waits at the gate, the node gauges count it.
    wait_metric(&controller, "nodes by phase", |m| {
        common::sum(m, "weft_nodes") > 0.0
            && common::sample(m, "weft_active_workflows").is_some_and(|v| v >= 1.0)
    })
    .await;
    // The gate waits until `hello` is done; approving early is refused.
    for _ in 0..600 {
        if admin
            .approve_gate(pb::ApproveGateRequest {
                id: id("gated"),
                node_id: "approve".into(),
            })
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut last = String::new();
    while let Some(Ok(e)) = tokio_stream::StreamExt::next(&mut watch).await {
        last = e.phase;
    }
    assert_eq!(last, "Succeeded");
    for _ in 0..600 {
        if archives().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(archives().await, 0, "the archive goes once unpinned");

    // One that runs until it is aborted.
    admin
        .create_execution(pb::CreateExecutionRequest {
            namespace: "default".into(),
            name: "long".into(),
            spec: r#"{"nodes": [{"id": "sleep", "task": {"type": "pod", "config": {"image": "busybox", "command": ["sleep", "60"]}}}]}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "default");
    for _ in 0..600 {
        if pods.get_opt("long-sleep-0").await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin
        .abort_execution(pb::AbortExecutionRequest {
            id: id("long"),
            reason: "test".into(),
        })
        .await
        .unwrap();
    wait_phase(&mut admin, "long", "Aborted", 60).await;
    let listed = admin
        .list_executions(pb::ListExecutionsRequest {
            namespace: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.executions.len(), 2);

    // A workflow whose plugins fault: a trap and a deadline hit.
    admin
        .create_execution(pb::CreateExecutionRequest {
            namespace: "default".into(),
            name: "faulty".into(),
            spec: r#"{"failurePolicy": "FailAfterExecutableNodesComplete", "nodes": [
                {"id": "trap", "task": {"type": "test-panic", "config": {}}},
                {"id": "spin", "task": {"type": "test-loop-forever", "config": {}}}
            ]}"#
            .into(),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_phase(&mut admin, "faulty", "Failed", 120).await;

    // A workflow holding a mutex: its Lock read, created and updated
    // (released) as the controller, and listed through the admin API.
    admin
        .create_execution(pb::CreateExecutionRequest {
            namespace: "default".into(),
            name: "locked".into(),
            spec: r#"{"synchronization": {"mutex": {"name": "ops"}},
                "nodes": [{"id": "say", "task": {"type": "echo"}}]}"#
                .into(),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_phase(&mut admin, "locked", "Succeeded", 60).await;
    let locks = admin
        .list_locks(pb::ListLocksRequest {
            namespace: "default".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .locks;
    assert!(locks.iter().any(|l| l.lock == "mutex/ops"), "{locks:?}");

    // A WorkflowTemplate launched through the admin API (the controller
    // and its webhook read it), and a CronWorkflow whose runs the history
    // limit deletes (its status written, its Workflows deleted).
    let template = "apiVersion: weft.dev/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: echoer, namespace: default}\nspec:\n  nodes: [{id: say, task: {type: echo}}]\n---\napiVersion: weft.dev/v1alpha1\nkind: CronWorkflow\nmetadata: {name: ticker, namespace: default}\nspec:\n  schedule: '@every 1s'\n  successfulJobsHistoryLimit: 0\n  workflowSpec: {workflowTemplateRef: {name: echoer}}\n";
    let out = kubectl(&admin_kubeconfig, &["apply", "-f", "-"], Some(template)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    admin
        .create_execution(pb::CreateExecutionRequest {
            namespace: "default".into(),
            name: "launched".into(),
            spec: r#"{"workflowTemplateRef": {"name": "echoer"}}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_phase(&mut admin, "launched", "Succeeded", 60).await;
    let launched = admin
        .get_execution(pb::GetExecutionRequest { id: id("launched") })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(launched.template, "echoer");
    let nodes: Vec<&str> = launched.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(nodes, ["say"], "the template's nodes");
    assert_eq!(launched.nodes[0].phase, "Succeeded");
    let ticker = kube::api::ListParams::default().labels("weft.dev/cron-workflow=ticker");
    let mut seen = None;
    for _ in 0..600 {
        let names: Vec<String> = workflows
            .list(&ticker)
            .await
            .unwrap()
            .items
            .iter()
            .map(kube::ResourceExt::name_any)
            .collect();
        match &seen {
            None => seen = names.first().cloned(),
            Some(first) if !names.contains(first) => break,
            Some(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = seen.expect("the CronWorkflow launched a Workflow");
    assert!(
        workflows.get_opt(&first).await.unwrap().is_none(),
        "{first} is deleted by the history limit"
    );
    let suspend = [
        "patch",
        "cronworkflow",
        "ticker",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec": {"suspend": true}}"#,
    ];
    assert!(
        kubectl(&admin_kubeconfig, &suspend, None)
            .await
            .status
            .success()
    );

    // Rotation: the new token works and the old one stops, no restart.
    let out = kubectl(
        &admin_kubeconfig,
        &["apply", "-f", "-"],
        Some(&tokens("ops-token-2")),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = pb::ListExecutionsRequest {
        namespace: "default".into(),
        ..Default::default()
    };
    for _ in 0..600 {
        let old = admin.list_executions(list.clone()).await;
        if old
            .as_ref()
            .is_err_and(|e| e.code() == tonic::Code::Unauthenticated)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = admin.list_executions(list.clone()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    *bearer.0.lock().unwrap() = "ops-token-2".into();
    admin.list_executions(list).await.unwrap();
    for token in ["ops-token-1", "ops-token-2"] {
        assert!(
            !controller.log().contains(token),
            "{token} in the controller log"
        );
    }

    // /metrics: what the dashboards and alerts are built on.
    let m = wait_metric(&controller, "the breaker's trip", |m| {
        m.contains("weft_plugin_rollbacks_total{plugin=\"panic\"}")
    })
    .await;
    for (family, why) in [
        ("weft_reconciles_total", "reconciles"),
        ("weft_round_latency_seconds_count", "round latency"),
        ("weft_node_transitions_total", "node phase transitions"),
        (
            "weft_plugin_call_duration_seconds_count",
            "per-plugin calls and latency",
        ),
        ("weft_plugin_traps_total", "traps"),
        ("weft_plugin_deadline_hits_total", "deadline hits"),
        ("weft_plugin_memory_high_water_bytes", "memory high-water"),
        ("weft_plugin_loads_total", "hot-reload events"),
        ("weft_grpc_requests_total", "gRPC by method and code"),
        ("weft_grpc_request_duration_seconds_count", "gRPC latency"),
        ("weft_leader", "leadership"),
        ("weft_api_writes_total", "API writes"),
    ] {
        assert!(sum(&m, family) > 0.0, "{why}: no {family} sample:\n{m}");
    }
    for (series, why) in [
        (
            "weft_plugin_traps_total{plugin=\"panic\"}",
            "the panic guest's trap",
        ),
        (
            "weft_plugin_deadline_hits_total{plugin=\"loop-forever\"}",
            "the loop's deadline",
        ),
        (
            "weft_plugin_memory_high_water_bytes{plugin=\"pod\"}",
            "the pod plugin's memory",
        ),
        (
            "weft_plugin_call_duration_seconds_count{plugin=\"request-id\",call=\"on-request\"}",
            "the middleware's calls",
        ),
        (
            "weft_grpc_requests_total{method=\"/weft.admin.v1.AdminService/CreateExecution\",code=\"OK\"}",
            "CreateExecution",
        ),
        (
            "weft_grpc_requests_total{method=\"/weft.admin.v1.AdminService/ApproveGate\",code=\"OK\"}",
            "ApproveGate",
        ),
    ] {
        assert!(
            common::sample(&m, series).is_some_and(|v| v > 0.0),
            "{why}: no {series}:\n{m}"
        );
    }
    assert!(
        common::sample(&m, "weft_plugin_rollbacks_total{plugin=\"panic\"}")
            .is_some_and(|v| v >= 1.0),
        "the breaker did not trip on the panic guest:\n{m}"
    );
    assert!(sum(&m, "weft_leader_transitions_total") >= 1.0, "{m}");

    // The RBAC review: what it used, against what deploy/ grants.
    let used = used_by(&cluster.audit(), CONTROLLER_USER);
    let (cluster_grants, ns_grants) = deployed_rbac();
    let mut missing = Vec::new();
    for ((group, resource, verb), namespaces) in &used {
        let g = (group.clone(), resource.clone(), verb.clone());
        let only_own = namespaces.iter().all(|n| n == NS);
        if !(cluster_grants.contains(&g) || (only_own && ns_grants.contains(&g))) {
            missing.push(format!("{verb} {group}/{resource} in {namespaces:?}"));
        }
    }
    assert!(
        missing.is_empty(),
        "deploy/'s RBAC does not grant what the controller used: {missing:?}"
    );
    let unused: Vec<&Grant> = cluster_grants
        .iter()
        .chain(&ns_grants)
        .filter(|g| !used.contains_key(g))
        .collect();
    assert!(
        unused.is_empty(),
        "deploy/'s RBAC grants verbs the controller never used: {unused:?}"
    );
    // The pod plugin's Pods were written and deleted as its ServiceAccount,
    // with exactly what its rendered ClusterRole grants.
    let pod_sa = "system:serviceaccount:weft-system:weft-plugin-pod";
    let pod_used: BTreeSet<Grant> = used_by(&cluster.audit(), pod_sa).into_keys().collect();
    assert_eq!(pod_used, plugin_grants("weft-plugin-pod"), "{pod_sa}");
    // Cluster-wide grants are for what cannot be confined to weft-system.
    // Except a grant by name for every namespace: its own artifact
    // repository ConfigMap (docs/artifacts.md), read wherever workflows run.
    let by_name: Grant = (String::new(), "configmaps".into(), "get".into());
    let confinable: Vec<&Grant> = cluster_grants
        .iter()
        .filter(|g| **g != by_name && used[g].iter().all(|n| n == NS))
        .collect();
    assert!(
        confinable.is_empty(),
        "granted cluster-wide but used only in {NS}: {confinable:?}"
    );
    drop(controller);
    cluster.shutdown().await;
}

/// Each (group, resource, verb) `user` used, with the namespaces it used it
/// in ("" for all namespaces or cluster scope).
/// Acting as another user (a plugin's ServiceAccount) counts as
/// `impersonate` on `serviceaccounts` in that account's namespace.
fn used_by(audit: &[weft_cluster::AuditRecord], user: &str) -> BTreeMap<Grant, BTreeSet<String>> {
    let mut used: BTreeMap<Grant, BTreeSet<String>> = BTreeMap::new();
    for r in audit.iter().filter(|r| r.user == user) {
        used.entry((r.api_group.clone(), r.resource.clone(), r.verb.clone()))
            .or_default()
            .insert(r.namespace.clone());
    }
    for r in audit
        .iter()
        .filter(|r| r.impersonator.as_deref() == Some(user))
    {
        let ns = r.user.split(':').nth(2).unwrap_or_default().to_string();
        used.entry((
            String::new(),
            "serviceaccounts".into(),
            "impersonate".into(),
        ))
        .or_default()
        .insert(ns);
    }
    assert!(!used.is_empty(), "the audit log has nothing from {user}");
    used
}
