//! A small blocking HTTP client for web-API task plugins, over the
//! host's `wasi:http/outgoing-handler` (no sockets, no WASI std: it works
//! in a `wasm32-unknown-unknown` component).
//!
//! ```no_run
//! use weft_plugin_sdk::{http, json, PluginError};
//!
//! # fn main() -> Result<(), PluginError> {
//! let resp = http::Request::post("http://127.0.0.1:8265/api/jobs/")
//!     .with_header("accept", "application/json")
//!     .with_json(&json!({"entrypoint": "python job.py", "submission_id": "wf-n-0"}))
//!     .send()?; // HttpError -> PluginError: retryable only for transport failures
//! if resp.is_success() {
//!     let answer: weft_plugin_sdk::Value = resp.json()?;
//!     println!("submitted {}", answer["submission_id"]);
//! } else {
//!     println!("{}: {}", resp.status, resp.text());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! What the host does with a request:
//!
//! - It allows only what the plugin's manifest (`egress.allow`) and the
//!   operator allow. Anything else fails with [`ErrorKind::Denied`]
//!   ("HTTP request denied") before a connection is opened.
//! - It adds the credential headers the operator configured (from
//!   Secrets): the plugin never sees them and should not send its own.
//! - It bounds each request's time (`egress.timeout`) and the response
//!   body (`egress.maxResponse`): a larger body fails while it is read,
//!   with [`ErrorKind::TooLarge`].
//!
//! `send` blocks the call until the whole body is read, for as long as
//! the host's `egress.timeout` lets it.
//!
//! # Natively
//!
//! There is no `wasi:http` in a native build: `send` asks the responder
//! the test installed with [`native::set_responder`] (one per thread, so
//! tests running in parallel keep theirs), and fails without one. The
//! request is built and its URL checked exactly as in a component.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// An HTTP request, built with the `with_*` methods and sent with
/// [`Request::send`].
///
/// ```
/// use weft_plugin_sdk::{http::Request, json};
///
/// let req = Request::post("https://api.example.com/v1/jobs?dry_run=1")
///     .with_header("accept", "application/json")
///     .with_json(&json!({"name": "train"}));
/// assert_eq!(req.method(), "POST");
/// assert_eq!(req.header("content-type"), Some("application/json"));
/// assert_eq!(req.body(), br#"{"name":"train"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// A problem found while building (a body that would not serialize),
    /// reported by `send` so the builder chain stays infallible.
    problem: Option<String>,
}

impl Request {
    /// A request with any method (`"GET"`, `"PROPFIND"`, ...); methods are
    /// case-sensitive, as in HTTP.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Request {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            problem: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// A `PUT` request.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new("PUT", url)
    }

    /// A `PATCH` request.
    pub fn patch(url: impl Into<String>) -> Self {
        Self::new("PATCH", url)
    }

    /// A `DELETE` request.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new("DELETE", url)
    }

    /// Adds a header (a repeated name is sent as several fields).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and `content-type:
    /// application/json` unless a content type was set already. A value
    /// that does not serialize (a map with non-string keys) makes `send`
    /// fail with [`ErrorKind::Invalid`].
    pub fn with_json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => self.body = body,
            Err(e) => self.problem = Some(format!("the JSON body does not serialize: {e}")),
        }
        if self.header("content-type").is_none() {
            self.headers
                .push(("content-type".into(), "application/json".into()));
        }
        self
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Sends the request and reads the whole response, blocking.
    ///
    /// An `Ok` is any response, whatever its status ([`Response::is_success`]
    /// tells 2xx); an `Err` means there was none, or its body could not be
    /// read to the end.
    pub fn send(self) -> Result<Response, HttpError> {
        let context = format!("{} {}", self.method, self.url);
        let sent = match (&self.problem, Url::parse(&self.url)) {
            (Some(problem), _) => Err(HttpError::new(ErrorKind::Invalid, problem.clone())),
            (None, Err(e)) => Err(e),
            (None, Ok(url)) => imp::send(&self, &url),
        };
        sent.map_err(|e| e.in_request(context))
    }
}

/// A URL split the way `wasi:http` takes it.
///
/// ```
/// use weft_plugin_sdk::http::{Scheme, Url};
///
/// let url = Url::parse("http://127.0.0.1:8265/api/jobs/?limit=5#top").unwrap();
/// assert_eq!(url.scheme, Scheme::Http);
/// assert_eq!(url.authority, "127.0.0.1:8265");
/// assert_eq!(url.path_with_query, "/api/jobs/?limit=5");
///
/// assert!(Url::parse("127.0.0.1:8265/api").is_err()); // no scheme
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `http`, `https` or another scheme (which the host is likely to deny).
    pub scheme: Scheme,
    /// `host[:port]`, as written (IPv6 hosts in brackets).
    pub authority: String,
    /// The path (at least `/`) and the query, without the fragment.
    pub path_with_query: String,
}

/// The scheme of a [`Url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
    /// Anything else, in lower case.
    Other(String),
}

impl Url {
    /// Splits an absolute `scheme://authority/path?query` URL. Refused: no
    /// scheme or authority, user info (`user:pass@`: credentials are the
    /// host's to add, as headers), spaces and control characters.
    pub fn parse(url: &str) -> Result<Url, HttpError> {
        let invalid =
            |why: &str| HttpError::new(ErrorKind::Invalid, format!("invalid URL {url:?}: {why}"));
        if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(&format!("it contains {c:?}")));
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("it has no scheme (http:// or https://)"))?;
        let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid_scheme {
            return Err(invalid("its scheme is malformed"));
        }
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => Scheme::Other(other.to_string()),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.is_empty() {
            return Err(invalid("it has no host"));
        }
        if authority.contains('@') {
            return Err(invalid(
                "it carries user info; the host adds credentials as headers",
            ));
        }
        let path_with_query = match path.chars().next() {
            None => "/".to_string(),
            Some('?') => format!("/{path}"),
            Some(_) => path.to_string(),
        };
        Ok(Url {
            scheme,
            authority: authority.to_string(),
            path_with_query,
        })
    }
}

/// Percent-encodes `segment` for one path segment: everything but
/// RFC 3986's unreserved characters (letters, digits, `-._~`).
///
/// ```
/// use weft_plugin_sdk::http::encode_path_segment;
///
/// assert_eq!(encode_path_segment("wf-n-0"), "wf-n-0");
/// assert_eq!(encode_path_segment("a/b c?"), "a%2Fb%20c%3F");
/// ```
pub fn encode_path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A response: its status, headers and whole body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers in the order they came, names in lower case; values
    /// that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response without headers (for native tests' responders).
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// The body parsed as JSON into `T` (whatever the content type says).
    ///
    /// ```
    /// use weft_plugin_sdk::{http::Response, Value};
    ///
    /// let resp = Response::new(200, r#"{"status": "RUNNING"}"#);
    /// let v: Value = resp.json().unwrap();
    /// assert_eq!(v["status"], "RUNNING");
    /// assert!(Response::new(500, "Internal Server Error").json::<Value>().is_err());
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// What kind of failure an [`HttpError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was not sent: its URL, method, a header or its JSON
    /// body is malformed.
    Invalid,
    /// The host refused the request (`HTTP-request-denied`): it is outside
    /// the plugin's egress allow-list. The operator can change that; a
    /// retry cannot.
    Denied,
    /// The response body is larger than the host reads
    /// (`HTTP-response-body-size`, the manifest's `egress.maxResponse`).
    TooLarge,
    /// No (complete) response: DNS, connection, TLS, timeouts, a protocol
    /// error. A new attempt may succeed.
    Transport,
}

/// Why [`Request::send`] got no response.
///
/// The detail is the text of `wasi:http`'s `error-code` as the host
/// (wasmtime) words it, e.g. "HTTP request denied", "connection refused",
/// "HTTP response body size exceeds limit: 4194305 bytes".
///
/// ```
/// use weft_plugin_sdk::http::{ErrorKind, HttpError};
/// use weft_plugin_sdk::PluginError;
///
/// let e = HttpError::new(ErrorKind::Transport, "connection refused");
/// assert!(e.is_retryable());
/// let p: PluginError = HttpError::new(ErrorKind::Denied, "HTTP request denied").into();
/// assert!(!p.retryable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    kind: ErrorKind,
    request: Option<String>,
    detail: String,
}

impl HttpError {
    /// An error of `kind` (for native tests' responders).
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        HttpError {
            kind,
            request: None,
            detail: detail.into(),
        }
    }

    fn in_request(mut self, request: String) -> Self {
        self.request.get_or_insert(request);
        self
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong, without the request (e.g. "connection refused").
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Whether a new attempt may succeed ([`ErrorKind::Transport`]).
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Transport
    }
}

impl fmt::Display for HttpError {
    /// `METHOD URL: detail`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.request {
            Some(r) => write!(f, "{r}: {}", self.detail),
            None => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for HttpError {}

/// Retryable only for [`ErrorKind::Transport`]: a denied URL, a malformed
/// request or a body over the host's cap fail the same way next time.
impl From<HttpError> for crate::PluginError {
    fn from(e: HttpError) -> Self {
        crate::PluginError {
            message: e.to_string(),
            retryable: e.is_retryable(),
        }
    }
}

/// A `wasi:http` `error-code`: its kind and the host's text for it.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn describe(code: &crate::wit::webapi::wasi::http::types::ErrorCode) -> (ErrorKind, String) {
    use crate::wit::webapi::wasi::http::types::ErrorCode as E;
    let with_size = |what: &str, size: Option<u64>| match size {
        Some(n) => format!("{what} exceeds limit: {n} bytes"),
        None => format!("{what} exceeds limit"),
    };
    let with_field = |what: &str, name: &Option<String>, size: Option<u32>| {
        let mut s = format!("{what} exceeds limit");
        if let Some(name) = name {
            s.push_str(&format!(": field {name:?}"));
        }
        if let Some(size) = size {
            s.push_str(&format!(" ({size} bytes)"));
        }
        s
    };
    let transport = |s: &str| (ErrorKind::Transport, s.to_string());
    match code {
        E::DnsTimeout => transport("DNS lookup timed out"),
        E::DnsError(p) => {
            let mut s = "DNS error".to_string();
            if let Some(rcode) = &p.rcode {
                s.push_str(&format!(": rcode {rcode}"));
            }
            if let Some(info) = p.info_code {
                s.push_str(&format!(" (info code {info})"));
            }
            (ErrorKind::Transport, s)
        }
        E::DestinationNotFound => transport("destination not found"),
        E::DestinationUnavailable => transport("destination unavailable"),
        E::DestinationIpProhibited => transport("destination IP address is prohibited"),
        E::DestinationIpUnroutable => transport("destination IP address is unroutable"),
        E::ConnectionRefused => transport("connection refused"),
        E::ConnectionTerminated => transport("connection terminated"),
        E::ConnectionTimeout => transport("connection timeout"),
        E::ConnectionReadTimeout => transport("connection read timeout"),
        E::ConnectionWriteTimeout => transport("connection write timeout"),
        E::ConnectionLimitReached => transport("connection limit reached"),
        E::TlsProtocolError => transport("TLS protocol error"),
        E::TlsCertificateError => transport("TLS certificate error"),
        E::TlsAlertReceived(p) => {
            let mut s = "TLS alert received".to_string();
            if let Some(id) = p.alert_id {
                s.push_str(&format!(": alert id {id}"));
            }
            if let Some(msg) = &p.alert_message {
                s.push_str(&format!(": {msg}"));
            }
            (ErrorKind::Transport, s)
        }
        E::HttpRequestDenied => (ErrorKind::Denied, "HTTP request denied".into()),
        E::HttpRequestLengthRequired => transport("HTTP request length required"),
        E::HttpRequestBodySize(n) => (ErrorKind::Invalid, with_size("HTTP request body size", *n)),
        E::HttpRequestMethodInvalid => (ErrorKind::Invalid, "invalid HTTP request method".into()),
        E::HttpRequestUriInvalid => (ErrorKind::Invalid, "invalid HTTP request URI".into()),
        E::HttpRequestUriTooLong => (ErrorKind::Invalid, "HTTP request URI too long".into()),
        E::HttpRequestHeaderSectionSize(n) => (
            ErrorKind::Invalid,
            with_size("HTTP request header section size", n.map(u64::from)),
        ),
        E::HttpRequestHeaderSize(p) => {
            let (name, size) = p
                .as_ref()
                .map_or((None, None), |p| (p.field_name.clone(), p.field_size));
            (
                ErrorKind::Invalid,
                with_field("HTTP request header size", &name, size),
            )
        }
        E::HttpRequestTrailerSectionSize(n) => (
            ErrorKind::Invalid,
            with_size("HTTP request trailer section size", n.map(u64::from)),
        ),
        E::HttpRequestTrailerSize(p) => (
            ErrorKind::Invalid,
            with_field("HTTP request trailer size", &p.field_name, p.field_size),
        ),
        E::HttpResponseIncomplete => transport("incomplete HTTP response"),
        E::HttpResponseHeaderSectionSize(n) => (
            ErrorKind::Transport,
            with_size("HTTP response header section size", n.map(u64::from)),
        ),
        E::HttpResponseHeaderSize(p) => (
            ErrorKind::Transport,
            with_field("HTTP response header size", &p.field_name, p.field_size),
        ),
        E::HttpResponseBodySize(n) => (
            ErrorKind::TooLarge,
            with_size("HTTP response body size", *n),
        ),
        E::HttpResponseTrailerSectionSize(n) => (
            ErrorKind::Transport,
            with_size("HTTP response trailer section size", n.map(u64::from)),
        ),
        E::HttpResponseTrailerSize(p) => (
            ErrorKind::Transport,
            with_field("HTTP response trailer size", &p.field_name, p.field_size),
        ),
        E::HttpResponseTransferCoding(c) => (
            ErrorKind::Transport,
            format!(
                "HTTP response transfer coding error: {}",
                c.as_deref().unwrap_or("unknown")
            ),
        ),
        E::HttpResponseContentCoding(c) => (
            ErrorKind::Transport,
            format!(
                "HTTP response content coding error: {}",
                c.as_deref().unwrap_or("unknown")
            ),
        ),
        E::HttpResponseTimeout => transport("HTTP response timeout"),
        E::HttpUpgradeFailed => transport("HTTP upgrade failed"),
        E::HttpProtocolError => transport("HTTP protocol error"),
        E::LoopDetected => transport("loop detected"),
        E::ConfigurationError => transport("configuration error"),
        E::InternalError(msg) => (
            ErrorKind::Transport,
            match msg {
                Some(m) => format!("internal error: {m}"),
                None => "internal error".into(),
            },
        ),
    }
}

/// The component's client: `wasi:http/outgoing-handler`, blocking on its
/// pollables.
#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{describe, ErrorKind, HttpError, Request, Response, Scheme, Url};
    use crate::wit::webapi::wasi::http::outgoing_handler;
    use crate::wit::webapi::wasi::http::types as t;
    use crate::wit::webapi::wasi::io::streams::StreamError;

    /// `blocking-write-and-flush` takes at most 4096 bytes a call.
    const WRITE_CHUNK: usize = 4096;
    /// How much one `blocking-read` asks for.
    const READ_CHUNK: u64 = 64 * 1024;

    fn from_code(code: &t::ErrorCode) -> HttpError {
        let (kind, detail) = describe(code);
        HttpError::new(kind, detail)
    }

    /// A stream's failure: the HTTP error code behind it when the host
    /// gives one, else its debug text.
    fn from_stream(e: StreamError, kind: ErrorKind, what: &str) -> HttpError {
        match e {
            StreamError::Closed => HttpError::new(kind, format!("{what}: the stream closed")),
            StreamError::LastOperationFailed(io) => match t::http_error_code(&io) {
                Some(code) => from_code(&code),
                None => HttpError::new(kind, format!("{what}: {}", io.to_debug_string())),
            },
        }
    }

    fn invalid(what: impl Into<String>) -> HttpError {
        HttpError::new(ErrorKind::Invalid, what)
    }

    fn method(m: &str) -> t::Method {
        match m {
            "GET" => t::Method::Get,
            "HEAD" => t::Method::Head,
            "POST" => t::Method::Post,
            "PUT" => t::Method::Put,
            "DELETE" => t::Method::Delete,
            "CONNECT" => t::Method::Connect,
            "OPTIONS" => t::Method::Options,
            "TRACE" => t::Method::Trace,
            "PATCH" => t::Method::Patch,
            other => t::Method::Other(other.to_string()),
        }
    }

    /// Waits for the response head.
    fn wait(future: &t::FutureIncomingResponse) -> Result<t::IncomingResponse, HttpError> {
        loop {
            match future.get() {
                Some(Ok(Ok(resp))) => return Ok(resp),
                Some(Ok(Err(code))) => return Err(from_code(&code)),
                Some(Err(())) => {
                    return Err(HttpError::new(
                        ErrorKind::Transport,
                        "the response was already taken",
                    ))
                }
                None => future.subscribe().block(),
            }
        }
    }

    pub(super) fn send(req: &Request, url: &Url) -> Result<Response, HttpError> {
        let headers = t::Fields::new();
        for (name, value) in &req.headers {
            headers.append(name, value.as_bytes()).map_err(|e| {
                invalid(match e {
                    t::HeaderError::InvalidSyntax => format!("header {name:?} is malformed"),
                    t::HeaderError::Forbidden => format!("header {name:?} is forbidden"),
                    t::HeaderError::Immutable => format!("header {name:?} cannot be set"),
                })
            })?;
        }
        let request = t::OutgoingRequest::new(headers);
        request
            .set_method(&method(&req.method))
            .map_err(|()| invalid(format!("method {:?} is malformed", req.method)))?;
        let scheme = match &url.scheme {
            Scheme::Http => t::Scheme::Http,
            Scheme::Https => t::Scheme::Https,
            Scheme::Other(s) => t::Scheme::Other(s.clone()),
        };
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| invalid("the scheme was refused"))?;
        request
            .set_authority(Some(&url.authority))
            .map_err(|()| invalid(format!("authority {:?} was refused", url.authority)))?;
        request
            .set_path_with_query(Some(&url.path_with_query))
            .map_err(|()| invalid(format!("path {:?} was refused", url.path_with_query)))?;
        let body = request
            .body()
            .map_err(|()| invalid("the request has no body"))?;

        // Hand the request over first, then stream the body into it.
        let future = outgoing_handler::handle(request, None).map_err(|code| from_code(&code))?;
        let written = (|| {
            let stream = body
                .write()
                .map_err(|()| HttpError::new(ErrorKind::Transport, "the request body is gone"))?;
            for chunk in req.body.chunks(WRITE_CHUNK) {
                stream.blocking_write_and_flush(chunk).map_err(|e| {
                    from_stream(e, ErrorKind::Transport, "writing the request body")
                })?;
            }
            drop(stream);
            t::OutgoingBody::finish(body, None).map_err(|code| from_code(&code))
        })();
        if let Err(write_error) = written {
            // A refused connection also breaks the body: say that instead.
            return Err(wait(&future).err().unwrap_or(write_error));
        }

        let response = wait(&future)?;
        let status = response.status();
        let headers = {
            let fields = response.headers();
            let entries = fields.entries();
            entries
                .into_iter()
                .map(|(n, v)| {
                    (
                        n.to_ascii_lowercase(),
                        String::from_utf8_lossy(&v).into_owned(),
                    )
                })
                .collect()
        };
        let incoming = response
            .consume()
            .map_err(|()| HttpError::new(ErrorKind::Transport, "the response body is gone"))?;
        let stream = incoming
            .stream()
            .map_err(|()| HttpError::new(ErrorKind::Transport, "the response body is gone"))?;
        let mut body = Vec::new();
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(e) => {
                    return Err(from_stream(
                        e,
                        ErrorKind::Transport,
                        "reading the response body",
                    ))
                }
            }
        }
        drop(stream);
        drop(t::IncomingBody::finish(incoming));
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// Natively: the responder of this thread.
#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{HttpError, Request, Response, Url};

    pub(super) fn send(req: &Request, _url: &Url) -> Result<Response, HttpError> {
        super::native::respond(req)
    }
}

/// Native stand-in for `wasi:http` (not in a component): tests answer the
/// plugin's requests themselves.
///
/// ```
/// use weft_plugin_sdk::http::{self, native, ErrorKind, HttpError, Response};
///
/// native::set_responder(|req| match (req.method(), req.url()) {
///     ("GET", "http://ray:8265/api/jobs/wf-0") => Ok(Response::new(200, r#"{"status":"RUNNING"}"#)),
///     _ => Err(HttpError::new(ErrorKind::Denied, "HTTP request denied")),
/// });
/// let resp = http::Request::get("http://ray:8265/api/jobs/wf-0").send().unwrap();
/// assert_eq!(resp.status, 200);
/// let e = http::Request::get("http://example.com/").send().unwrap_err();
/// assert_eq!(e.to_string(), "GET http://example.com/: HTTP request denied");
/// native::clear_responder();
/// ```
#[cfg(not(target_arch = "wasm32"))]
pub mod native {
    use std::cell::RefCell;

    use super::{ErrorKind, HttpError, Request, Response};

    type Responder = Box<dyn FnMut(&Request) -> Result<Response, HttpError>>;

    thread_local! {
        static RESPONDER: RefCell<Option<Responder>> = RefCell::new(None);
    }

    /// Answers this thread's requests with `f` from now on.
    pub fn set_responder(f: impl FnMut(&Request) -> Result<Response, HttpError> + 'static) {
        RESPONDER.with(|r| *r.borrow_mut() = Some(Box::new(f)));
    }

    /// Removes this thread's responder: requests fail again.
    pub fn clear_responder() {
        RESPONDER.with(|r| *r.borrow_mut() = None);
    }

    pub(super) fn respond(req: &Request) -> Result<Response, HttpError> {
        // Taken out while it runs, so a responder may itself send.
        let taken = RESPONDER.with(|r| r.borrow_mut().take());
        let Some(mut f) = taken else {
            return Err(HttpError::new(
                ErrorKind::Transport,
                "no wasi:http outside a component: install a responder with http::native::set_responder",
            ));
        };
        let out = f(req);
        RESPONDER.with(|r| {
            let mut slot = r.borrow_mut();
            if slot.is_none() {
                *slot = Some(f);
            }
        });
        out
    }
}

#[cfg(test)]
mod tests;
