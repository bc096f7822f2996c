//! Runs a dev cluster until Ctrl-C, for poking at it with kubectl:
//! `cargo run -p weft-cluster --example dev_server -- /tmp/weft-dev`
//! then `kubectl --kubeconfig /tmp/weft-dev/kubeconfig get ns`.
//! `WEFT_DEV_AUTHORIZATION_MODE=RBAC` enforces RBAC
//! (`kubectl --as system:serviceaccount:NS:NAME ...` to act as an account).

#[tokio::main]
async fn main() -> weft_cluster::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/weft-dev".into());
    let mut config = weft_cluster::Config::new(&dir);
    if let Some(mode) = weft_cluster::Authorization::from_env()? {
        config.authorization = mode;
    }
    let kubeconfig = std::path::Path::new(&dir).join("kubeconfig");
    weft_cluster::run_until_ctrl_c(config, &kubeconfig).await
}
