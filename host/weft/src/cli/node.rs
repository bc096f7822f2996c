//! `weft node`: run the pods a real API server's scheduler binds to this
//! machine as local processes, as the dev cluster's runner does (see
//! [`crate::node`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::node::{self, NodeConfig};

/// Arguments of `weft node`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// The Node's name (default: this machine's hostname).
    #[arg(long, env = "WEFT_NODE_NAME")]
    pub node_name: Option<String>,
    /// Where pods' logs, termination messages and volumes go.
    #[arg(long, default_value = ".weft/node", env = "WEFT_NODE_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The kubelet endpoint (`kubectl logs` through the API server); port 0
    /// picks a free one, announced in the Node's status.
    #[arg(long, default_value = "127.0.0.1:10250")]
    pub listen: SocketAddr,
    /// The endpoint's serving certificate (PEM), as the kubelet's flag;
    /// self-signed when absent.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The endpoint's private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Accept only clients (the API server's --kubelet-client-certificate)
    /// with a certificate of this CA.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
}

/// Run `weft node` until SIGTERM or Ctrl-C (KUBECONFIG or in-cluster).
pub fn node(args: NodeArgs) -> anyhow::Result<ExitCode> {
    let name = match args.node_name {
        Some(n) => n,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_lowercase())
            .unwrap_or_else(|_| "weft-node".into()),
    };
    let cfg = NodeConfig {
        name,
        data_dir: args.data_dir,
        listen: args.listen,
        tls: args.tls_cert_file.zip(args.tls_private_key_file),
        client_ca: args.client_ca_file,
        runner: weft_cluster::RunnerConfig::default(),
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let config = kube::Config::infer().await?;
        node::run(config, cfg, super::dev::shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}
