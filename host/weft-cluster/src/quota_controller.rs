//! kube-controller-manager's resource quota controller, for pods: keeps
//! each ResourceQuota's `status.hard` (its `spec.hard`) and `status.used`
//! current, so `kubectl get quota` shows usage and a client reading the
//! status (to decide whether to wait) sees what admission sees. Pod creates
//! recount in their own transaction (`api::quota`); this recounts a
//! namespace when one of its quotas' spec changes or a pod goes, finishes
//! or comes by another path, and every namespace with a quota now and then:
//! a pod stuck terminating stops counting once its grace period is over,
//! which no event announces.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::api::Cluster;
use crate::quota;
use crate::store::{EventKind, WatchEvent};

/// How often every quota is recounted regardless of events (the real
/// controller's `--resource-quota-sync-period` is 5 min; a dev cluster's
/// recount costs microseconds).
const RESYNC: Duration = Duration::from_secs(30);

/// Runs until shutdown.
pub(crate) async fn run(cx: Arc<Cluster>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = cx.store.subscribe();
    let mut resync = tokio::time::interval(RESYNC);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    loop {
        for ns in std::mem::take(&mut dirty) {
            if let Err(e) = cx.sync_quotas(&ns).await {
                tracing::warn!(namespace = %ns, "quota recount failed: {}", e.message);
            }
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    note(&ev, &mut dirty);
                    drain(&cx, &mut rx, &mut dirty);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => dirty = quota_namespaces(&cx),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = resync.tick() => dirty = quota_namespaces(&cx),
            _ = shutdown.changed() => return,
        }
    }
}

/// Notes the changes already queued, so a burst of pod writes costs one
/// recount per namespace rather than one per write.
fn drain(
    cx: &Cluster,
    rx: &mut broadcast::Receiver<Arc<WatchEvent>>,
    dirty: &mut BTreeSet<String>,
) {
    loop {
        match rx.try_recv() {
            Ok(ev) => note(&ev, dirty),
            Err(broadcast::error::TryRecvError::Lagged(_)) => dirty.extend(quota_namespaces(cx)),
            Err(_) => return,
        }
    }
}

/// Every namespace that has a quota.
fn quota_namespaces(cx: &Cluster) -> BTreeSet<String> {
    let (quotas, _) = cx.store.list(quota::GR, None);
    quotas
        .iter()
        .filter_map(|q| q["metadata"]["namespace"].as_str().map(String::from))
        .collect()
}

/// Marks the namespace of a change that can move a quota's status. A
/// quota's own status writes are not such a change (the real controller
/// ignores them too), so its writes do not wake it again.
fn note(ev: &WatchEvent, dirty: &mut BTreeSet<String>) {
    let prev = ev.prev.as_deref();
    let now = (ev.kind != EventKind::Deleted).then_some(&*ev.object);
    let moves = match ev.gr.as_str() {
        quota::GR => prev.zip(now).is_none_or(|(a, b)| a["spec"] != b["spec"]),
        "/pods" => quota::usage_changed(prev, now),
        _ => false,
    };
    if moves {
        dirty.insert(ev.namespace.clone());
    }
}
