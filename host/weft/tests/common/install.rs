//! deploy/ installed for real on the file's kube-apiserver (issue 39), by
//! kustomize or by Helm: applied server-side, then the controller run out
//! of cluster as the install's ServiceAccount with a token from the
//! TokenRequest API, its plugins' writes made by impersonating each
//! plugin's ServiceAccount, its webhook registered by the install's
//! configurations. Every example passes through kubectl; the audit log
//! shows no 403 for Weft's accounts, and what they used against what the
//! install grants, each grant unused by the examples listed with why.

use std::collections::BTreeSet;

use kube::Api;
use serde_json::Value;

use super::k8s::{NodeProcess, RealCluster};
use super::{ControllerProcess, free_port, kubectl_ok};

const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";
const POD_PLUGIN: &str = "system:serviceaccount:weft-system:weft-plugin-pod";

/// Applies `install` (rendered YAML) and runs every example through it as
/// described above.
pub async fn install_and_run_examples(cluster: &RealCluster, install: &str) {
    install_and_run_examples_with(cluster, install, &[], &[]).await;
}

/// [`install_and_run_examples`] with the install's own controller flags
/// (`flags`) and the grants it adds that the examples leave unused, each
/// with why (`also_unused`).
pub async fn install_and_run_examples_with(
    cluster: &RealCluster,
    install: &str,
    flags: &[&str],
    also_unused: &[(&str, &str, &str, &str)],
) {
    let kc = &cluster.kubeconfig;
    kubectl_ok(kc, &["apply", "--server-side", "-f", "-"], Some(install)).await;
    let port = free_port();
    cluster.route_webhooks(port);
    let _node = NodeProcess::start(cluster, "weft-1");

    // The Deployment's ServiceAccount, through the TokenRequest API.
    let as_sa = cluster.controller_kubeconfig("weft-controller");
    // deploy/base/deployment.yaml's flags that matter here (no admin API).
    let port = port.to_string();
    let mut args = vec![
        "--plugin-namespace=weft-system",
        "--impersonate-plugins",
        "--leader-elect",
        "--leader-elect-namespace=weft-system",
        "--webhook-port",
        port.as_str(),
    ];
    // Artifacts (examples/artifacts.yaml) in a local directory: the
    // node runs pods as processes of this machine.
    let repo = cluster.dir.join("artifact-repository.yaml");
    let local = format!(
        "local: {{path: {}}}\n",
        cluster.dir.join("artifacts").display()
    );
    std::fs::write(&repo, local).unwrap();
    let repo = repo.display().to_string();
    args.extend([
        "--artifact-repository",
        &repo,
        "--io-binary",
        env!("CARGO_BIN_EXE_weft"),
    ]);
    args.extend_from_slice(flags);
    let controller = ControllerProcess::start(&as_sa, "deployed", &args);
    controller.started_metrics().await;

    let client = cluster.client().await;
    let workflows: Api<weft::api::Workflow> = Api::namespaced(client, "default");
    for example in super::examples::examples() {
        let run = super::examples::check_through_kubectl(kc, &workflows, &example);
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
    let granted = granted(install);
    let beyond: Vec<_> = used.difference(&granted).collect();
    assert!(
        beyond.is_empty(),
        "used without a grant (by aggregation?): {beyond:#?}"
    );
    let unused: BTreeSet<(String, String, String)> = granted.difference(&used).cloned().collect();
    let justified: BTreeSet<(String, String, String)> = UNUSED_GRANTS
        .iter()
        .chain(also_unused)
        .map(|(u, v, r, _why)| (u.to_string(), v.to_string(), r.to_string()))
        .collect();
    assert_eq!(
        unused, justified,
        "granted but unused by every example: list each in UNUSED_GRANTS with why"
    );
}

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
        "weft.dev/locks",
        "a Lock is made by the first workflow naming a mutex, semaphore or pool; no example names one (tests/sync.rs, tests/operations.rs)",
    ),
    (
        CONTROLLER,
        "get",
        "weft.dev/locks",
        "a Lock is read fresh before its first write or after a conflict; no example names one (tests/sync.rs, tests/operations.rs)",
    ),
    (
        CONTROLLER,
        "update",
        "weft.dev/locks",
        "a Lock is updated when a holder releases it or a waiter joins; no example names one (tests/sync.rs, tests/operations.rs)",
    ),
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
