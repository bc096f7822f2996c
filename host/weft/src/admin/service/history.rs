//! The execution history behind the admin API (issue 43): archived runs
//! in GetExecution, live and archived runs together in ListExecutions,
//! and the archive's own calls (delete, resubmit). While the history
//! database is unavailable these answer UNAVAILABLE, never a partial
//! list presented as complete.

use std::collections::HashMap;

use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tonic::Status;

use crate::admin::chain::Caller;
use crate::admin::pb;
use crate::admin::request::kube_status;
use crate::admin::service::AdminService;
use crate::admin::view::execution;
use crate::api::Workflow;
use crate::history::query::{Archived, Cursor, Filter, parse_selector};
use crate::history::{DbError, History};

/// A history error as the caller sees it.
fn unavailable(e: DbError) -> Status {
    match e {
        DbError::Unavailable(_) | DbError::Unreachable { .. } => Status::unavailable(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

/// RFC 3339 to milliseconds since the epoch; the field named when bad.
fn millis(field: &str, value: &str) -> Result<Option<i64>, Status> {
    if value.is_empty() {
        return Ok(None);
    }
    let t = humantime::parse_rfc3339_weak(value).map_err(|e| {
        Status::invalid_argument(format!("{field}: {value:?} is not an RFC 3339 time: {e}"))
    })?;
    let ms = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(Some(ms.as_millis() as i64))
}

/// Whether a request asks for the history's listing.
pub(super) fn wants_history(r: &pb::ListExecutionsRequest) -> bool {
    r.include_archived
        || !r.phase.is_empty()
        || !r.template.is_empty()
        || !r.name_prefix.is_empty()
        || !r.started_after.is_empty()
        || !r.started_before.is_empty()
}

/// The filter a request names.
fn filter(r: &pb::ListExecutionsRequest) -> Result<Filter, Status> {
    let some = |s: &String| (!s.is_empty()).then(|| s.clone());
    let template = match (r.template.as_str(), r.namespace.as_str()) {
        ("", _) => None,
        (t, _) if t.contains('/') => Some(t.to_string()),
        (_, "") => {
            return Err(Status::invalid_argument(
                "template: give namespace/name when listing every namespace",
            ));
        }
        (t, ns) => Some(format!("{ns}/{t}")),
    };
    Ok(Filter {
        namespace: some(&r.namespace),
        phase: some(&r.phase),
        labels: parse_selector(&r.label_selector).map_err(Status::invalid_argument)?,
        template,
        name_prefix: some(&r.name_prefix),
        started_after: millis("started_after", &r.started_after)?,
        started_before: millis("started_before", &r.started_before)?,
    })
}

/// A live Workflow's place in the order, if it matches the filter (its
/// labels were matched by the API server).
fn live_key(wf: &Workflow, f: &Filter) -> Option<Cursor> {
    let status = wf.status.clone().unwrap_or_default();
    let created = wf
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond());
    let started =
        crate::history::query::started_millis(status.started_at.as_deref()).or(created)?;
    let phase = format!("{:?}", status.phase);
    let template = status
        .template
        .as_ref()
        .map(|t| format!("{}/{}", wf.namespace().unwrap_or_default(), t.name));
    let ok = f.phase.as_ref().is_none_or(|p| *p == phase)
        && f.template
            .as_ref()
            .is_none_or(|t| Some(t) == template.as_ref())
        && f.name_prefix
            .as_ref()
            .is_none_or(|p| wf.name_any().starts_with(p.as_str()))
        && f.started_after.is_none_or(|t| started >= t)
        && f.started_before.is_none_or(|t| started < t);
    ok.then(|| Cursor {
        started,
        uid: wf.uid().unwrap_or_default(),
    })
}

/// An archived object as the admin API shows it.
fn archived_execution(a: &Archived) -> Result<pb::Execution, Status> {
    let wf: Workflow = serde_json::from_value(a.object.clone()).map_err(|e| {
        Status::internal(format!("archived execution {}: unreadable: {e}", a.key.uid))
    })?;
    Ok(pb::Execution {
        archived: true,
        ..execution(&wf)
    })
}

impl AdminService {
    fn history(&self) -> Result<&History, Status> {
        self.history.as_deref().ok_or_else(|| {
            Status::failed_precondition(
                "this Weft keeps no execution history (start it with --history-db)",
            )
        })
    }

    /// Live and archived executions together, newest start first.
    pub(super) async fn list_history(
        &self,
        caller: Caller,
        req: pb::ListExecutionsRequest,
    ) -> Result<pb::ListExecutionsResponse, Status> {
        let ns = (!req.namespace.is_empty()).then_some(req.namespace.as_str());
        self.authorize(&caller, ns).await?;
        let h = self.history()?;
        let f = filter(&req)?;
        let limit = match req.limit {
            0 => 100,
            n => n.min(500),
        } as usize;
        let after = match req.page_token.as_str() {
            "" => None,
            t => Some(Cursor::parse(t).ok_or_else(|| {
                Status::invalid_argument(format!("page_token {t:?}: not a token of this listing"))
            })?),
        };
        let archived = h
            .list(&f, after.as_ref(), limit as i64 + 1)
            .await
            .map_err(unavailable)?;
        let mut page: HashMap<String, (Cursor, pb::Execution)> = HashMap::new();
        for a in &archived {
            page.insert(a.key.uid.clone(), (a.key.clone(), archived_execution(a)?));
        }
        // Live ones win over their own archive (a finished Workflow not yet
        // deleted is both).
        for wf in self.live(ns, &req.label_selector).await? {
            let Some(key) = live_key(&wf, &f) else {
                continue;
            };
            if after.as_ref().is_none_or(|a| key < *a) {
                page.insert(key.uid.clone(), (key, execution(&wf)));
            }
        }
        let mut rows: Vec<(Cursor, pb::Execution)> = page.into_values().collect();
        rows.sort_by(|a, b| b.0.cmp(&a.0));
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more {
            rows.last().map(|(k, _)| k.token()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(pb::ListExecutionsResponse {
            executions: rows.into_iter().map(|(_, e)| e).collect(),
            next_page_token: next,
        })
    }

    async fn live(&self, ns: Option<&str>, selector: &str) -> Result<Vec<Workflow>, Status> {
        let api: Api<Workflow> = match ns {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut lp = ListParams::default();
        if !selector.is_empty() {
            lp = lp.labels(selector);
        }
        let list = api
            .list(&lp)
            .await
            .map_err(|e| kube_status(e, "executions"))?;
        Ok(list.items)
    }

    /// The archived execution an id names: by uid, else the newest
    /// archived of that namespace and name.
    pub(super) async fn archived(
        &self,
        caller: &Caller,
        id: Option<&pb::ExecutionId>,
    ) -> Result<(Archived, Workflow), Status> {
        let id = id.ok_or_else(|| Status::invalid_argument("id: required"))?;
        if id.namespace.is_empty() || (id.name.is_empty() && id.uid.is_empty()) {
            return Err(Status::invalid_argument(
                "id: namespace and a name or uid are required",
            ));
        }
        self.authorize(caller, Some(&id.namespace)).await?;
        let uid = (!id.uid.is_empty()).then_some(id.uid.as_str());
        let found = self.history()?.get(uid, &id.namespace, &id.name).await;
        let what = match uid {
            Some(u) => format!("archived execution {}/{u}", id.namespace),
            None => format!("execution {}/{}", id.namespace, id.name),
        };
        let a = found
            .map_err(unavailable)?
            .filter(|a| a.object["metadata"]["namespace"] == id.namespace.as_str())
            .ok_or_else(|| Status::not_found(format!("{what}: not live and not archived")))?;
        let wf: Workflow = serde_json::from_value(a.object.clone())
            .map_err(|e| Status::internal(format!("{what}: unreadable: {e}")))?;
        Ok((a, wf))
    }

    /// Its events, when there is a history that answers (an unavailable
    /// history leaves them out of a live execution's view).
    pub(super) async fn events(&self, uid: &str) -> Result<Vec<pb::ExecutionEvent>, DbError> {
        let Some(h) = &self.history else {
            return Ok(Vec::new());
        };
        let rows = h.events(uid).await?;
        Ok(rows
            .into_iter()
            .map(|e| pb::ExecutionEvent {
                kind: e.kind,
                node_id: e.node,
                attempt: e.attempt as u32,
                phase: e.phase,
                at: crate::history::query::rfc3339_millis(e.occurred_at),
                reason: e.reason.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
                plugin: e.plugin.unwrap_or_default(),
                plugin_digest: e.plugin_digest.unwrap_or_default(),
                resource: e.resource.unwrap_or_default(),
            })
            .collect())
    }

    /// The Workflow an id names: the live one, else (with a history, or
    /// by `uid`) its archived copy; whether it is archived.
    pub(super) async fn fetch_any(
        &self,
        caller: &Caller,
        id: Option<pb::ExecutionId>,
    ) -> Result<(Workflow, bool), Status> {
        let by_uid = id.as_ref().is_some_and(|i| !i.uid.is_empty());
        if !by_uid || self.history.is_none() {
            match self.fetch(caller, id.clone()).await {
                Ok((_, wf)) => return Ok((wf, false)),
                Err(s) if s.code() == tonic::Code::NotFound && self.history.is_some() => {}
                Err(s) => return Err(s),
            }
        }
        let (_, wf) = self.archived(caller, id.as_ref()).await?;
        Ok((wf, true))
    }

    /// GetExecution: the live Workflow, else its archive, with its events
    /// (an unavailable history leaves them out of a live one's view).
    pub(super) async fn get(
        &self,
        caller: Caller,
        req: pb::GetExecutionRequest,
    ) -> Result<pb::Execution, Status> {
        let (wf, archived) = self.fetch_any(&caller, req.id).await?;
        let events = self.events(&wf.uid().unwrap_or_default()).await;
        let events = match (events, archived) {
            (Ok(e), _) => e,
            (Err(_), false) => Vec::new(),
            (Err(e), true) => return Err(unavailable(e)),
        };
        Ok(pb::Execution {
            archived,
            events,
            ..execution(&wf)
        })
    }

    pub(super) async fn delete_archived(
        &self,
        caller: Caller,
        req: pb::DeleteArchivedExecutionRequest,
    ) -> Result<pb::DeleteArchivedExecutionResponse, Status> {
        let (a, _) = self.archived(&caller, req.id.as_ref()).await?;
        self.history()?
            .delete(&a.key.uid)
            .await
            .map_err(unavailable)?;
        tracing::info!(
            uid = a.key.uid,
            principal = caller.principal,
            "archived execution deleted"
        );
        Ok(pb::DeleteArchivedExecutionResponse { uid: a.key.uid })
    }

    pub(super) async fn resubmit_archived(
        &self,
        caller: Caller,
        req: pb::ResubmitArchivedRequest,
    ) -> Result<pb::Execution, Status> {
        let (_, wf) = self.archived(&caller, req.id.as_ref()).await?;
        let ns = wf.namespace().unwrap_or_default();
        let api: Api<Workflow> = Api::namespaced(self.client.clone(), &ns);
        let name = (!req.name.is_empty()).then_some(req.name.as_str());
        let new = crate::actions::resubmit_as(&api, &wf, true, name)
            .await
            .map_err(|e| kube_status(e, &format!("resubmitting {ns}/{}", wf.name_any())))?;
        self.metrics.api_write("workflow");
        Ok(execution(&new))
    }
}
