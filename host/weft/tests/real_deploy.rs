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

use common::k8s::shared;
use common::root;
use serde_json::Value;

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
    common::install::install_and_run_examples(cluster, &install).await;
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
