//! deploy/overlays/dev for real (issue 39): applied server-side onto
//! kube-apiserver and run as real_deploy.rs runs the production overlay,
//! with the dev overlay's own flag, `--install-crd`, so the CRD rule it
//! adds is used too: every example through kubectl as its ServiceAccount,
//! no 403, what it used against what it grants. Its own control plane:
//! the overlays install the same objects.

mod common;

const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_overlay_installs_on_kube_apiserver_and_runs_every_example_with_no_403() {
    let cluster = common::k8s::shared();
    // With the components of the plugins this controller loads (all
    // first-party ones: their child kinds are watched), as real_deploy.rs.
    let dir = cluster.dir.join("install");
    std::fs::create_dir_all(&dir).unwrap();
    let d = "../../../../deploy";
    let kustomization = format!(
        "resources: [{d}/overlays/dev]\ncomponents: [{d}/components/k8s-resource, {d}/components/spark]\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let install = common::rendered(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir),
        "kubectl kustomize of the dev overlay with the plugins' components",
    );
    let unused = [
        (
            CONTROLLER,
            "create",
            "apiextensions.k8s.io/customresourcedefinitions",
            "--install-crd creates Weft's CRDs on a cluster without them; tests/k8s installs deploy/crds first, so here it only applies (patch)",
        ),
        (
            CONTROLLER,
            "get",
            "apiextensions.k8s.io/customresourcedefinitions",
            "granted beside create and patch; --install-crd's server-side apply reads nothing first",
        ),
    ];
    common::install::install_and_run_examples_with(cluster, &install, &["--install-crd"], &unused)
        .await;
}
