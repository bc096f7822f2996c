//! The work behind the execution calls: fetch (authorized), create,
//! list, abort, the lifecycle actions and watch.

use std::collections::HashSet;

use futures::StreamExt;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::actions::{Action, ActionError, act};
use crate::admin::chain::Caller;
use crate::admin::pb;
use crate::admin::request::{fill_from_manifest, kube_status, parse_spec};
use crate::admin::service::{AdminService, CREATED_BY, WatchStream};
use crate::admin::view::{execution, fingerprint, terminal_phase};
use crate::api::{Workflow, WorkflowResourceSpec};
use crate::events::record_event;

impl AdminService {
    /// Resolves an id, authorizes it and reads the Workflow.
    pub(super) async fn fetch(
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
        self.authorize(caller, Some(&id.namespace)).await?;
        let api: Api<Workflow> = Api::namespaced(self.client.clone(), &id.namespace);
        let wf = api
            .get(&id.name)
            .await
            .map_err(|e| kube_status(e, &format!("execution {}/{}", id.namespace, id.name)))?;
        Ok((api, wf))
    }

    pub(super) async fn create(
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
        self.authorize(&caller, Some(&req.namespace)).await?;
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

    pub(super) async fn list(
        &self,
        caller: Caller,
        req: pb::ListExecutionsRequest,
    ) -> Result<pb::ListExecutionsResponse, Status> {
        let ns = (!req.namespace.is_empty()).then_some(req.namespace.as_str());
        self.authorize(&caller, ns).await?;
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

    pub(super) async fn abort(
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
    pub(super) async fn action(
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
        self.authorize(&caller, Some(&id.namespace)).await?;
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

    pub(super) async fn watch(
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
