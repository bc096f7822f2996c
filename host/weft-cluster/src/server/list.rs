//! Lists and collection deletes: label and field selectors, paging with
//! `limit` and `continue` tokens, exact-revision reads, and tables. The
//! watch stream filters with the same selectors.

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use super::request::{Query, Target, delete_opts};
use super::{Body, json_response};
use crate::api::Cluster;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};

pub(super) struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    pub(super) fn from_query(q: &Query) -> ApiResult<Self> {
        Ok(Filter {
            labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?,
        })
    }
    pub(super) fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(obj)) && self.fields.matches(obj)
    }
}

pub(super) fn list(
    cx: &Cluster,
    t: &Target,
    q: &Query,
    table: Option<crate::table::Include>,
) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let ns = if t.rt.namespaced {
        t.namespace.as_deref()
    } else {
        None
    };
    let (items, rev) = cx.store.list(&t.rt.gr(), ns);
    if let Some(rv) = q.get("resourceVersion")
        && q.get("resourceVersionMatch") == Some("Exact")
        && rv.parse::<u64>().ok() != Some(rev)
    {
        return Err(ApiError::gone(format!(
            "resourceVersion {rv} is not the current revision; exact reads of older revisions are not supported"
        )));
    }
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    // continue token: "<revision>/<namespace>/<name>" of the last item sent.
    let (list_rev, after) = match q.get("continue") {
        Some(tok) => {
            use base64::Engine;
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(tok)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            let mut it = raw.splitn(3, '/');
            let r: u64 = it.next().and_then(|r| r.parse().ok()).unwrap_or(0);
            if r < cx.store.compacted() {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            let ns = it.next().unwrap_or("").to_string();
            let name = it.next().unwrap_or("").to_string();
            (r, Some((ns, name)))
        }
        None => (rev, None),
    };
    let mut out = Vec::new();
    let mut next = None;
    let mut remaining = 0u64;
    for item in items.iter() {
        let key = (
            item["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            item["metadata"]["name"].as_str().unwrap_or("").to_string(),
        );
        if let Some(a) = &after
            && key <= *a
        {
            continue;
        }
        if !filter.matches(item) {
            continue;
        }
        if next.is_some() {
            remaining += 1;
            continue;
        }
        if limit > 0 && out.len() == limit {
            remaining = 1;
            next = out.last().map(|o: &Arc<Value>| {
                use base64::Engine;
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
                    "{list_rev}/{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                ))
            });
            continue;
        }
        out.push(Cluster::versioned(&t.rt, &t.version, item));
    }
    if let Some(include) = table {
        let t = crate::table::table(
            &t.rt,
            &out,
            &list_rev.to_string(),
            next.as_deref(),
            include,
            true,
        );
        return Ok(json_response(200, &t));
    }
    let mut metadata = json!({"resourceVersion": list_rev.to_string()});
    if let Some(n) = next {
        metadata["continue"] = n.into();
        // Exact here: the count is taken from the same state as the page.
        metadata["remainingItemCount"] = remaining.into();
    }
    // A list's items carry no apiVersion and kind: the list says them once.
    let items: Vec<Value> = out
        .iter()
        .map(|o| {
            let mut item = (**o).clone();
            if let Some(m) = item.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            item
        })
        .collect();
    let list = json!({
        "kind": t.rt.list_kind,
        "apiVersion": t.rt.api_version(&t.version),
        "metadata": metadata,
        "items": items,
    });
    Ok(json_response(200, &list))
}

pub(super) async fn delete_collection(
    cx: &Cluster,
    t: &Target,
    q: &Query,
) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let ns = if t.rt.namespaced {
        t.namespace.as_deref()
    } else {
        None
    };
    let opts = delete_opts(q, b"")?;
    let (items, _) = cx.store.list(&t.rt.gr(), ns);
    let mut deleted = Vec::new();
    for item in items.iter().filter(|i| filter.matches(i)) {
        let name = item["metadata"]["name"].as_str().unwrap_or("");
        let ins = item["metadata"]["namespace"].as_str().unwrap_or("");
        match cx.delete(&t.rt, &t.version, ins, name, &opts).await {
            Ok(o) => deleted.push(o),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": t.rt.list_kind,
        "apiVersion": t.rt.api_version(&t.version),
        "metadata": {"resourceVersion": cx.store.revision().to_string()},
        "items": deleted.iter().map(|o| &**o).collect::<Vec<_>>(),
    });
    Ok(json_response(200, &list))
}
