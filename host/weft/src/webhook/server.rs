//! The webhook over HTTPS (the API server calls webhooks only over TLS):
//! `POST /validate` and `POST /mutate-pods` take an AdmissionReview v1 and
//! answer one. The certificate comes from [`super::certs`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use super::Validator;
use super::certs::Resolver;

/// Where Workflows are validated.
pub const VALIDATE: &str = "/validate";
/// Where task pods get their secrets.
pub const MUTATE_PODS: &str = "/mutate-pods";

/// Largest AdmissionReview read (kube-apiserver's own request limit is 3 MiB).
const MAX_BODY: usize = 4 << 20;

fn tls(resolver: Arc<Resolver>) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serves `POST /validate` and `POST /mutate-pods` on `addr` until the
/// runtime stops, with the certificate `resolver` holds at each handshake;
/// returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    resolver: Arc<Resolver>,
    validator: Arc<Validator>,
) -> anyhow::Result<SocketAddr> {
    let acceptor = tls(resolver)?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("webhook: cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, validator) = (acceptor.clone(), validator.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req| {
                    let validator = validator.clone();
                    async move { Ok::<_, Infallible>(respond(req, &validator).await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    tracing::info!(addr = %local, "serving the admission webhook (POST /validate, /mutate-pods)");
    Ok(local)
}

async fn respond(req: Request<Incoming>, validator: &Validator) -> Response<Full<Bytes>> {
    let reply = |code: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = code;
        r.headers_mut()
            .insert("content-type", "application/json".parse().expect("static"));
        r
    };
    let path = req.uri().path().to_string();
    if !matches!(path.as_str(), VALIDATE | MUTATE_PODS) || req.method() != hyper::Method::POST {
        return reply(
            StatusCode::NOT_FOUND,
            format!(r#"{{"error": "POST {VALIDATE} or {MUTATE_PODS}"}}"#),
        );
    }
    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(r#"{{"error": "{e}"}}"#),
            );
        }
    };
    match serde_json::from_slice(&body) {
        Ok(review) => {
            let answer = match path.as_str() {
                MUTATE_PODS => crate::pod_secrets::review(review),
                _ => validator.review(review).await,
            };
            reply(
                StatusCode::OK,
                serde_json::to_string(&answer).unwrap_or_default(),
            )
        }
        Err(e) => reply(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": format!("not an AdmissionReview v1: {e}")}).to_string(),
        ),
    }
}
