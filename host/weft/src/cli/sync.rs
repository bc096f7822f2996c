//! `weft sync list`: the namespace's locks (mutexes, semaphores, the
//! controller's parallelism limits), who holds each and who waits, in
//! order. Read from the `Lock` objects themselves (`crate::sync`), the
//! same truth the controller acts on, so it needs no controller.

use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Subcommand, ValueEnum};
use kube::{Api, ResourceExt};

use super::list::human_duration;
use super::table::table;
use crate::sync::{Claim, Lock};

/// `weft sync ...`.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Locks with their limit, holders and waiters (first in line first).
    List {
        /// Every namespace's locks.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// `wide` (a row per holder and waiter, with priority and since
        /// when) or `json` (the Lock objects' specs).
        #[arg(short, long, value_enum)]
        output: Option<Format>,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
}

/// Formats of `weft sync list`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// A row per holder and waiter.
    Wide,
    /// JSON.
    Json,
}

/// Runs `weft sync ...`.
pub fn run(cmd: SyncCommand) -> anyhow::Result<ExitCode> {
    let SyncCommand::List {
        all_namespaces,
        output,
        cluster,
    } = cmd;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = cluster.client().await?;
        let api: Api<Lock> = match all_namespaces {
            true => Api::all(client),
            false => Api::namespaced(client, &cluster.namespace),
        };
        let mut locks = api.list(&Default::default()).await?.items;
        locks.sort_by_key(|l| (l.namespace(), l.name_any()));
        let text = match output {
            Some(Format::Json) => json(&locks)?,
            Some(Format::Wide) => wide(&locks, SystemTime::now()),
            None => summary(&locks),
        };
        super::out(&text)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `mutex/db` from `mutex.db`.
fn display(l: &Lock) -> String {
    let name = l.name_any();
    match name.split_once('.') {
        Some((kind, rest)) => format!("{kind}/{rest}"),
        None => name,
    }
}

/// The first `most` of `claims`, then how many more (`beyond` included:
/// those the controller keeps out of a long line).
fn names(claims: &[Claim], most: usize, beyond: u32) -> String {
    let mut v: Vec<String> = claims.iter().take(most).map(Claim::who).collect();
    let more = claims.len().saturating_sub(most) + beyond as usize;
    if more > 0 {
        v.push(format!("+{more}"));
    }
    match v.is_empty() {
        true => "-".into(),
        false => v.join(","),
    }
}

/// One row per lock.
fn summary(locks: &[Lock]) -> String {
    let mut rows = vec![
        ["NAMESPACE", "LOCK", "HELD", "HOLDERS", "WAITING", "NEXT"]
            .map(String::from)
            .to_vec(),
    ];
    for l in locks {
        rows.push(vec![
            l.namespace().unwrap_or_default(),
            display(l),
            format!("{}/{}", l.spec.holders.len(), l.spec.limit),
            names(&l.spec.holders, 3, 0),
            (l.spec.waiters.len() + l.spec.beyond as usize).to_string(),
            names(&l.spec.waiters, 3, l.spec.beyond),
        ]);
    }
    table(&rows)
}

/// One row per holder and waiter, in order.
fn wide(locks: &[Lock], now: SystemTime) -> String {
    let mut rows = vec![
        [
            "NAMESPACE",
            "LOCK",
            "STATE",
            "WHO",
            "PRIORITY",
            "WAITING SINCE",
            "HELD FOR",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let ago = |t: Option<&str>| {
        t.and_then(|t| humantime::parse_rfc3339(t).ok())
            .and_then(|t| now.duration_since(t).ok())
            .map_or("-".to_string(), human_duration)
    };
    for l in locks {
        let states = l.spec.holders.iter().map(|c| ("holds", c));
        let queued = l.spec.waiters.iter().map(|c| ("waits", c));
        for (state, c) in states.chain(queued) {
            rows.push(vec![
                l.namespace().unwrap_or_default(),
                display(l),
                state.to_string(),
                c.who(),
                c.priority.to_string(),
                ago(Some(&c.since)),
                ago(c.held_since.as_deref()),
            ]);
        }
        if l.spec.beyond > 0 {
            let more = format!("+{} more (kept by the controller)", l.spec.beyond);
            let row = [
                l.namespace().unwrap_or_default(),
                display(l),
                "waits".into(),
                more,
            ];
            rows.push(
                row.into_iter()
                    .chain(["-".into(), "-".into(), "-".into()])
                    .collect(),
            );
        }
    }
    table(&rows)
}

fn json(locks: &[Lock]) -> anyhow::Result<String> {
    let v: Vec<serde_json::Value> = locks
        .iter()
        .map(|l| {
            serde_json::json!({
                "namespace": l.namespace(),
                "lock": display(l),
                "kind": l.spec.kind,
                "limit": l.spec.limit,
                "holders": l.spec.holders,
                "waiters": l.spec.waiters,
                "beyond": l.spec.beyond,
            })
        })
        .collect();
    Ok(serde_json::to_string_pretty(&v)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::LockSpec;

    fn claim(wf: &str, node: Option<&str>) -> Claim {
        Claim {
            workflow: wf.into(),
            uid: format!("u-{wf}"),
            node: node.map(String::from),
            since: "2026-11-29T06:00:00.000Z".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_lock_reads_as_its_holders_and_line() {
        let mut l = Lock::new(
            "semaphore.db",
            LockSpec {
                kind: "semaphore".into(),
                limit: 2,
                holders: vec![claim("a", Some("n1")), claim("b", None)],
                waiters: (0..5).map(|i| claim(&format!("w{i}"), None)).collect(),
                beyond: 0,
            },
        );
        l.metadata.namespace = Some("team".into());
        let text = summary(std::slice::from_ref(&l));
        assert!(
            text.contains("semaphore/db   2/2    a/n1,b    5         w0,w1,w2,+2"),
            "{text}"
        );
        let now = humantime::parse_rfc3339("2026-11-29T06:01:00Z").unwrap();
        let rows = wide(std::slice::from_ref(&l), now);
        assert_eq!(rows.lines().count(), 1 + 7, "{rows}");
        assert!(rows.contains("holds   a/n1"), "{rows}");
        assert!(rows.contains("60s"), "{rows}");
    }
}
