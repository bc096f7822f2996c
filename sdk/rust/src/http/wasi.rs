//! The component's client: `wasi:http/outgoing-handler`, blocking on its
//! pollables.

use super::error::describe;
use super::{ErrorKind, HttpError, Request, Response, Scheme, Url};
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
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| from_stream(e, ErrorKind::Transport, "writing the request body"))?;
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
