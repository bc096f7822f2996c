//! The controllers that finish what a delete starts: the garbage collector
//! (owner references: background and foreground cascading, orphaning), the
//! namespace controller (a terminating namespace empties, then goes), and
//! CRD cleanup (a CRD's custom resources go before it does).
//!
//! Each pass scans every object; this is a dev cluster, and a scan of tens of
//! thousands of objects in memory takes milliseconds. It runs when a write
//! may have given it work (`Cluster::concerns_gc`: a deletion, or owner
//! references naming an owner that is not there), and every 5 s: woken by
//! every write of an owned object, it scanned after each pod status update
//! and held a third of a busy benchmark's CPU.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::api::{CRD_FINALIZER, Cluster, DeleteOpts, FOREGROUND, ORPHAN};
use crate::registry::ResourceType;

/// Runs until shutdown, sweeping after each notification.
pub(crate) async fn run(cx: Arc<Cluster>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = cx.gc.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = shutdown.changed() => return,
        }
        // Let a burst of deletions land before scanning.
        tokio::time::sleep(Duration::from_millis(10)).await;
        for _ in 0..100 {
            match sweep(&cx).await {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!("garbage collection pass failed: {e}");
                    break;
                }
            }
        }
    }
}

struct Obj {
    gr: String,
    v: Arc<Value>,
}

impl Obj {
    fn uid(&self) -> &str {
        self.v["metadata"]["uid"].as_str().unwrap_or("")
    }
    fn ns(&self) -> &str {
        self.v["metadata"]["namespace"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.v["metadata"]["name"].as_str().unwrap_or("")
    }
    fn deleting(&self) -> bool {
        self.v["metadata"]["deletionTimestamp"].is_string()
    }
    fn has_finalizer(&self, f: &str) -> bool {
        self.v["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == f))
    }
    fn owner_uids(&self) -> Vec<String> {
        self.v["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["uid"].as_str().map(String::from))
            .collect()
    }
}

enum Action {
    Delete(String, String, String),
    /// Rewrite metadata: drop these owner uids, drop this finalizer, or drop
    /// the namespace's spec finalizer.
    Edit {
        gr: String,
        ns: String,
        name: String,
        drop_owners: Vec<String>,
        drop_finalizer: Option<String>,
        ns_spec_finalizer: bool,
    },
}

/// One pass; true when it changed something (another pass may find more).
async fn sweep(cx: &Cluster) -> crate::Result<bool> {
    let objs: Vec<Obj> = cx
        .store
        .snapshot()
        .into_iter()
        .map(|(gr, v)| Obj { gr, v })
        .collect();
    let by_uid: HashMap<&str, &Obj> = objs.iter().map(|o| (o.uid(), o)).collect();
    let mut dependents: HashMap<&str, Vec<&Obj>> = HashMap::new();
    for o in &objs {
        for u in o.owner_uids() {
            if let Some(owner) = by_uid.get(u.as_str()) {
                dependents.entry(owner.uid()).or_default().push(o);
            }
        }
    }
    let mut actions = Vec::new();
    let edit = |o: &Obj| Action::Edit {
        gr: o.gr.clone(),
        ns: o.ns().to_string(),
        name: o.name().to_string(),
        drop_owners: Vec::new(),
        drop_finalizer: None,
        ns_spec_finalizer: false,
    };
    for o in &objs {
        // Dependents of owners that are gone, or leaving.
        let owners = o.owner_uids();
        if !owners.is_empty() {
            let live: Vec<&&Obj> = owners
                .iter()
                .filter_map(|u| by_uid.get(u.as_str()))
                .collect();
            if live.is_empty() {
                if !o.deleting() {
                    actions.push(Action::Delete(o.gr.clone(), o.ns().into(), o.name().into()));
                }
            } else {
                let mut drop: Vec<String> = owners
                    .iter()
                    .filter(|u| !by_uid.contains_key(u.as_str()))
                    .cloned()
                    .collect();
                for owner in &live {
                    if owner.deleting() && owner.has_finalizer(ORPHAN) {
                        drop.push(owner.uid().to_string());
                    }
                }
                let foreground = live
                    .iter()
                    .all(|ow| ow.deleting() && ow.has_finalizer(FOREGROUND));
                if foreground && !o.deleting() {
                    actions.push(Action::Delete(o.gr.clone(), o.ns().into(), o.name().into()));
                } else if !drop.is_empty() {
                    let mut a = edit(o);
                    if let Action::Edit { drop_owners, .. } = &mut a {
                        *drop_owners = drop;
                    }
                    actions.push(a);
                }
            }
        }
        if !o.deleting() {
            continue;
        }
        let deps = dependents.get(o.uid()).map(Vec::len).unwrap_or(0);
        for f in [FOREGROUND, ORPHAN] {
            if o.has_finalizer(f) && deps == 0 {
                let mut a = edit(o);
                if let Action::Edit { drop_finalizer, .. } = &mut a {
                    *drop_finalizer = Some(f.to_string());
                }
                actions.push(a);
            }
        }
        if o.gr == "apiextensions.k8s.io/customresourcedefinitions"
            && o.has_finalizer(CRD_FINALIZER)
        {
            let group = o.v["spec"]["group"].as_str().unwrap_or("");
            let plural = o.v["spec"]["names"]["plural"].as_str().unwrap_or("");
            let gr = format!("{group}/{plural}");
            let instances: Vec<&Obj> = objs.iter().filter(|x| x.gr == gr).collect();
            if instances.is_empty() {
                let mut a = edit(o);
                if let Action::Edit { drop_finalizer, .. } = &mut a {
                    *drop_finalizer = Some(CRD_FINALIZER.to_string());
                }
                actions.push(a);
            } else {
                for i in instances.into_iter().filter(|i| !i.deleting()) {
                    actions.push(Action::Delete(i.gr.clone(), i.ns().into(), i.name().into()));
                }
            }
        }
        if o.gr == "/namespaces" {
            let ns = o.name();
            let contents: Vec<&Obj> = objs
                .iter()
                .filter(|x| x.ns() == ns && !x.ns().is_empty())
                .collect();
            if contents.is_empty() {
                if o.v["spec"]["finalizers"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                {
                    let mut a = edit(o);
                    if let Action::Edit {
                        ns_spec_finalizer, ..
                    } = &mut a
                    {
                        *ns_spec_finalizer = true;
                    }
                    actions.push(a);
                }
            } else {
                for c in contents.into_iter().filter(|c| !c.deleting()) {
                    actions.push(Action::Delete(c.gr.clone(), c.ns().into(), c.name().into()));
                }
            }
        }
    }
    if actions.is_empty() {
        return Ok(false);
    }
    let mut changed = false;
    let mut seen = HashSet::new();
    for a in actions {
        changed |= apply(cx, a, &mut seen).await?;
    }
    Ok(changed)
}

async fn apply(
    cx: &Cluster,
    a: Action,
    seen: &mut HashSet<(String, String, String)>,
) -> crate::Result<bool> {
    let (changed, fut) = apply_in(cx, a, seen);
    if let Some(fut) = fut {
        fut.await?;
    }
    Ok(changed)
}

type Commit = std::pin::Pin<Box<dyn std::future::Future<Output = crate::Result<()>> + Send>>;

fn apply_in(
    cx: &Cluster,
    a: Action,
    seen: &mut HashSet<(String, String, String)>,
) -> (bool, Option<Commit>) {
    let resolve = |gr: &str| -> Option<Arc<ResourceType>> { cx.registry.by_gr(gr) };
    let mut txn = cx.store.begin();
    match a {
        Action::Delete(gr, ns, name) => {
            if !seen.insert((gr.clone(), ns.clone(), name.clone())) {
                return (false, None);
            }
            let Some(rt) = resolve(&gr) else {
                // A custom resource whose type is gone: drop it directly.
                txn.delete(&gr, &ns, &name);
                return (true, Some(Box::pin(txn.commit())));
            };
            let opts = DeleteOpts {
                propagation: Some("Background".into()),
                ..Default::default()
            };
            let ok = cx.delete_in(&mut txn, &rt, &ns, &name, &opts).is_ok();
            (ok, Some(Box::pin(txn.commit())))
        }
        Action::Edit {
            gr,
            ns,
            name,
            drop_owners,
            drop_finalizer,
            ns_spec_finalizer,
        } => {
            let Some(rt) = resolve(&gr) else {
                return (false, None);
            };
            let key_ns = if rt.namespaced { ns.as_str() } else { "" };
            let Some(old) = txn.get(&gr, key_ns, &name) else {
                return (false, None);
            };
            let mut new = (*old).clone();
            let meta = &mut new["metadata"];
            if !drop_owners.is_empty()
                && let Some(refs) = meta["ownerReferences"].as_array_mut()
            {
                refs.retain(|r| !drop_owners.iter().any(|u| r["uid"] == json!(u)));
                if refs.is_empty() {
                    meta.as_object_mut().map(|m| m.remove("ownerReferences"));
                }
            }
            if let Some(f) = &drop_finalizer
                && let Some(fs) = meta["finalizers"].as_array_mut()
            {
                fs.retain(|x| x != f.as_str());
                if fs.is_empty() {
                    meta.as_object_mut().map(|m| m.remove("finalizers"));
                }
            }
            if ns_spec_finalizer {
                new["spec"]["finalizers"] = json!([]);
                // Namespace spec is not writable through the main resource;
                // the namespace controller finalizes directly.
                if new["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(|a| a.is_empty())
                {
                    cx.finish_delete(&mut txn, &rt, &ns, &name);
                    return (true, Some(Box::pin(txn.commit())));
                }
            }
            let ok = cx.system_replace(&mut txn, &rt, &old, new, false).is_ok();
            (ok, Some(Box::pin(txn.commit())))
        }
    }
}
