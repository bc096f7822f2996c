//! Response bodies: the type every handler answers with and the text
//! helpers. A leaf, so the log endpoint and the server both use it.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode, header};
use tokio::sync::mpsc;

pub(crate) type Body = BoxBody<Bytes, Infallible>;

pub(crate) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// A streaming text body fed from a channel (used by `pods/log`).
pub(crate) fn text_stream(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(StreamBody::new(stream).boxed())
        .expect("static response parts")
}

/// A whole text body.
pub(crate) fn text(b: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(full(b))
        .expect("static response parts")
}
