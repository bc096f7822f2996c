//! Watches: a chunked stream of events from a resourceVersion (or the
//! current state), filtered as the list is, with bookmarks, timeouts and
//! the `410 Gone` of a resourceVersion older than the history. Long-lived,
//! unlike every other response.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use super::Body;
use super::list::Filter;
use super::request::{Query, Target};
use crate::api::Cluster;
use crate::status::{ApiError, ApiResult};
use crate::store::{EventKind, WatchEvent};

fn event_line(kind: &str, obj: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// Starts a watch: a chunked stream of `{"type": ..., "object": ...}` lines.
pub(super) fn watch_response(
    cx: Arc<Cluster>,
    mut shutdown: watch::Receiver<bool>,
    t: &Target,
    q: &Query,
    table: Option<crate::table::Include>,
) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let rt = t.rt.clone();
    let version = t.version.clone();
    let gr = rt.gr();
    let ns_filter = if rt.namespaced {
        t.namespace.clone()
    } else {
        None
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let initial_events_end = q.flag("sendInitialEvents") && bookmarks;
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let rv: Option<u64> = match q.get("resourceVersion") {
        None | Some("0") => None,
        // A streaming list starts from the current state whatever the
        // resourceVersion (NotOlderThan is satisfied by the newest).
        Some(_) if q.flag("sendInitialEvents") => None,
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion: {s}")))?,
        ),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    /// What a watch sends before live changes, produced as it is sent.
    type Backlog = Box<dyn Iterator<Item = Arc<WatchEvent>> + Send>;
    // Subscribe before reading state so nothing falls between the two.
    let (backlog, mut live, mut last) = match rv {
        Some(rv) => match cx.store.subscribe_from(rv) {
            Ok(sub) => {
                let (gr, ns) = (gr.clone(), ns_filter.clone());
                let parsed = sub
                    .backlog
                    .into_iter()
                    .filter(move |p| p.is_for(&gr, ns.as_deref()))
                    .filter_map(|p| p.event().map(Arc::new));
                (Box::new(parsed) as Backlog, sub.rx, rv)
            }
            Err(oldest) => {
                let status = ApiError::too_old(rv, oldest).to_status();
                let line = event_line("ERROR", &status);
                let body = StreamBody::new(futures_util::stream::iter([Ok::<_, Infallible>(
                    Frame::data(line),
                )]));
                return Ok(stream_response(body.boxed()));
            }
        },
        None => {
            let live = cx.store.subscribe();
            let (items, rev) = cx.store.list(&gr, ns_filter.as_deref());
            let initial: Vec<Arc<WatchEvent>> = items
                .into_iter()
                .map(|o| {
                    Arc::new(WatchEvent {
                        rev: 0,
                        kind: EventKind::Added,
                        gr: gr.clone(),
                        namespace: String::new(),
                        name: String::new(),
                        object: o,
                        prev: None,
                    })
                })
                .collect();
            (Box::new(initial.into_iter()) as Backlog, live, rev)
        }
    };
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut headers = true;
        let mut send = |ev: &WatchEvent| -> Option<Bytes> {
            if ev.rev != 0
                && (ev.gr != gr || ns_filter.as_ref().is_some_and(|n| *n != ev.namespace))
            {
                return None;
            }
            let now = filter.matches(&ev.object);
            let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
            let kind = match ev.kind {
                EventKind::Deleted if now || before => "DELETED",
                EventKind::Deleted => return None,
                EventKind::Added if now => "ADDED",
                EventKind::Modified if now && (before || ev.prev.is_none()) => "MODIFIED",
                EventKind::Modified if now => "ADDED",
                EventKind::Modified if before => "DELETED",
                _ => return None,
            };
            let obj = Cluster::versioned(&rt, &version, &ev.object);
            if let Some(include) = table {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let t = crate::table::table(&rt, &[obj], &rv, None, include, headers);
                headers = false;
                return Some(event_line(kind, &t));
            }
            Some(event_line(kind, &obj))
        };
        for ev in backlog {
            if let Some(line) = send(&ev)
                && tx.send(line).await.is_err()
            {
                return;
            }
            if ev.rev > last {
                last = ev.rev;
            }
        }
        if initial_events_end {
            // Streaming lists (sendInitialEvents=true) learn the initial
            // state is complete from this bookmark.
            let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(&version),
                            "metadata": {"resourceVersion": last.to_string(),
                                         "annotations": {"k8s.io/initial-events-end": "true"}}});
            if tx.send(event_line("BOOKMARK", &bm)).await.is_err() {
                return;
            }
        }
        let mut ticker = tokio::time::interval(Duration::from_secs(30));
        ticker.tick().await;
        loop {
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if ev.rev <= last {
                            continue;
                        }
                        last = ev.rev;
                        if let Some(line) = send(&ev)
                            && tx.send(line).await.is_err()
                        {
                            return;
                        }
                    }
                    // Fell behind: end the watch; the client resumes from
                    // its last resourceVersion and the history fills the gap.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(&version),
                                    "metadata": {"resourceVersion": last.to_string()}});
                    if tx.send(event_line("BOOKMARK", &bm)).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Ok(stream_response(StreamBody::new(stream).boxed()))
}

fn stream_response(body: Body) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(body)
        .expect("static response parts")
}
