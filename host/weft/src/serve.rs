//! `/metrics`, `/healthz` and `/readyz` on a small hyper server: what a
//! Deployment's probes and a Prometheus scrape need.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Whether the process is ready to serve (plugins loaded, controller started).
#[derive(Debug, Default)]
pub struct Readiness(AtomicBool);

impl Readiness {
    /// Mark ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, ready: &Readiness) -> Response<Full<Bytes>> {
    let (code, ctype, body) = match req.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" | "/livez" => (StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" if ready.is_ready() => (StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready\n".into(),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    };
    Response::builder()
        .status(code)
        .header("content-type", ctype)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// Serves until the runtime stops; returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<Readiness>,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (metrics, ready) = (metrics.clone(), ready.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let r = respond(&req, &metrics, &ready);
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(local)
}
