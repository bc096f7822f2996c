//! The AdminService handlers: Workflow resources through kube-rs, each call
//! behind the middleware chain and the namespace authorization.

use std::collections::{BTreeMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use serde::Deserialize;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use weft_dag::{NodePhase, NodeSpec, WorkflowSpec};

use super::chain::{Caller, Chain};
use super::console;
use super::pb;
use crate::actions::{Action, ActionError, act};
use crate::api::{Workflow, WorkflowResourceSpec};
use crate::events::record_event;
use crate::metrics::Metrics;

/// The annotation naming the principal that created a Workflow through the API.
pub const CREATED_BY: &str = "weft.dev/created-by";

/// Which namespaces each principal may act on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    /// Principal → namespaces; `"*"` is every namespace. A call with no
    /// principal is checked as `anonymous`.
    pub principals: BTreeMap<String, Vec<String>>,
}

impl Authorization {
    /// Whether `caller` may act on `namespace` (`None`: every namespace, as
    /// a cluster-wide list asks).
    fn check(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        let who = caller.principal.as_deref().unwrap_or("anonymous");
        let Some(allowed) = self.principals.get(who) else {
            return Err(match &caller.principal {
                None => Status::unauthenticated(
                    "the admin API requires a principal; send credentials an authentication middleware accepts",
                ),
                Some(p) => {
                    Status::permission_denied(format!("principal {p} may not act on any namespace"))
                }
            });
        };
        let ok = allowed
            .iter()
            .any(|a| a == "*" || Some(a.as_str()) == namespace);
        if ok {
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "principal {who} may not act on {} (allowed: {})",
            namespace.map_or("every namespace".to_string(), |n| format!("namespace {n}")),
            allowed.join(", ")
        )))
    }
}

/// The admin service.
pub struct AdminService {
    client: Client,
    registry: Arc<weft_plugin::Registry>,
    chain: Chain,
    authorization: Option<Authorization>,
    metrics: Arc<Metrics>,
}

impl AdminService {
    /// A service over `client`, validating specs against `registry`'s task types.
    pub fn new(
        client: Client,
        registry: Arc<weft_plugin::Registry>,
        chain: Chain,
        authorization: Option<Authorization>,
        metrics: Arc<Metrics>,
    ) -> Self {
        AdminService {
            client,
            registry,
            chain,
            authorization,
            metrics,
        }
    }

    fn authorize(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        match &self.authorization {
            Some(a) => a.check(caller, namespace),
            None => Ok(()),
        }
    }

    /// Resolves an id, authorizes it and reads the Workflow.
    async fn fetch(
        &self,
        caller: &Caller,
        id: Option<pb::ExecutionId>,
    ) -> Result<(Api<Workflow>, Workflow), Status> {
        let id = id.ok_or_else(|| Status::invalid_argument("id: required"))?;
        if id.namespace.is_empty() || id.name.is_empty() {
            return Err(Status::invalid_argument(
                "id: namespace and name are required",
            ));
        }
        self.authorize(caller, Some(&id.namespace))?;
        let api: Api<Workflow> = Api::namespaced(self.client.clone(), &id.namespace);
        let wf = api
            .get(&id.name)
            .await
            .map_err(|e| kube_status(e, &format!("execution {}/{}", id.namespace, id.name)))?;
        Ok((api, wf))
    }

    async fn create(
        &self,
        caller: Caller,
        mut req: pb::CreateExecutionRequest,
    ) -> Result<pb::Execution, Status> {
        let (spec, meta) = parse_spec(&req.spec)?;
        if let Some(meta) = meta {
            fill_from_manifest(&mut req, meta);
        }
        if req.namespace.is_empty() {
            return Err(Status::invalid_argument("namespace: required"));
        }
        self.authorize(&caller, Some(&req.namespace))?;
        let name = match (req.name.is_empty(), req.generate_name.is_empty()) {
            (false, true) => Some(req.name.clone()),
            (true, false) => None,
            _ => {
                return Err(Status::invalid_argument(
                    "exactly one of name and generate_name is required",
                ));
            }
        };
        let snapshot = self.registry.snapshot();
        let known: HashSet<&str> = snapshot.task_types().collect();
        // A launch of a template is checked as the controller will run it:
        // the template's spec with these inputs bound (flyteadmin's
        // CreateExecution of a launch plan).
        let mut probe = Workflow::new("", WorkflowResourceSpec { spec: spec.clone() });
        probe.metadata.namespace = Some(req.namespace.clone());
        let runnable = crate::templates::spec_to_run(&self.client, &probe)
            .await
            .map_err(|why| Status::invalid_argument(format!("invalid workflow spec:\n{why}")))?;
        weft_dag::compile(&runnable, &|t| known.contains(t)).map_err(|problems| {
            Status::invalid_argument(format!(
                "invalid workflow spec:\n{}",
                weft_dag::compile::describe(&problems)
            ))
        })?;
        let mut wf = Workflow::new(
            name.as_deref().unwrap_or_default(),
            WorkflowResourceSpec { spec },
        );
        if name.is_none() {
            wf.metadata.name = None;
            wf.metadata.generate_name = Some(req.generate_name.clone());
        }
        wf.metadata.labels = Some(req.labels.into_iter().collect());
        if let Some(p) = &caller.principal {
            wf.annotations_mut().insert(CREATED_BY.into(), p.clone());
        }
        let api: Api<Workflow> = Api::namespaced(self.client.clone(), &req.namespace);
        let created = api.create(&PostParams::default(), &wf).await.map_err(|e| {
            let what = name.unwrap_or_else(|| format!("{}*", req.generate_name));
            kube_status(e, &format!("execution {}/{what}", req.namespace))
        })?;
        self.metrics.api_write("workflow");
        tracing::info!(
            namespace = req.namespace,
            name = created.name_any(),
            principal = caller.principal,
            request_id = caller.request_id,
            "execution created"
        );
        Ok(execution(&created))
    }

    async fn list(
        &self,
        caller: Caller,
        req: pb::ListExecutionsRequest,
    ) -> Result<pb::ListExecutionsResponse, Status> {
        let ns = (!req.namespace.is_empty()).then_some(req.namespace.as_str());
        self.authorize(&caller, ns)?;
        let api: Api<Workflow> = match ns {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut lp = ListParams::default().limit(match req.limit {
            0 => 100,
            n => n.min(500),
        });
        if !req.label_selector.is_empty() {
            lp = lp.labels(&req.label_selector);
        }
        if !req.page_token.is_empty() {
            lp = lp.continue_token(&req.page_token);
        }
        let list = api
            .list(&lp)
            .await
            .map_err(|e| kube_status(e, "executions"))?;
        Ok(pb::ListExecutionsResponse {
            executions: list.items.iter().map(execution).collect(),
            next_page_token: list.metadata.continue_.unwrap_or_default(),
        })
    }

    async fn abort(
        &self,
        caller: Caller,
        req: pb::AbortExecutionRequest,
    ) -> Result<pb::Execution, Status> {
        let (api, wf) = self.fetch(&caller, req.id).await?;
        let phase = wf.status.as_ref().map(|s| s.phase);
        if let Some(p) = phase.filter(|p| p.is_terminal()) {
            return Err(Status::failed_precondition(format!(
                "execution {}/{} already ended ({p:?})",
                wf.namespace().unwrap_or_default(),
                wf.name_any()
            )));
        }
        let patch = serde_json::json!({"spec": {"abort": true}});
        let wf = api
            .patch(
                &wf.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| kube_status(e, &format!("execution {}", wf.name_any())))?;
        self.metrics.api_write("workflow");
        let reason = if req.reason.is_empty() {
            "no reason given".to_string()
        } else {
            req.reason
        };
        let by = caller.principal.as_deref().unwrap_or("anonymous");
        record_event(
            &self.client,
            &self.metrics,
            &wf,
            "Normal",
            "AbortRequested",
            &format!("abort requested by {by} through the admin API: {reason}"),
        )
        .await;
        Ok(execution(&wf))
    }

    /// An action, as the CLI does it ([`crate::actions::act`]), for an
    /// authorized caller.
    async fn action(
        &self,
        caller: Caller,
        id: Option<pb::ExecutionId>,
        action: Action,
    ) -> Result<pb::Execution, Status> {
        let id = id.ok_or_else(|| Status::invalid_argument("id: required"))?;
        if id.namespace.is_empty() || id.name.is_empty() {
            return Err(Status::invalid_argument(
                "id: namespace and name are required",
            ));
        }
        self.authorize(&caller, Some(&id.namespace))?;
        let by = format!(
            "{} through the admin API",
            caller.principal.as_deref().unwrap_or("anonymous")
        );
        let done = act(
            &self.client,
            &self.metrics,
            &id.namespace,
            &id.name,
            &action,
            &by,
        )
        .await
        .map_err(|e| match e {
            ActionError::NotFound(m) => Status::not_found(m),
            ActionError::Precondition(m) => Status::failed_precondition(m),
            ActionError::Kube(e) => {
                kube_status(e, &format!("execution {}/{}", id.namespace, id.name))
            }
        })?;
        Ok(execution(&done.workflow))
    }

    async fn watch(
        &self,
        caller: Caller,
        req: pb::WatchExecutionRequest,
    ) -> Result<WatchStream, Status> {
        let (api, wf) = self.fetch(&caller, req.id).await?;
        let name = wf.name_any();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut last: Option<String> = None;
            let events = watcher::watch_object(api, &name);
            futures::pin_mut!(events);
            loop {
                let event = tokio::select! {
                    _ = tx.closed() => return,
                    e = events.next() => e,
                };
                let item = match event {
                    Some(Ok(Some(wf))) => {
                        let ex = execution(&wf);
                        let key = fingerprint(&ex);
                        if last.as_ref() == Some(&key) {
                            continue;
                        }
                        last = Some(key);
                        Ok(ex)
                    }
                    Some(Ok(None)) => {
                        Err(Status::not_found(format!("execution {name} was deleted")))
                    }
                    Some(Err(e)) => {
                        tracing::debug!("watching execution {name}: {e}");
                        continue;
                    }
                    None => return,
                };
                let end = item.as_ref().map_or(true, |ex| terminal_phase(&ex.phase));
                if tx.send(item).await.is_err() || end {
                    return;
                }
            }
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }
}

/// The stream WatchExecution answers with.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::Execution, Status>> + Send>>;

/// The full method path middleware see, e.g. `/weft.admin.v1.AdminService/GetExecution`.
macro_rules! method {
    ($name:literal) => {
        concat!("/weft.admin.v1.AdminService/", $name)
    };
}

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for AdminService {
    async fn create_execution(
        &self,
        request: Request<pb::CreateExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("CreateExecution"), request, |c, r| {
                self.create(c, r)
            })
            .await
    }

    async fn get_execution(
        &self,
        request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("GetExecution"), request, |c, r| async move {
                let (_, wf) = self.fetch(&c, r.id).await?;
                Ok(execution(&wf))
            })
            .await
    }

    async fn list_executions(
        &self,
        request: Request<pb::ListExecutionsRequest>,
    ) -> Result<Response<pb::ListExecutionsResponse>, Status> {
        self.chain
            .call(method!("ListExecutions"), request, |c, r| self.list(c, r))
            .await
    }

    async fn abort_execution(
        &self,
        request: Request<pb::AbortExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(method!("AbortExecution"), request, |c, r| self.abort(c, r))
            .await
    }

    type WatchExecutionStream = WatchStream;

    async fn watch_execution(
        &self,
        request: Request<pb::WatchExecutionRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        self.chain
            .call(method!("WatchExecution"), request, |c, r| self.watch(c, r))
            .await
    }

    async fn approve_gate(
        &self,
        request: Request<pb::ApproveGateRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ApproveGate"),
                request,
                |c, r: pb::ApproveGateRequest| {
                    self.action(c, r.id, Action::Approve { node: r.node_id })
                },
            )
            .await
    }

    async fn reject_gate(
        &self,
        request: Request<pb::RejectGateRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("RejectGate"),
                request,
                |c, r: pb::RejectGateRequest| {
                    let reject = Action::Reject {
                        node: r.node_id,
                        reason: r.reason,
                    };
                    self.action(c, r.id, reject)
                },
            )
            .await
    }

    async fn get_node(
        &self,
        request: Request<pb::GetNodeRequest>,
    ) -> Result<Response<pb::NodeDetails>, Status> {
        self.chain
            .call(
                method!("GetNode"),
                request,
                |c, r: pb::GetNodeRequest| async move {
                    let (_, wf) = self.fetch(&c, r.id).await?;
                    console::node_details(&self.client, &wf, &r.node_id).await
                },
            )
            .await
    }

    type StreamNodeLogsStream = console::LogStream;

    async fn stream_node_logs(
        &self,
        request: Request<pb::StreamNodeLogsRequest>,
    ) -> Result<Response<console::LogStream>, Status> {
        self.chain
            .call(
                method!("StreamNodeLogs"),
                request,
                |c, r: pb::StreamNodeLogsRequest| async move {
                    let (_, wf) = self.fetch(&c, r.id.clone()).await?;
                    console::node_logs(&self.client, &wf, &r).await
                },
            )
            .await
    }

    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<pb::ListPluginsResponse>, Status> {
        self.chain
            .call(method!("ListPlugins"), request, |c, _r| async move {
                self.authorize(&c, None)?;
                Ok(console::plugins(&self.client, &self.registry, &self.metrics).await)
            })
            .await
    }

    async fn retry_execution(
        &self,
        request: Request<pb::RetryExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("RetryExecution"),
                request,
                |c, r: pb::RetryExecutionRequest| {
                    let node = Some(r.node_id).filter(|n| !n.is_empty());
                    self.action(c, r.id, Action::Retry { node })
                },
            )
            .await
    }

    async fn resubmit_execution(
        &self,
        request: Request<pb::ResubmitExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ResubmitExecution"),
                request,
                |c, r: pb::ResubmitExecutionRequest| {
                    self.action(
                        c,
                        r.id,
                        Action::Resubmit {
                            memoized: r.memoized,
                        },
                    )
                },
            )
            .await
    }

    async fn suspend_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("SuspendExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Suspend),
            )
            .await
    }

    async fn resume_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("ResumeExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Resume),
            )
            .await
    }

    async fn stop_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("StopExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Stop),
            )
            .await
    }

    async fn terminate_execution(
        &self,
        request: Request<pb::ExecutionActionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.chain
            .call(
                method!("TerminateExecution"),
                request,
                |c, r: pb::ExecutionActionRequest| self.action(c, r.id, Action::Terminate),
            )
            .await
    }
}

/// A spec from JSON or YAML text (YAML is a superset of JSON): a bare
/// spec, or a whole Workflow manifest (then also its metadata).
fn parse_spec(text: &str) -> Result<(WorkflowSpec, Option<kube::api::ObjectMeta>), Status> {
    if text.trim().is_empty() {
        return Err(Status::invalid_argument(
            "spec: required (a Workflow spec or manifest as JSON or YAML)",
        ));
    }
    let bad = |e: String| Status::invalid_argument(format!("spec: {e}"));
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let is_manifest = value.get("apiVersion").is_some() || value.get("kind").is_some();
    if !is_manifest {
        return serde_yaml::from_value(value)
            .map(|s| (s, None))
            .map_err(|e| bad(e.to_string()));
    }
    let (api_version, kind) = (value.get("apiVersion"), value.get("kind"));
    let (api_version, kind) = (
        api_version.and_then(|v| v.as_str()).unwrap_or_default(),
        kind.and_then(|v| v.as_str()).unwrap_or_default(),
    );
    if api_version != "weft.dev/v1alpha1" || kind != "Workflow" {
        return Err(bad(format!(
            "a manifest of apiVersion {api_version:?} kind {kind:?}; expected apiVersion weft.dev/v1alpha1, kind Workflow"
        )));
    }
    let wf: Workflow =
        serde_yaml::from_value(value).map_err(|e| bad(format!("the manifest: {e}")))?;
    Ok((wf.spec.spec, Some(wf.metadata)))
}

/// What the request leaves empty comes from the manifest's metadata.
fn fill_from_manifest(req: &mut pb::CreateExecutionRequest, meta: kube::api::ObjectMeta) {
    if req.namespace.is_empty() {
        req.namespace = meta.namespace.unwrap_or_else(|| "default".into());
    }
    if req.name.is_empty() && req.generate_name.is_empty() {
        req.name = meta.name.unwrap_or_default();
        req.generate_name = meta.generate_name.unwrap_or_default();
    }
    for (k, v) in meta.labels.unwrap_or_default() {
        req.labels.entry(k).or_insert(v);
    }
}

/// A kube error as the gRPC status a client can act on.
fn kube_status(e: kube::Error, what: &str) -> Status {
    match &e {
        kube::Error::Api(s) => {
            let msg = format!("{what}: {}", s.message);
            match s.code {
                404 => Status::not_found(msg),
                409 => Status::already_exists(msg),
                400 | 422 => Status::invalid_argument(msg),
                403 => Status::permission_denied(msg),
                429 => Status::resource_exhausted(msg),
                _ => Status::unavailable(msg),
            }
        }
        _ => Status::unavailable(format!("{what}: the cluster did not answer: {e}")),
    }
}

fn terminal_phase(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed" | "Aborted")
}

/// What a watcher is told about: the workflow's and its nodes' phases.
fn fingerprint(ex: &pb::Execution) -> String {
    let mut key = format!("{}|{}", ex.phase, ex.message);
    for n in &ex.nodes {
        key.push_str(&format!(
            "|{}={}#{}:{}/{}/{}:{}",
            n.id,
            n.phase,
            n.attempts,
            n.items_succeeded,
            n.items_failed,
            n.items_running,
            n.task_phase
        ));
    }
    key
}

pub(super) fn phase_name<T: serde::Serialize>(p: &T) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One node as the API shows it: its record, and from its spec the
/// edges and kind the console draws.
pub(super) fn node_execution(n: &NodeSpec, s: Option<&weft_dag::NodeStatus>) -> pb::NodeExecution {
    let text = |f: fn(&weft_dag::NodeStatus) -> Option<&String>| {
        s.and_then(f).cloned().unwrap_or_default()
    };
    let items = s.map_or(&[][..], |s| s.items.as_slice());
    let count = |p: NodePhase| items.iter().filter(|i| i.phase == p).count() as u32;
    let task_type = n
        .task
        .as_ref()
        .or(n.array.as_ref().map(|a| &a.task))
        .or(n.dynamic.as_ref().map(|d| &d.task))
        .map(|t| t.task_type.clone())
        .unwrap_or_default();
    pb::NodeExecution {
        id: n.id.clone(),
        phase: phase_name(&s.map_or(NodePhase::Pending, |s| s.phase)),
        // The status leaves out an attempt count of one.
        attempts: s.map_or(0, |s| match s.attempts {
            0 if s.started_at.is_some() => 1,
            n => n,
        }),
        message: text(|s| s.message.as_ref()),
        outputs: s
            .and_then(|s| s.outputs.as_ref())
            .map(|o| serde_json::Value::Object(o.clone()).to_string())
            .unwrap_or_default(),
        cached: s.is_some_and(|s| s.cached),
        depends_on: n.depends_on.clone(),
        kind: n.kind().name().into(),
        started_at: text(|s| s.started_at.as_ref()),
        finished_at: text(|s| s.finished_at.as_ref()),
        reason: text(|s| s.reason.as_ref()),
        task_type,
        plugin: s
            .and_then(|s| s.plugin.as_ref())
            .map(|p| p.name.clone())
            .unwrap_or_default(),
        plugin_digest: s
            .and_then(|s| s.plugin.as_ref())
            .map(|p| p.digest.clone())
            .unwrap_or_default(),
        resource: s
            .and_then(|s| s.resource.as_ref())
            .map(|r| pb::ResourceRef {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
            }),
        log_links: s.map_or(Vec::new(), |s| {
            s.log_links
                .iter()
                .map(|l| pb::LogLink {
                    name: l.name.clone(),
                    uri: l.uri.clone(),
                })
                .collect()
        }),
        items_total: items.len() as u32,
        items_succeeded: count(NodePhase::Succeeded),
        items_failed: count(NodePhase::Failed),
        items_running: count(NodePhase::Running),
        task_phase: text(|s| s.task_phase.as_ref()),
    }
}

/// A Workflow as the API shows it.
pub fn execution(wf: &Workflow) -> pb::Execution {
    let status = wf.status.as_ref();
    let spec = status
        .and_then(|s| s.resolved_spec.as_ref())
        .unwrap_or(&wf.spec.spec);
    let json = |m: Option<&serde_json::Map<String, serde_json::Value>>| {
        m.map(|o| serde_json::Value::Object(o.clone()).to_string())
            .unwrap_or_default()
    };
    let exit = status.and_then(|s| s.on_exit.as_ref());
    let exit_nodes = spec
        .on_exit
        .iter()
        .filter(|_| exit.is_some())
        .map(|n| node_execution(n, exit.and_then(|e| e.nodes.get(&n.id))))
        .collect();
    let nodes = spec
        .nodes
        .iter()
        .map(|n| node_execution(n, status.and_then(|s| s.nodes.get(&n.id))))
        .collect();
    pb::Execution {
        exit_nodes,
        suspended: status.is_some_and(|s| s.suspended),
        shutdown: wf
            .spec
            .spec
            .shutdown
            .as_ref()
            .map(phase_name)
            .unwrap_or_default(),
        retries: status.map_or(0, |s| {
            s.retries.iter().filter(|r| r.error.is_none()).count() as u32
        }),
        id: Some(pb::ExecutionId {
            namespace: wf.namespace().unwrap_or_default(),
            name: wf.name_any(),
        }),
        uid: wf.uid().unwrap_or_default(),
        labels: wf.labels().clone().into_iter().collect(),
        phase: status.map(|s| phase_name(&s.phase)).unwrap_or_default(),
        message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        created_at: wf
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        started_at: status
            .and_then(|s| s.started_at.clone())
            .unwrap_or_default(),
        finished_at: status
            .and_then(|s| s.finished_at.clone())
            .unwrap_or_default(),
        nodes,
        abort_requested: wf.spec.spec.abort,
        resource_version: wf.resource_version().unwrap_or_default(),
        inputs: json(status.and_then(|s| s.inputs.as_ref())),
        outputs: json(status.and_then(|s| s.outputs.as_ref())),
        template: wf
            .spec
            .spec
            .workflow_template_ref
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
