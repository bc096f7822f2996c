//! The admin API calls the console needs beyond executions: one node in
//! full (its child resource and Events), a pod's log as a stream, and the
//! loaded plugins. Each runs behind the same middleware chain as every
//! other call (the handlers in `service.rs` wrap these).

use std::pin::Pin;

use futures::{AsyncBufReadExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use tonic::Status;
use weft_dag::NodeSpec;
use weft_plugin::{Plugin, Registry};

use super::pb;
use super::view::{node_execution, phase_name};
use crate::api::Workflow;
use crate::metrics::Metrics;

/// The stream StreamNodeLogs answers with.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<pb::LogChunk, Status>> + Send>>;

/// Where a node is: its spec and its status (main DAG or exit handler).
fn find<'a>(
    wf: &'a Workflow,
    node: &str,
) -> Result<(&'a NodeSpec, Option<&'a weft_dag::NodeStatus>), Status> {
    let status = wf.status.as_ref();
    let spec = status
        .and_then(|s| s.resolved_spec.as_deref())
        .unwrap_or(&wf.spec.spec);
    if let Some(n) = spec.nodes.iter().find(|n| n.id == node) {
        return Ok((n, status.and_then(|s| s.nodes.get(node))));
    }
    if let Some(n) = spec.on_exit.iter().find(|n| n.id == node) {
        let exit = status.and_then(|s| s.on_exit.as_ref());
        return Ok((n, exit.and_then(|e| e.nodes.get(node))));
    }
    Err(Status::not_found(format!(
        "execution {}/{} has no node {node:?}",
        wf.namespace().unwrap_or_default(),
        wf.name_any()
    )))
}

/// GetNode: the node's record, its spec, its child resource as stored and
/// the Events about the child and about the node.
pub async fn node_details(
    client: &Client,
    wf: &Workflow,
    node: &str,
) -> Result<pb::NodeDetails, Status> {
    let (spec, st) = find(wf, node)?;
    let ns = wf.namespace().unwrap_or_default();
    let child = st.and_then(|s| s.resource.as_ref());
    let resource = match child {
        Some(r) => child_json(client, &ns, r).await,
        None => String::new(),
    };
    let mut events = Vec::new();
    if let Some(r) = child {
        events.extend(events_about(client, &ns, &r.name, |_| true).await?);
    }
    // The Workflow's own Events that name the node (retries, approvals).
    let word = format!("{node} ");
    let mentions = |e: &CoreEvent| {
        let m = e.message.as_deref().unwrap_or_default();
        m.contains(&word) || m.ends_with(node)
    };
    events.extend(events_about(client, &ns, &wf.name_any(), mentions).await?);
    events.sort_by(|a, b| a.last_time.cmp(&b.last_time));
    let items = st.map_or(Vec::new(), |s| {
        s.items
            .iter()
            .enumerate()
            .map(|(i, it)| pb::ItemExecution {
                index: i as u32,
                phase: phase_name(&it.phase),
                attempts: it.attempts,
                message: it.message.clone().unwrap_or_default(),
                outputs: it
                    .outputs
                    .as_ref()
                    .map(|o| serde_json::Value::Object(o.clone()).to_string())
                    .unwrap_or_default(),
            })
            .collect()
    });
    Ok(pb::NodeDetails {
        node: Some(node_execution(spec, st)),
        resource,
        events,
        items,
        spec: serde_json::to_string(spec).unwrap_or_default(),
    })
}

/// The child as JSON; empty when it is gone (deleted with its workflow's
/// TTL, say) or its kind is not served.
async fn child_json(client: &Client, ns: &str, r: &weft_dag::status::ResourceRef) -> String {
    // A web-API task's job lives in a remote service: what the host keeps
    // of it (plugin, idempotency key, meta) is what there is to show.
    if r.api_version == crate::controller::webapi::WEBAPI_API_VERSION {
        return serde_json::to_string(r).unwrap_or_default();
    }
    let (group, version) = match r.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &r.kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    match api.get_opt(&r.name).await {
        Ok(Some(obj)) => serde_json::to_string(&obj).unwrap_or_default(),
        Ok(None) | Err(_) => String::new(),
    }
}

/// Events whose involved object is `name`, kept by `keep`.
async fn events_about(
    client: &Client,
    ns: &str,
    name: &str,
    keep: impl Fn(&CoreEvent) -> bool,
) -> Result<Vec<pb::KubeEvent>, Status> {
    let api: Api<CoreEvent> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let list = api
        .list(&lp)
        .await
        .map_err(|e| Status::unavailable(format!("events of {ns}/{name}: {e}")))?;
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| t.0.to_string()).unwrap_or_default()
    };
    Ok(list
        .items
        .iter()
        .filter(|e| keep(e))
        .map(|e| pb::KubeEvent {
            r#type: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            first_time: time(e.first_timestamp.as_ref()),
            last_time: time(e.last_timestamp.as_ref().or(e.first_timestamp.as_ref())),
            count: e.count.unwrap_or(1).max(0) as u32,
            object: format!(
                "{}/{}",
                e.involved_object.kind.as_deref().unwrap_or_default(),
                e.involved_object.name.as_deref().unwrap_or_default()
            ),
        })
        .collect())
}

/// StreamNodeLogs: the node's pod log, line by line; followed while the
/// pod runs when asked.
pub async fn node_logs(
    client: &Client,
    wf: &Workflow,
    req: &pb::StreamNodeLogsRequest,
    store: Option<&crate::store::Store>,
) -> Result<LogStream, Status> {
    let (_, st) = find(wf, &req.node_id)?;
    let child = st.and_then(|s| s.resource.as_ref()).ok_or_else(|| {
        Status::failed_precondition(format!("node {} has no child resource yet", req.node_id))
    })?;
    if child.kind != "Pod" {
        return Err(Status::failed_precondition(format!(
            "node {}'s child is a {} ({}); only pods have logs here",
            req.node_id, child.kind, child.name
        )));
    }
    let ns = wf.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = LogParams {
        follow: req.follow,
        tail_lines: (req.tail_lines > 0).then_some(i64::from(req.tail_lines)),
        ..Default::default()
    };
    let name = child.name.clone();
    let lines = match pods.log_stream(&name, &lp).await {
        Ok(log) => log.lines(),
        // The pod is gone (pod GC, TTL): its archived copy, when kept.
        Err(kube::Error::Api(e)) if e.code == 404 && store.is_some() => {
            return archived(store.expect("checked"), wf, req, &name).await;
        }
        Err(e) => return Err(Status::unavailable(format!("log of pod {ns}/{name}: {e}"))),
    };
    let chunks = lines.map(move |l| match l {
        Ok(line) => Ok(pb::LogChunk {
            text: format!("{line}\n"),
        }),
        Err(e) => Err(Status::unavailable(format!("log of pod {name}: {e}"))),
    });
    Ok(Box::pin(chunks.into_stream()))
}

/// The key of a node's archived main container log, of its last attempt
/// (`archiveLogs`; `host/weft/src/pod_io.rs` writes it).
pub fn archived_log(wf: &Workflow, node: &str) -> Result<String, Status> {
    let (_, st) = find(wf, node)?;
    let st = st.ok_or_else(|| Status::not_found(format!("node {node} has not started")))?;
    let meta = &wf.metadata;
    Ok(crate::store::attempt_key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
        node,
        st.attempts.max(1) - 1,
        crate::pod_io::LOG_OBJECT,
    ))
}

/// A gone pod's log from the artifact repository, its last `tail_lines`
/// when asked; an error that says so when it was not archived.
async fn archived(
    store: &crate::store::Store,
    wf: &Workflow,
    req: &pb::StreamNodeLogsRequest,
    pod: &str,
) -> Result<LogStream, Status> {
    let key = archived_log(wf, &req.node_id)?;
    let bytes = store.get_bytes(&key).await.map_err(|e| match e {
        crate::store::StoreError::NotFound { .. } => Status::not_found(format!(
            "pod {pod} is gone and its log was not archived (archiveLogs): no {key} in the artifact repository"
        )),
        e => Status::unavailable(format!("archived log of pod {pod}: {e}")),
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let tail = match req.tail_lines as usize {
        0 => 0,
        n => lines.len().saturating_sub(n),
    };
    let chunks: Vec<Result<pb::LogChunk, Status>> = lines[tail..]
        .iter()
        .map(|l| {
            Ok(pb::LogChunk {
                text: format!("{l}\n"),
            })
        })
        .collect();
    Ok(Box::pin(futures::stream::iter(chunks)))
}

/// ListPlugins: the registry's plugins, their hot-load status (errors,
/// circuit breaker) from their ConfigMaps, and the call figures.
pub async fn plugins(
    client: &Client,
    registry: &Registry,
    metrics: &Metrics,
) -> pb::ListPluginsResponse {
    let snap = registry.snapshot();
    let loaded = crate::hotload::read_status(client, None)
        .await
        .unwrap_or_default();
    let status_of = |name: &str| {
        loaded
            .iter()
            .filter_map(|(_, _, s, _)| s.as_ref())
            .find(|s| s.plugin == name)
    };
    let plugins = snap
        .plugins()
        .iter()
        .map(|(name, p)| {
            let (kind, task_types, digest) = match p {
                Plugin::Task(t) => ("task", t.manifest().task_types.clone(), t.digest()),
                Plugin::Middleware(m) => ("middleware", Vec::new(), m.digest()),
                Plugin::WebApi(w) => ("webapi", w.manifest().task_types.clone(), w.digest()),
            };
            let hot = status_of(name);
            let (calls, traps, mean) = metrics.plugin_figures(name);
            let versions = snap
                .retained()
                .iter()
                .filter(|(_, r)| plugin_name(r) == name)
                .map(|(d, _)| pb::PluginVersion {
                    digest: d.to_string(),
                    current: false,
                })
                .collect();
            pb::PluginInfo {
                name: name.clone(),
                kind: kind.into(),
                task_types,
                digest: digest.to_string(),
                versions,
                error: hot.and_then(|h| h.error.clone()).unwrap_or_default(),
                breaker: hot
                    .and_then(|h| h.breaker.as_ref())
                    .map(|b| {
                        format!(
                            "tripped on {} ({} faults): {}",
                            b.tripped, b.faults, b.last_error
                        )
                    })
                    .unwrap_or_default(),
                calls,
                traps,
                mean_call_ms: mean * 1e3,
                pinning: match snap.pinning(name) {
                    weft_plugin::Pinning::Pinned => "pinned".into(),
                    weft_plugin::Pinning::Latest => "latest".into(),
                },
            }
        })
        .collect();
    pb::ListPluginsResponse { plugins }
}

fn plugin_name(p: &Plugin) -> &str {
    match p {
        Plugin::Task(t) => t.name(),
        Plugin::Middleware(m) => m.name(),
        Plugin::WebApi(w) => w.name(),
    }
}

/// ListLocks: the namespace's Lock objects, read from the API server
/// (the same truth the controller acts on).
pub async fn locks(client: &Client, namespace: &str) -> Result<pb::ListLocksResponse, Status> {
    if namespace.is_empty() {
        return Err(Status::invalid_argument(
            "ListLocks: namespace is required (locks belong to a namespace)",
        ));
    }
    let api: kube::Api<crate::sync::Lock> = kube::Api::namespaced(client.clone(), namespace);
    let mut items = api
        .list(&Default::default())
        .await
        .map_err(|e| Status::unavailable(format!("listing Locks in {namespace}: {e}")))?
        .items;
    items.sort_by_key(|l| l.metadata.name.clone());
    let claim = |c: &crate::sync::Claim| pb::LockClaim {
        workflow: c.workflow.clone(),
        node: c.node.clone().unwrap_or_default(),
        priority: c.priority,
        since: c.since.clone(),
        held_since: c.held_since.clone().unwrap_or_default(),
    };
    let locks = items
        .iter()
        .map(|l| pb::LockInfo {
            namespace: namespace.to_string(),
            lock: l
                .metadata
                .name
                .clone()
                .unwrap_or_default()
                .replacen('.', "/", 1),
            limit: l.spec.limit,
            holders: l.spec.holders.iter().map(claim).collect(),
            waiters: l.spec.waiters.iter().map(claim).collect(),
            beyond: l.spec.beyond,
        })
        .collect();
    Ok(pb::ListLocksResponse { locks })
}
