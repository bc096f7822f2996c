//! The host side of a web-API plugin's outbound HTTP (issue 20).
//!
//! The guest speaks `wasi:http/outgoing-handler`; every request it sends
//! reaches [`Hooks::send_request`] first. There the host checks the egress
//! policy *before* anything is resolved or connected, adds the operator's
//! credential headers (the guest never sees them), and bounds the request:
//! one timeout from connect to the last body byte, a response size cap, and
//! a per-plugin limit of requests in flight. What went wrong is kept in
//! [`Incidents`] so the call's error names the URL, whatever the guest does
//! with the error code it gets.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body::{Body, Frame};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::egress::{Denied, Egress, Policy, Request, Rule};

/// One plugin version's outbound HTTP: its policy, limits and permits.
#[derive(Debug, Clone)]
pub struct Outbound {
    plugin: Arc<str>,
    policy: Policy,
    egress: Egress,
    permits: Arc<Semaphore>,
    credentials: Vec<Credential>,
    /// Record or replay exchanges instead of only going live (`weft plugin test`).
    tape: Option<Tape>,
}

/// One HTTP exchange as `weft plugin test --record` writes it and
/// `--replay` serves it (Kubewarden's `kwctl` does the same for its
/// policies' host calls). No request header is kept: credentials never
/// reach a fixture.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// What the plugin asked.
    pub request: RecordedRequest,
    /// What the server answered.
    pub response: RecordedResponse,
}

/// The request of an [`Exchange`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The whole URL.
    pub url: String,
    /// The body, when there was one (UTF-8; lossy otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// The response of an [`Exchange`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedResponse {
    /// The status code.
    pub status: u16,
    /// Response headers (lower-case names).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The body (UTF-8; lossy otherwise).
    #[serde(default)]
    pub body: String,
}

/// Where exchanges go or come from.
#[derive(Debug, Clone)]
pub enum Tape {
    /// Go live and append each exchange here.
    Record(Arc<Mutex<Vec<Exchange>>>),
    /// Never go live: answer each request with the first unused exchange
    /// of the same method and URL.
    Replay(Arc<Mutex<Vec<Option<Exchange>>>>),
}

impl Tape {
    /// A tape to replay `exchanges` from.
    pub fn replay(exchanges: Vec<Exchange>) -> Tape {
        Tape::Replay(Arc::new(Mutex::new(
            exchanges.into_iter().map(Some).collect(),
        )))
    }

    /// An empty tape to record on.
    pub fn record() -> Tape {
        Tape::Record(Arc::default())
    }

    /// What was recorded (nothing when replaying).
    pub fn recorded(&self) -> Vec<Exchange> {
        match self {
            Tape::Record(r) => r.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            Tape::Replay(_) => Vec::new(),
        }
    }

    /// Requests the replay did not use.
    pub fn unused(&self) -> Vec<RecordedRequest> {
        match self {
            Tape::Record(_) => Vec::new(),
            Tape::Replay(r) => r
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .flatten()
                .map(|e| e.request.clone())
                .collect(),
        }
    }
}

/// A header the host adds to a plugin's requests, from a Secret.
#[derive(Clone)]
pub struct Credential {
    /// Hosts it is sent to (patterns as in egress rules); empty: every
    /// host the plugin may reach.
    pub hosts: Vec<String>,
    /// The header, e.g. `Authorization`.
    pub header: HeaderName,
    /// Its value (marked sensitive, so `http` never prints it).
    pub value: HeaderValue,
    /// How much of `value` is the prefix (`Bearer `), not the secret.
    pub(crate) prefix_len: usize,
}

impl Credential {
    /// What to keep out of what a guest returns: the whole value, and the
    /// secret alone (a server may echo the token without its prefix).
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &[u8]> {
        let v = self.value.as_bytes();
        let tail = v.get(self.prefix_len..).filter(|_| self.prefix_len > 0);
        std::iter::once(v).chain(tail)
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({} for {:?}: ***)", self.header, self.hosts)
    }
}

impl Outbound {
    /// The outbound HTTP of `plugin`: the manifest's egress, narrowed by
    /// the operator's rules when there are any, with these credentials.
    pub fn new(
        plugin: Arc<str>,
        egress: Egress,
        operator: Option<Vec<Rule>>,
        credentials: Vec<Credential>,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(egress.concurrency as usize));
        Outbound {
            plugin,
            policy: Policy {
                manifest: egress.allow.clone(),
                operator,
            },
            egress,
            permits,
            credentials,
            tape: None,
        }
    }

    /// The same, recording or replaying its exchanges on `tape`.
    pub fn with_tape(mut self, tape: Tape) -> Self {
        self.tape = Some(tape);
        self
    }

    /// The secret values, to keep out of what the guest returns.
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &[u8]> {
        self.credentials.iter().flat_map(Credential::secrets)
    }

    /// The same, also sending a task's own credentials (same permits: the
    /// plugin's concurrency limit still holds across its tasks).
    pub(crate) fn with_credentials(&self, task: &[Credential]) -> Self {
        let mut out = self.clone();
        out.credentials.extend(task.iter().cloned());
        out
    }

    /// Whether the rules in force let the plugin reach any host (`*`): a
    /// credential must then say which hosts it is for.
    pub(crate) fn open(&self) -> bool {
        self.policy.open()
    }
}

/// What happened to one call's requests.
#[derive(Debug, Default)]
pub(crate) struct Incidents {
    /// The first request the policy refused.
    pub(crate) denied: Option<Denied>,
    /// The first response over the size cap: its URL and the cap.
    pub(crate) too_large: Option<(String, u64)>,
    /// The first request that ran out of time: its URL and the timeout.
    pub(crate) timed_out: Option<(String, Duration)>,
    /// The first request a replay had no recording for.
    pub(crate) unrecorded: Option<String>,
    /// Requests in flight, since when, and the time spent waiting on the
    /// network so far (a union of intervals: two requests at once count once).
    in_flight: u32,
    since: Option<Instant>,
    waited: Duration,
}

impl Incidents {
    fn started(&mut self) {
        if self.in_flight == 0 {
            self.since = Some(Instant::now());
        }
        self.in_flight += 1;
    }

    fn ended(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0
            && let Some(s) = self.since.take()
        {
            self.waited += s.elapsed();
        }
    }

    /// Time spent waiting on the network, which the call's deadline does
    /// not count: the deadline bounds the guest's own work.
    pub(crate) fn waited(&self) -> Duration {
        self.waited + self.since.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

/// The `wasi:http` hooks of one call's store.
#[derive(Default)]
pub(crate) struct Hooks {
    /// `None`: this plugin's world makes no outbound HTTP; all is denied.
    pub(crate) outbound: Option<Arc<Outbound>>,
    pub(crate) incidents: Arc<Mutex<Incidents>>,
}

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Response = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Sent), Error>> + Send>;

fn lock(i: &Mutex<Incidents>) -> std::sync::MutexGuard<'_, Incidents> {
    i.lock().unwrap_or_else(|e| e.into_inner())
}

impl Hooks {
    /// What happened to the call's requests so far.
    pub(crate) fn incidents(&self) -> std::sync::MutexGuard<'_, Incidents> {
        lock(&self.incidents)
    }

    /// Time the call spent waiting on the network.
    pub(crate) fn waited(&self) -> Duration {
        lock(&self.incidents).waited()
    }

    fn deny(&mut self, d: Denied) -> Response {
        tracing::warn!(target: crate::PLUGIN_LOG_TARGET, plugin = %d.plugin, "{d}");
        lock(&self.incidents).denied.get_or_insert(d);
        Box::new(async { Err(Error::HttpRequestDenied) })
    }
}

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Sent,
    ) -> Response {
        let uri = request.uri().clone();
        let url = uri.to_string();
        let scheme = uri.scheme_str().unwrap_or("https").to_string();
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "http" { 80 } else { 443 });
        let r = Request {
            method: request.method().as_str(),
            scheme: &scheme,
            host,
            port,
        };
        let Some(out) = self.outbound.clone() else {
            return self.deny(Denied {
                plugin: "?".into(),
                method: r.method.into(),
                url,
                why: "its world makes no outbound HTTP".into(),
            });
        };
        if let Err(d) = out.policy.check(&out.plugin, &url, &r) {
            return self.deny(d);
        }
        for c in &out.credentials {
            if c.hosts.is_empty() || c.hosts.iter().any(|h| crate::egress::host_matches(h, host)) {
                request
                    .headers_mut()
                    .insert(c.header.clone(), c.value.clone());
            }
        }
        let timeout = out.egress.timeout;
        let clamp = |d: Option<Duration>| Some(d.map_or(timeout, |d| d.min(timeout)));
        let options = RequestOptions {
            connect_timeout: clamp(options.and_then(|o| o.connect_timeout)),
            first_byte_timeout: clamp(options.and_then(|o| o.first_byte_timeout)),
            between_bytes_timeout: clamp(options.and_then(|o| o.between_bytes_timeout)),
        };
        Box::new(send(out, request, options, url, self.incidents.clone()))
    }
}

/// Sends one allowed request within the plugin's limits.
async fn send(
    out: Arc<Outbound>,
    request: http::Request<WasiBody>,
    options: RequestOptions,
    url: String,
    incidents: Arc<Mutex<Incidents>>,
) -> Result<(http::Response<WasiBody>, Sent), Error> {
    use http_body_util::BodyExt;
    let timeout = out.egress.timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    lock(&incidents).started();
    let mut guard = Waiting(Some(incidents.clone()));
    let timed_out = || {
        lock(&incidents)
            .timed_out
            .get_or_insert((url.clone(), timeout));
        Error::HttpResponseTimeout
    };
    let permit = tokio::time::timeout_at(deadline, out.permits.clone().acquire_owned())
        .await
        .map_err(|_| timed_out())?
        .map_err(|_| Error::InternalError(Some("the plugin's request limit is closed".into())))?;
    let sent =
        tokio::time::timeout_at(deadline, send_on_tape(&out, request, options, &incidents)).await;
    let (response, io) = match sent {
        Err(_) => return Err(timed_out()),
        // The connection's own timeouts, clamped to egress.timeout above.
        Ok(Err(
            Error::ConnectionTimeout | Error::ConnectionReadTimeout | Error::HttpResponseTimeout,
        )) => {
            return Err(timed_out());
        }
        Ok(r) => r?,
    };
    let limit = out.egress.max_response;
    let length = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if length.is_some_and(|n| n > limit) {
        lock(&incidents).too_large.get_or_insert((url, limit));
        return Err(Error::HttpResponseBodySize(length));
    }
    let body = Capped {
        inner: None,
        read: 0,
        limit,
        url,
        deadline: Box::pin(tokio::time::sleep_until(deadline)),
        timeout,
        waiting: guard.0.take(),
        _permit: permit,
    };
    let response = response.map(|b| {
        let mut body = body;
        body.inner = Some(b.boxed_unsync());
        body.boxed_unsync()
    });
    Ok((response, io))
}

/// Sends live, or records the exchange, or replays it, per the tape.
async fn send_on_tape(
    out: &Outbound,
    request: http::Request<WasiBody>,
    options: RequestOptions,
    incidents: &Mutex<Incidents>,
) -> Result<(http::Response<WasiBody>, Sent), Error> {
    use http_body_util::{BodyExt, Full};
    let Some(tape) = &out.tape else {
        let (response, io) =
            wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
        return Ok((response.map(BodyExt::boxed_unsync), Box::new(io)));
    };
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        url: parts.uri.to_string(),
        body: (!body.is_empty()).then(|| String::from_utf8_lossy(&body).into_owned()),
    };
    let full = |b: Bytes| Full::new(b).map_err(|e| match e {}).boxed_unsync();
    let response = match tape {
        Tape::Replay(r) => {
            let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
            let found = r.iter_mut().find(|e| {
                e.as_ref().is_some_and(|e| {
                    e.request.method == recorded.method && e.request.url == recorded.url
                })
            });
            let Some(e) = found.and_then(Option::take) else {
                let why = format!(
                    "no recorded exchange left for {} {}",
                    recorded.method, recorded.url
                );
                lock(incidents).unrecorded.get_or_insert(why.clone());
                return Err(Error::InternalError(Some(why)));
            };
            let mut b = http::Response::builder().status(e.response.status);
            for (k, v) in &e.response.headers {
                b = b.header(k, v);
            }
            b.body(full(Bytes::from(e.response.body)))
                .map_err(|e| Error::InternalError(Some(format!("recorded response: {e}"))))?
        }
        Tape::Record(log) => {
            let request = http::Request::from_parts(parts, full(body));
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            // The connection is driven by `io` while the body is read.
            let conn = tokio::spawn(io);
            let (parts, body) = response.into_parts();
            // Bounded as the live body is: one byte over the cap is enough to refuse it.
            let limited = http_body_util::Limited::new(body, out.egress.max_response as usize + 1);
            let body = limited
                .collect()
                .await
                .map_err(|e| Error::InternalError(Some(e.to_string())))?
                .to_bytes();
            conn.abort();
            let redact = |s: String| {
                out.secrets().fold(s, |s, v| match std::str::from_utf8(v) {
                    Ok(v) if v.len() >= 4 => s.replace(v, "[redacted]"),
                    _ => s,
                })
            };
            log.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Exchange {
                    request: recorded,
                    response: RecordedResponse {
                        status: parts.status.as_u16(),
                        headers: parts
                            .headers
                            .iter()
                            .filter(|(k, _)| *k == http::header::CONTENT_TYPE)
                            .filter_map(|(k, v)| {
                                Some((k.to_string(), v.to_str().ok()?.to_string()))
                            })
                            .collect(),
                        body: redact(String::from_utf8_lossy(&body).into_owned()),
                    },
                });
            http::Response::from_parts(parts, full(body))
        }
    };
    Ok((response, Box::new(async { Ok(()) })))
}

/// Ends the network wait when dropped (the request failed, or its body
/// was read or dropped).
struct Waiting(Option<Arc<Mutex<Incidents>>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            lock(&i).ended();
        }
    }
}

/// A response body held to the size cap and the request's deadline; it
/// holds the request's permit until it is read or dropped.
struct Capped {
    inner: Option<WasiBody>,
    read: u64,
    limit: u64,
    url: String,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    waiting: Option<Arc<Mutex<Incidents>>>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Capped {
    fn drop(&mut self) {
        drop(Waiting(self.waiting.take()));
    }
}

impl Body for Capped {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.deadline.as_mut().poll(cx).is_ready() {
            if let Some(i) = &this.waiting {
                lock(i)
                    .timed_out
                    .get_or_insert((this.url.clone(), this.timeout));
            }
            return Poll::Ready(Some(Err(Error::HttpResponseTimeout)));
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(f))) => f,
            Poll::Ready(Some(Err(Error::ConnectionReadTimeout))) => {
                if let Some(i) = &this.waiting {
                    lock(i)
                        .timed_out
                        .get_or_insert((this.url.clone(), this.timeout));
                }
                return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
            }
            Poll::Ready(None) => {
                drop(Waiting(this.waiting.take()));
                return Poll::Ready(None);
            }
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            this.read += data.len() as u64;
            if this.read > this.limit {
                if let Some(i) = &this.waiting {
                    lock(i)
                        .too_large
                        .get_or_insert((this.url.clone(), this.limit));
                }
                this.inner = None;
                return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(this.read)))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }
}
