//! Events expire, as kube-apiserver's `--event-ttl` (default one hour)
//! makes them expire through etcd leases: an Event last written longer
//! ago than the TTL is deleted. Without it a dev cluster kept every Event
//! it was ever sent, in memory, in its database and in every garbage
//! collector scan (1,000 one-node workflows leave 2,000).
//!
//! An etcd lease restarts on every write; here the last write is read
//! from the object: the latest of its creation, `lastTimestamp`,
//! `eventTime`, `series.lastObservedTime` and its managed fields' times.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::watch;

use crate::api::{Cluster, DeleteOpts};
use crate::registry::ResourceType;

/// Both Event APIs (stored apart here, shared in a real server).
const EVENTS: [&str; 2] = ["/events", "events.k8s.io/events"];

/// Deletes expired Events every quarter of `ttl` (1 s to 60 s) until
/// shutdown.
pub(crate) async fn run(cx: Arc<Cluster>, ttl: Duration, mut shutdown: watch::Receiver<bool>) {
    let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        match expire(&cx, ttl, SystemTime::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(events = n, "expired events deleted"),
            Err(e) => tracing::warn!("expiring events failed: {e}"),
        }
    }
}

/// Deletes the Events last written before `now - ttl`; how many.
async fn expire(cx: &Cluster, ttl: Duration, now: SystemTime) -> crate::Result<usize> {
    let Some(cutoff) = now.checked_sub(ttl) else {
        return Ok(0);
    };
    let mut deleted = 0;
    for gr in EVENTS {
        let Some(rt) = cx.registry.by_gr(gr) else {
            continue;
        };
        let (events, _) = cx.store.list(gr, None);
        let expired: Vec<&Arc<Value>> = events
            .iter()
            .filter(|e| last_written(e).is_some_and(|t| t < cutoff))
            .collect();
        // One transaction per thousand: each is one database commit.
        for chunk in expired.chunks(1_000) {
            let (n, commit) = delete(cx, &rt, chunk);
            commit.await?;
            deleted += n;
        }
    }
    Ok(deleted)
}

/// Deletes `events` in one transaction: how many, and its commit (the
/// transaction's guard is not held across an await).
fn delete(
    cx: &Cluster,
    rt: &ResourceType,
    events: &[&Arc<Value>],
) -> (
    usize,
    impl std::future::Future<Output = crate::Result<()>> + use<>,
) {
    let mut txn = cx.store.begin();
    let mut n = 0;
    for e in events {
        let m = &e["metadata"];
        let (Some(ns), Some(name)) = (m["namespace"].as_str(), m["name"].as_str()) else {
            continue;
        };
        if cx
            .delete_in(&mut txn, rt, ns, name, &DeleteOpts::default())
            .is_ok()
        {
            n += 1;
        }
    }
    (n, txn.commit())
}

/// When `event` was last written, as far as the object says.
fn last_written(event: &Value) -> Option<SystemTime> {
    let fields = [
        &event["metadata"]["creationTimestamp"],
        &event["lastTimestamp"],
        &event["eventTime"],
        &event["series"]["lastObservedTime"],
        &event["deprecatedLastTimestamp"],
    ];
    let managed = event["metadata"]["managedFields"].as_array();
    let managed = managed.into_iter().flatten().map(|f| &f["time"]);
    fields
        .into_iter()
        .chain(managed)
        .filter_map(Value::as_str)
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .map(SystemTime::from)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_write_is_the_latest_time_the_event_carries() {
        let e = serde_json::json!({
            "metadata": {"creationTimestamp": "2026-11-30T01:00:00Z",
                "managedFields": [{"time": "2026-11-30T01:30:00Z"}]},
            "lastTimestamp": "2026-11-30T02:00:00Z",
            "series": {"lastObservedTime": "2026-11-30T02:30:00.123456Z"},
            "eventTime": null,
        });
        let t: jiff::Timestamp = "2026-11-30T02:30:00.123456Z".parse().unwrap();
        assert_eq!(last_written(&e), Some(SystemTime::from(t)));
        assert_eq!(last_written(&serde_json::json!({"metadata": {}})), None);
    }
}
