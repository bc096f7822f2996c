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

mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
#[cfg(target_arch = "wasm32")]
mod wasi;

pub use error::{ErrorKind, HttpError};
#[cfg(target_arch = "wasm32")]
use wasi as imp;

/// Natively: the responder of this thread.
#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{HttpError, Request, Response, Url};

    pub(super) fn send(req: &Request, _url: &Url) -> Result<Response, HttpError> {
        super::native::respond(req)
    }
}

#[cfg(test)]
mod tests;
