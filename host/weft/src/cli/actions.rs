//! `weft retry|resubmit|suspend|resume|stop|terminate NAME` and `weft
//! approve|reject NAME NODE`: the actions
//! `argo` has for a submitted workflow, through [`crate::actions::act`]
//! (the admin API calls the same).

use std::process::ExitCode;

use clap::Args;
use kube::ResourceExt;

use crate::actions::{Action, ActionError, act};
use crate::metrics::Metrics;

/// Which Workflow, and where.
#[derive(Debug, Args)]
pub struct Target {
    /// The Workflow.
    pub name: String,
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// `weft retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// Which Workflow.
    #[command(flatten)]
    pub target: Target,
    /// Also restart this node and every node after it (even if they
    /// succeeded).
    #[arg(long, value_name = "ID")]
    pub node: Option<String>,
}

/// `weft approve`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Which Workflow.
    #[command(flatten)]
    pub target: Target,
    /// The approval gate's node id.
    pub node: String,
}

/// `weft reject`.
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// Which Workflow and gate.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Why (it becomes the node's message).
    #[arg(long, default_value = "")]
    pub reason: String,
}

/// `weft resubmit`.
#[derive(Debug, Args)]
pub struct ResubmitArgs {
    /// Which Workflow.
    #[command(flatten)]
    pub target: Target,
    /// Let cached nodes use the cache (by default they run again and
    /// refresh it).
    #[arg(long)]
    pub memoized: bool,
}

/// Does `action` to the target and says what happened: 0, or 1 with the
/// reason on stderr.
pub fn run(target: Target, action: Action) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = target.cluster.client().await?;
        let ns = &target.cluster.namespace;
        let user = std::env::var("USER").unwrap_or_else(|_| "someone".into());
        let by = format!("{user} through the weft CLI");
        match act(&client, &Metrics::default(), ns, &target.name, &action, &by).await {
            Ok(done) => {
                let name = done.workflow.name_any();
                super::out(&format!("workflow {ns}/{name}: {}", done.message))?;
                Ok(ExitCode::SUCCESS)
            }
            Err(ActionError::Kube(e)) => Err(e.into()),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::FAILURE)
            }
        }
    })
}
