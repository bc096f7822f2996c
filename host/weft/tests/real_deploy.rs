//! deploy/ for real (issue 39): every overlay and Helm example passes
//! kube-apiserver's server-side dry run; then `kubectl apply --server-side` of the
//! production overlay (with the k8s-resource and spark components) onto
//! kube-apiserver, then the controller run out of
//! cluster as deploy/'s ServiceAccount with a token from the TokenRequest
//! API, its plugins' writes made by impersonating each plugin's
//! ServiceAccount, its webhook registered by deploy/'s configurations.
//! Every example passes through kubectl; kube-apiserver's audit log shows
//! no 403 for Weft's accounts, and what they used against what deploy/
//! grants.

mod common;

use std::collections::BTreeSet;

use common::k8s::{NodeProcess, shared};
use common::{ControllerProcess, free_port, kubectl_ok, root};
use kube::Api;
use serde_json::Value;

const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";
const POD_PLUGIN: &str = "system:serviceaccount:weft-system:weft-plugin-pod";

/// (user, verb, group/resource[/subresource]) of every request kube-apiserver
/// audited, the impersonated user when there is one; and the 403s.
fn used(audit: &[Value]) -> (BTreeSet<(String, String, String)>, Vec<String>) {
    let mut used = BTreeSet::new();
    let mut denied = Vec::new();
    for e in audit {
        // A watch is audited when it starts; it completes only when it ends.
        if e["stage"] != "ResponseComplete" && e["stage"] != "ResponseStarted" {
            continue;
        }
        if e["impersonatedUser"].is_object() {
            let who = e["user"]["username"].as_str().unwrap_or("").to_string();
            used.insert((who, "impersonate".into(), "/serviceaccounts".into()));
        }
        let user = e["impersonatedUser"]["username"]
            .as_str()
            .or(e["user"]["username"].as_str())
            .unwrap_or("");
        if user != CONTROLLER && user != POD_PLUGIN {
            continue;
        }
        let r = &e["objectRef"];
        let Some(resource) = r["resource"].as_str() else {
            continue; // discovery and /version
        };
        let mut what = format!("{}/{resource}", r["apiGroup"].as_str().unwrap_or(""));
        if let Some(sub) = r["subresource"].as_str() {
            what = format!("{what}/{sub}");
        }
        let verb = e["verb"].as_str().unwrap_or("").to_string();
        if e["responseStatus"]["code"] == 403 {
            denied.push(format!(
                "{user} {verb} {what}: {}",
                e["responseStatus"]["message"]
            ));
        }
        // A server-side apply that made the object needed `create` too.
        if verb == "patch" && e["responseStatus"]["code"] == 201 {
            used.insert((user.to_string(), "create".into(), what.clone()));
        }
        used.insert((user.to_string(), verb, what));
    }
    (used, denied)
}

/// (user, verb, group/resource) that deploy/'s Roles grant those users.
fn granted(install: &str) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for doc in serde_yaml::Deserializer::from_str(install) {
        let v: Value = serde::Deserialize::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap_or("");
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let user = match v["metadata"]["name"].as_str() {
            Some("weft-controller") => CONTROLLER,
            Some("weft-plugin-pod") => POD_PLUGIN,
            _ => continue,
        };
        for rule in v["rules"].as_array().into_iter().flatten() {
            for g in rule["apiGroups"].as_array().into_iter().flatten() {
                for r in rule["resources"].as_array().into_iter().flatten() {
                    for verb in rule["verbs"].as_array().into_iter().flatten() {
                        let what = format!("{}/{}", g.as_str().unwrap(), r.as_str().unwrap());
                        out.insert((user.into(), verb.as_str().unwrap().into(), what));
                    }
                }
            }
        }
    }
    out
}

/// Granted but not used by the examples, each with why deploy/ keeps it.
const UNUSED_GRANTS: &[(&str, &str, &str, &str)] = &[
    (
        CONTROLLER,
        "create",
        "/configmaps",
        "the admin API's PushPlugin writes plugin ConfigMaps (no admin API here; tests/admin.rs, tests/hotload.rs)",
    ),
    (
        CONTROLLER,
        "delete",
        "/configmaps",
        "the admin API's PushPlugin writes plugin ConfigMaps (no admin API here; tests/admin.rs, tests/hotload.rs)",
    ),
    (
        CONTROLLER,
        "get",
        "/configmaps",
        "the admin API's PushPlugin writes plugin ConfigMaps (no admin API here; tests/admin.rs, tests/hotload.rs)",
    ),
    (
        CONTROLLER,
        "patch",
        "/configmaps",
        "the admin API's PushPlugin writes plugin ConfigMaps (no admin API here; tests/admin.rs, tests/hotload.rs)",
    ),
    (
        CONTROLLER,
        "create",
        "weft.dev/taskcaches",
        "no example caches a task's outputs (tests/cache.rs on the dev cluster)",
    ),
    (
        CONTROLLER,
        "patch",
        "weft.dev/taskcaches",
        "no example caches a task's outputs (tests/cache.rs on the dev cluster)",
    ),
    (
        CONTROLLER,
        "delete",
        "weft.dev/workflows",
        "CronWorkflow history limits and the admin API's delete; the cron example is suspended after one run",
    ),
    (
        CONTROLLER,
        "get",
        "weft.dev/workflows",
        "the admin API's GetExecution reads one Workflow (no admin API here)",
    ),
    (
        CONTROLLER,
        "update",
        "/secrets",
        "renewing weft-webhook-certs in the last third of its validity (a year)",
    ),
    (
        CONTROLLER,
        "list",
        "kubeflow.org/pytorchjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "kubeflow.org/pytorchjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "kubeflow.org/tfjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "kubeflow.org/tfjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "ray.io/rayclusters",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "ray.io/rayclusters",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "ray.io/rayjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "ray.io/rayjobs",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "sparkoperator.k8s.io/sparkapplications",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "sparkoperator.k8s.io/sparkapplications",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "tekton.dev/pipelineruns",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "tekton.dev/pipelineruns",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "list",
        "tekton.dev/taskruns",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
    (
        CONTROLLER,
        "watch",
        "tekton.dev/taskruns",
        "the CRD is not installed here: watched once a Workflow needs the kind",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_installs_on_kube_apiserver_and_its_service_account_runs_every_example_with_no_403()
{
    let cluster = shared();
    let kc = &cluster.kubeconfig;
    every_overlay_and_helm_example_passes_a_server_dry_run(kc).await;
    // The production overlay with the components of the plugins this
    // controller loads (all first-party ones: their child kinds are watched).
    let dir = cluster.dir.join("install");
    std::fs::create_dir_all(&dir).unwrap();
    // kustomize takes relative paths only: target/k8s-clusters/cluster-*/install.
    assert!(dir.starts_with(root().join("target/k8s-clusters")));
    let d = "../../../../deploy";
    let kustomization = format!(
        "resources: [{d}/overlays/production]\ncomponents: [{d}/components/k8s-resource, {d}/components/spark]\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let install = common::rendered(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir),
        "kubectl kustomize of the production overlay with the plugins' components",
    );
    kubectl_ok(kc, &["apply", "--server-side", "-f", "-"], Some(&install)).await;
    let port = free_port();
    cluster.route_webhooks(port);
    let _node = NodeProcess::start(cluster, "weft-1");

    // The Deployment's ServiceAccount, through the TokenRequest API.
    let token = kubectl_ok(
        kc,
        &[
            "create",
            "token",
            "weft-controller",
            "-n",
            "weft-system",
            "--duration=2h",
        ],
        None,
    )
    .await;
    let as_sa = cluster.kubeconfig_with_token("weft-controller", token.trim());
    // deploy/base/deployment.yaml's flags that matter here (no admin API).
    let controller = ControllerProcess::start(
        &as_sa,
        "deployed",
        &[
            "--plugin-namespace=weft-system",
            "--impersonate-plugins",
            "--leader-elect",
            "--leader-elect-namespace=weft-system",
            "--webhook-port",
            &port.to_string(),
        ],
    );
    controller.started_metrics().await;

    let client = cluster.client().await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(client, "default");
    for example in common::examples::examples() {
        let run = common::examples::check_through_kubectl(kc, &workflows, &example);
        if tokio::time::timeout(std::time::Duration::from_secs(150), run)
            .await
            .is_err()
        {
            panic!(
                "{}: {:#?}\n{}",
                example.display(),
                used(&cluster.audit()).1,
                controller.log()
            );
        }
    }

    let (used, denied) = used(&cluster.audit());
    assert!(denied.is_empty(), "403s:\n{}", denied.join("\n"));
    let granted = granted(&install);
    let beyond: Vec<_> = used.difference(&granted).collect();
    assert!(
        beyond.is_empty(),
        "used without a grant (by aggregation?): {beyond:#?}"
    );
    let unused: BTreeSet<(String, String, String)> = granted.difference(&used).cloned().collect();
    let justified: BTreeSet<(String, String, String)> = UNUSED_GRANTS
        .iter()
        .map(|(u, v, r, _why)| (u.to_string(), v.to_string(), r.to_string()))
        .collect();
    assert_eq!(
        unused, justified,
        "granted but unused by every example: list each in UNUSED_GRANTS with why"
    );
}

/// Every install deploy/ offers, as kube-apiserver sees it: each overlay and
/// each Helm example applied server-side with `--dry-run=server`, so the
/// real API validates every object (schemas, defaults, admission) without
/// keeping it. Their namespaces are made first, as an install would. Run
/// before anything is installed for real (one cluster for the file).
async fn every_overlay_and_helm_example_passes_a_server_dry_run(kc: &std::path::Path) {
    let installs = [
        ("overlay dev", common::kustomize("deploy/overlays/dev")),
        (
            "overlay production",
            common::kustomize("deploy/overlays/production"),
        ),
        ("helm dev", common::helm_template("dev")),
        ("helm production", common::helm_template("production")),
        ("helm sharded", common::helm_template("sharded")),
    ];
    for (what, install) in installs {
        let mut namespaces = BTreeSet::new();
        for doc in serde_yaml::Deserializer::from_str(&install) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if let Some(ns) = v["metadata"]["namespace"].as_str() {
                namespaces.insert(ns.to_string());
            }
        }
        for ns in namespaces {
            let out = common::kubectl(kc, &["create", "namespace", &ns], None).await;
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() || err.contains("AlreadyExists"),
                "{ns}: {err}"
            );
        }
        let args = ["apply", "--server-side", "--dry-run=server", "-f", "-"];
        let out = common::kubectl(kc, &args, Some(&install)).await;
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
