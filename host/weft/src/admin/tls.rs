//! TLS on the admin port, for gRPC clients and for browsers alike.
//!
//! Done here rather than by tonic's `Server::tls_config`, which offers
//! only `h2` by ALPN: rustls then ends the handshake of every client that
//! offers ALPN without `h2` with a `no_application_protocol` alert. That
//! is `curl --http1.1`, the HTTP/1.1 clients of most languages, and the
//! Ingress controllers and proxies that re-encrypt to their backend over
//! HTTP/1.1, which the console's files and gRPC-Web calls need nothing
//! more than. So this acceptor offers `h2` first (browsers and gRPC
//! clients take it, and a console tab's streams then share one
//! connection) and `http/1.1` second; the server speaks both on every
//! connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;

use super::TlsConfig;

/// The protocols offered by ALPN, the server's preference first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// How long a client may take over its handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepted connections waiting for the server to take them.
const BACKLOG: usize = 64;

/// The rustls server configuration for `tls`: its certificate chain and
/// key, client certificates checked against `clientCa` when given, and
/// both HTTP versions offered by ALPN.
pub fn server_config(tls: &TlsConfig) -> anyhow::Result<Arc<ServerConfig>> {
    let read = |p: &Path, what: &str| {
        std::fs::read(p).with_context(|| format!("admin TLS {what} {}: cannot read", p.display()))
    };
    let certs = |p: &Path, what: &str| -> anyhow::Result<Vec<CertificateDer<'static>>> {
        let certs = CertificateDer::pem_slice_iter(&read(p, what)?)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("admin TLS {what} {}: not PEM", p.display()))?;
        anyhow::ensure!(
            !certs.is_empty(),
            "admin TLS {what} {}: no certificate in it",
            p.display()
        );
        Ok(certs)
    };
    let chain = certs(&tls.cert, "certificate")?;
    let key = PrivateKeyDer::from_pem_slice(&read(&tls.key, "key")?)
        .with_context(|| format!("admin TLS key {}: no private key in it", tls.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("admin TLS: protocol versions")?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certs(ca, "client CA")? {
                roots
                    .add(cert)
                    .with_context(|| format!("admin TLS client CA {}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            let verifier = if tls.client_auth_optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().context("admin TLS client CA")?)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("admin TLS: the certificate and key do not go together")?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The TLS connections made to `listener`. Each handshake runs in a task
/// of its own, so a slow or stalled client holds up nobody else; a failed
/// one is logged and dropped. Accepting stops when the stream is dropped
/// (the server shut down), which closes the listening socket.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
) -> impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(BACKLOG);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: the server logs and goes on.
                    if tx.send(Err(e)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "admin API: TLS handshake failed")
                    }
                    Err(_) => tracing::debug!(%peer, "admin API: TLS handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests;
