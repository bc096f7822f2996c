//! The Helm chart for real (issue 39): deploy/helm/weft rendered by Helm's
//! own engine with examples/production.yaml (and RBAC for the spark and
//! k8s-resource plugins' kinds), applied server-side onto kube-apiserver,
//! then run as real_deploy.rs runs the kustomize overlay: the controller
//! as the chart's ServiceAccount, every example through kubectl, no 403,
//! and what it used against what the chart grants. Its own control plane:
//! the chart and the overlay install the same objects.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_installs_on_kube_apiserver_and_runs_every_example_with_no_403() {
    let cluster = common::k8s::shared();
    let install = common::rendered(
        std::process::Command::new("python3")
            .arg(common::root().join("deploy/helm/template.py"))
            .arg(common::root().join("deploy/helm/weft"))
            .arg("-f")
            .arg(common::root().join("deploy/helm/examples/production.yaml"))
            .args(["--set", "pluginKinds.spark=true"])
            .args(["--set", "pluginKinds.k8sResource=true"])
            .arg("--include-crds"),
        "helm template (production, with the plugins' kinds)",
    );
    common::install::install_and_run_examples(cluster, &install).await;
}
