//! Why a request failed: [`HttpError`] and its [`ErrorKind`], and the
//! `wasi:http` error codes as the host reports them.

use std::fmt;

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

    pub(super) fn in_request(mut self, request: String) -> Self {
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
pub(super) fn describe(
    code: &crate::wit::webapi::wasi::http::types::ErrorCode,
) -> (ErrorKind, String) {
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
