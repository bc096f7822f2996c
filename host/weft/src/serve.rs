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

/// A part that may be degraded without making the process unready (the
/// execution history): `Err(why)` is shown in `/readyz`'s body.
pub type Detail = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Whether the process is ready to serve (plugins loaded, controller
/// started), and the details of parts that may be degraded meanwhile.
#[derive(Default)]
pub struct Readiness {
    ready: AtomicBool,
    details: std::sync::Mutex<Vec<(String, Detail)>>,
}

impl Readiness {
    /// Mark ready.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Adds a detail `/readyz` reports (`name: degraded: why`) while it
    /// is `Err`, with a 200 all the same: the process serves its purpose.
    pub fn add_detail(&self, name: &str, detail: Detail) {
        let mut d = self.details.lock().unwrap_or_else(|e| e.into_inner());
        d.push((name.to_string(), detail));
    }

    /// `ok`, then a line per degraded part.
    fn body(&self) -> String {
        let d = self.details.lock().unwrap_or_else(|e| e.into_inner());
        let mut body = String::from("ok\n");
        for (name, check) in d.iter() {
            if let Err(why) = check() {
                body.push_str(&format!("{name}: degraded: {why}\n"));
            }
        }
        body
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
        "/readyz" if ready.is_ready() => (StatusCode::OK, "text/plain", ready.body()),
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
