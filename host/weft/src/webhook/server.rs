//! The webhook over HTTPS (the API server calls webhooks only over TLS):
//! `POST /validate` takes an AdmissionReview v1 and answers one. Its
//! certificate is the operator's (`tls.crt`/`tls.key` in the certificate
//! directory, e.g. from cert-manager) or, like propeller's init-certs, one
//! made here at start with its own CA (`ca.crt`, for the webhook
//! configuration's caBundle).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use super::Validator;

/// Where Workflows are validated.
pub const VALIDATE: &str = "/validate";
/// Where task pods get their secrets.
pub const MUTATE_PODS: &str = "/mutate-pods";

/// Largest AdmissionReview read (kube-apiserver's own request limit is 3 MiB).
const MAX_BODY: usize = 4 << 20;

/// The serving certificate, its key and the CA that signed it (PEM).
pub struct Certificates {
    /// The certificate chain.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// The CA for caBundle (the chain itself when the operator gave no ca.crt).
    pub ca: String,
}

/// `dir/tls.crt` and `dir/tls.key` when both exist; else a new CA and a
/// certificate for `names` (DNS names or IP addresses), written to `dir`.
pub fn certificates(dir: &Path, names: &[String]) -> anyhow::Result<Certificates> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    if let (Ok(cert), Ok(key)) = (read("tls.crt"), read("tls.key")) {
        let ca = read("ca.crt").unwrap_or_else(|_| cert.clone());
        return Ok(Certificates { cert, key, ca });
    }
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "weft webhook CA");
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(names.to_vec())?.signed_by(&key, &issuer)?;
    let made = Certificates {
        cert: cert.pem(),
        key: key.serialize_pem(),
        ca: ca.pem(),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (f, text) in [
        ("tls.crt", &made.cert),
        ("tls.key", &made.key),
        ("ca.crt", &made.ca),
    ] {
        std::fs::write(dir.join(f), text)
            .with_context(|| format!("writing {}/{f}", dir.display()))?;
    }
    tracing::info!(dir = %dir.display(), ?names, "webhook certificate made (ca.crt is the caBundle)");
    Ok(made)
}

fn tls(certs: &Certificates) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    let chain = CertificateDer::pem_slice_iter(certs.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("webhook certificate")?;
    let key = PrivateKeyDer::from_pem_slice(certs.key.as_bytes()).context("webhook key")?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("webhook certificate and key")?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serves `POST /validate` on `addr` until the runtime stops; returns the
/// bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    certs: &Certificates,
    validator: Arc<Validator>,
) -> anyhow::Result<SocketAddr> {
    let acceptor = tls(certs)?;
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
    tracing::info!(addr = %local, "serving the admission webhook (POST /validate)");
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
                MUTATE_PODS => super::pod_secrets::review(review),
                _ => validator.review(review),
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
