//! `weft list`: the Workflows of a namespace (or all), newest first, as
//! `argo list` shows them.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Args;
use kube::{Api, ResourceExt, api::ListParams};
use weft_dag::status::parse_timestamp;

pub(crate) use super::table::table;
use crate::api::Workflow;

/// Arguments of `weft list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Where to connect, and the namespace.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
    /// Every namespace (adds a NAMESPACE column).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only Workflows with these labels (`key=value,key2!=v`, as kubectl).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Only Workflows not finished yet (Pending or Running).
    #[arg(long, conflicts_with = "completed")]
    pub running: bool,
    /// Only finished Workflows (Succeeded, Failed or Aborted).
    #[arg(long)]
    pub completed: bool,
    /// Archived executions too, from the execution history through the
    /// admin API (`--admin`), with its filters (as `weft archive list`).
    #[arg(long)]
    pub archived: bool,
    /// The history's filters (with `--archived`).
    #[command(flatten)]
    pub filters: super::archive::Filters,
    /// Where the admin API is (with `--archived`).
    #[command(flatten)]
    pub admin: super::cp::AdminClientArgs,
}

/// Run `weft list`.
pub fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        if args.archived {
            let ns = (!args.all_namespaces).then_some(args.cluster.namespace.as_str());
            let mut filters = args.filters.clone();
            if filters.phase.is_none() && args.completed {
                anyhow::bail!("--completed with --archived: give --phase Succeeded|Failed|Aborted");
            }
            if args.running {
                filters.phase.get_or_insert_with(|| "Running".into());
            }
            let req = super::archive::request(ns, args.selector.as_deref(), &filters);
            return super::archive::list(&args.admin, req, args.all_namespaces).await;
        }
        let client = args.cluster.client().await?;
        let api: Api<Workflow> = match args.all_namespaces {
            true => Api::all(client),
            false => Api::namespaced(client, &args.cluster.namespace),
        };
        let mut params = ListParams::default();
        if let Some(s) = &args.selector {
            params = params.labels(s);
        }
        let mut workflows: Vec<Workflow> = api.list(&params).await?.items;
        workflows.retain(|wf| {
            let done = wf.status.as_ref().is_some_and(|s| s.phase.is_terminal());
            match (args.running, args.completed) {
                (true, _) => !done,
                (_, true) => done,
                _ => true,
            }
        });
        if workflows.is_empty() {
            match args.all_namespaces {
                true => eprintln!("No workflows found."),
                false => eprintln!(
                    "No workflows found in namespace {}.",
                    args.cluster.namespace
                ),
            }
            return Ok(ExitCode::SUCCESS);
        }
        super::out(&render(workflows, args.all_namespaces, SystemTime::now()))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The table, newest first (then by namespace and name).
fn render(mut workflows: Vec<Workflow>, namespaces: bool, now: SystemTime) -> String {
    workflows.sort_by(|a, b| {
        created(b)
            .cmp(&created(a))
            .then_with(|| a.namespace().cmp(&b.namespace()))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    let mut rows = vec![
        [
            "NAMESPACE",
            "NAME",
            "PHASE",
            "PROGRESS",
            "AGE",
            "DURATION",
            "MESSAGE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for wf in &workflows {
        let status = wf.status.clone().unwrap_or_default();
        let started = parse_timestamp(status.started_at.as_deref());
        let finished = parse_timestamp(status.finished_at.as_deref());
        let duration = started.map(|s| {
            let end = match status.phase.is_terminal() {
                true => finished.unwrap_or(now),
                false => now,
            };
            human_duration(end.duration_since(s).unwrap_or_default())
        });
        let age = created(wf).map(|c| human_duration(now.duration_since(c).unwrap_or_default()));
        rows.push(vec![
            wf.namespace().unwrap_or_default(),
            wf.name_any(),
            format!("{:?}", status.phase),
            status.progress.unwrap_or_else(|| "-".into()),
            age.unwrap_or_else(|| "-".into()),
            duration.unwrap_or_else(|| "-".into()),
            message(status.message.as_deref()),
        ]);
    }
    if !namespaces {
        for row in &mut rows {
            row.remove(0);
        }
    }
    table(&rows)
}

/// A status message on one line, at most 80 characters (as `argo list`'s
/// MESSAGE: why a workflow waits or failed).
fn message(m: Option<&str>) -> String {
    let line = m.unwrap_or_default().lines().next().unwrap_or_default();
    match line.chars().count() > 80 {
        true => line.chars().take(79).chain(['…']).collect(),
        false => line.to_string(),
    }
}

/// When the object was created.
pub(crate) fn created(obj: &impl ResourceExt) -> Option<SystemTime> {
    obj.creation_timestamp().map(|t| SystemTime::from(t.0))
}

/// A duration as kubectl prints ages (`HumanDuration`): exact to the
/// second under two minutes, then ever coarser (`3m2s`, `12m`, `2h5m`,
/// `2h`, `3d4h`, `2y`).
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

#[cfg(test)]
mod tests;
