//! One call to one webhook: an AdmissionReview POSTed over TLS to the
//! configuration's `url` or `service`, verified against its `caBundle`, under
//! its timeout. Errors are worded as client-go words them (`Post "URL": ...`),
//! since kube-apiserver puts them in the message a user reads.
//!
//! A `service` reference resolves as the pods of the dev cluster live: on
//! this machine's network, at the Service port's `targetPort`, while the
//! certificate is checked against `NAME.NAMESPACE.svc`, as a real API server
//! checks it.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;

use crate::store::Store;

/// Largest answer read from a webhook.
const MAX_ANSWER: usize = 4 << 20;

/// Where a webhook is, resolved for this call.
pub(crate) struct Endpoint {
    /// The URL as the configuration names it, for messages.
    pub(crate) url: String,
    connect: String,
    server_name: String,
    path: String,
}

impl Endpoint {
    /// From a webhook's `clientConfig`; `timeout` goes into the query as
    /// kube-apiserver puts it there.
    pub(crate) fn resolve(
        store: &Store,
        client_config: &Value,
        timeout: Duration,
    ) -> Result<Self, String> {
        let query = format!("timeout={}s", timeout.as_secs());
        if let Some(url) = client_config["url"].as_str() {
            let uri: hyper::Uri = url.parse().map_err(|e| format!("parse {url:?}: {e}"))?;
            let host = uri
                .host()
                .unwrap_or("")
                .trim_matches(['[', ']'])
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let path = uri.path();
            let path = match uri.query() {
                Some(q) => format!("{path}?{q}&{query}"),
                None => format!("{path}?{query}"),
            };
            let connect = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            return Ok(Endpoint {
                url: format!("https://{connect}{path}"),
                connect,
                server_name: host,
                path,
            });
        }
        let svc = &client_config["service"];
        let (ns, name) = (
            svc["namespace"].as_str().unwrap_or(""),
            svc["name"].as_str().unwrap_or(""),
        );
        let port = svc["port"].as_u64().unwrap_or(443);
        let path = format!("{}?{query}", svc["path"].as_str().unwrap_or("/"));
        let host = format!("{name}.{ns}.svc");
        let url = format!("https://{host}:{port}{path}");
        let service = store
            .get("/services", ns, name)
            .ok_or_else(|| format!("Post {url:?}: service \"{name}\" not found"))?;
        let target = service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_u64() == Some(port))
            .map(|p| {
                p["targetPort"]
                    .as_u64()
                    .or(p["port"].as_u64())
                    .unwrap_or(port)
            })
            .ok_or_else(|| format!("Post {url:?}: service \"{name}\" has no port {port}"))?;
        Ok(Endpoint {
            url,
            connect: format!("127.0.0.1:{target}"),
            server_name: host,
            path,
        })
    }
}

/// POSTs `review` and returns the answer's JSON.
pub(crate) async fn post(
    ep: &Endpoint,
    ca_bundle: &str,
    review: &Value,
    timeout: Duration,
) -> Result<Value, String> {
    let call = async {
        let tls = connector(ca_bundle)?;
        let tcp = TcpStream::connect(&ep.connect)
            .await
            .map_err(|e| format!("dial tcp {}: connect: {}", ep.connect, plain(&e)))?;
        let name = ServerName::try_from(ep.server_name.clone())
            .map_err(|e| format!("invalid server name {:?}: {e}", ep.server_name))?;
        let stream = tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: failed to verify certificate: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = hyper::Request::post(&ep.path)
            .header(hyper::header::HOST, &ep.server_name)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(review.to_string())))
            .map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "the server responded with {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(r) => r.map_err(|e| format!("Post {:?}: {e}", ep.url)),
        Err(_) => Err(format!("Post {:?}: context deadline exceeded", ep.url)),
    }
}

/// `connection refused`, without the OS error number.
fn plain(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_lowercase(),
        None => s,
    }
}

/// A TLS client that trusts only the certificates of `ca_bundle` (base64
/// of PEM, as the configuration's `caBundle` holds them).
fn connector(ca_bundle: &str) -> Result<tokio_rustls::TlsConnector, String> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle.trim())
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
