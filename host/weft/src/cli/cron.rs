//! `weft cron`: CronWorkflows as `argo cron` shows and drives them: list,
//! suspend, resume, and trigger a run now.

use std::process::ExitCode;
use std::time::SystemTime;

use clap::Subcommand;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use weft_dag::status::parse_timestamp;

use super::list::{created, human_duration, table};
use crate::api::{CronWorkflow, Workflow};

/// `weft cron ...`.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// CronWorkflows: schedule, suspended, last and next tick, running Workflows, age.
    List {
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
    /// Stop launching ticks (ticks missed meanwhile follow the catch-up
    /// rule on resume).
    Suspend {
        /// The CronWorkflow.
        name: String,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
    /// Launch ticks again.
    Resume {
        /// The CronWorkflow.
        name: String,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
    /// Launch its Workflow now, outside the schedule (owned and labelled
    /// like a tick's, so history limits and Forbid count it).
    Trigger {
        /// The CronWorkflow.
        name: String,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
}

/// Run `weft cron ...`.
pub fn run(cmd: CronCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match cmd {
            CronCommand::List { cluster } => list(&cluster).await,
            CronCommand::Suspend { name, cluster } => suspend(&cluster, &name, true).await,
            CronCommand::Resume { name, cluster } => suspend(&cluster, &name, false).await,
            CronCommand::Trigger { name, cluster } => trigger(&cluster, &name).await,
        }
    })
}

async fn api(cluster: &super::ClusterArgs) -> anyhow::Result<Api<CronWorkflow>> {
    Ok(Api::namespaced(cluster.client().await?, &cluster.namespace))
}

/// How long ago (or, negative, how far ahead) an RFC 3339 time is.
fn relative(at: Option<&str>, now: SystemTime) -> String {
    match parse_timestamp(at) {
        Some(t) if t <= now => format!(
            "{} ago",
            human_duration(now.duration_since(t).unwrap_or_default())
        ),
        Some(t) => format!(
            "in {}",
            human_duration(t.duration_since(now).unwrap_or_default())
        ),
        None => "-".into(),
    }
}

async fn list(cluster: &super::ClusterArgs) -> anyhow::Result<ExitCode> {
    let crons = api(cluster).await?.list(&Default::default()).await?.items;
    if crons.is_empty() {
        eprintln!(
            "No cron workflows found in namespace {}.",
            cluster.namespace
        );
        return Ok(ExitCode::SUCCESS);
    }
    let now = SystemTime::now();
    let mut rows = vec![
        [
            "NAME",
            "SCHEDULE",
            "SUSPENDED",
            "LAST",
            "NEXT",
            "ACTIVE",
            "AGE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for cw in &crons {
        let status = cw.status.clone().unwrap_or_default();
        let spec = &cw.spec.spec;
        let age = created(cw)
            .and_then(|c| now.duration_since(c).ok())
            .map_or("-".into(), human_duration);
        rows.push(vec![
            cw.name_any(),
            spec.schedule.clone(),
            spec.suspend.to_string(),
            relative(status.last_scheduled_time.as_deref(), now),
            match spec.suspend {
                true => "-".into(),
                false => relative(status.next_scheduled_time.as_deref(), now),
            },
            status.active.len().to_string(),
            age,
        ]);
    }
    super::out(&table(&rows))?;
    Ok(ExitCode::SUCCESS)
}

async fn suspend(cluster: &super::ClusterArgs, name: &str, on: bool) -> anyhow::Result<ExitCode> {
    let api = api(cluster).await?;
    let patch = json!({"spec": {"suspend": on}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "CronWorkflow {name} in namespace {}: {e}",
                cluster.namespace
            )
        })?;
    let what = if on { "suspended" } else { "resumed" };
    super::out(&format!("cronworkflow.weft.dev/{name} {what}"))?;
    Ok(ExitCode::SUCCESS)
}

async fn trigger(cluster: &super::ClusterArgs, name: &str) -> anyhow::Result<ExitCode> {
    let api = api(cluster).await?;
    let cw = api.get(name).await.map_err(|e| {
        anyhow::anyhow!(
            "CronWorkflow {name} in namespace {}: {e}",
            cluster.namespace
        )
    })?;
    let client = cluster.client().await?;
    let wf = crate::controller::cron::workflow_for(
        &client,
        &cw,
        SystemTime::now(),
        &format!("{name}-manual-"),
    )
    .await?;
    let workflows: Api<Workflow> = Api::namespaced(client, &cluster.namespace);
    let made = workflows.create(&PostParams::default(), &wf).await?;
    super::out(&format!("workflow.weft.dev/{} created", made.name_any()))?;
    Ok(ExitCode::SUCCESS)
}
