//! The kubelet endpoint the API server proxies `pods/log` to:
//! `GET /containerLogs/{namespace}/{pod}/{container}` with kubectl's query
//! (`follow`, `tailLines`, `limitBytes`, `previous`), over TLS, answered from
//! the files the pod runs write (`weft_cluster::logs`, as the dev cluster's
//! API answers them).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use weft_cluster::logs;

use super::{KubeHost, NodeConfig};
use crate::admin::TlsConfig;
use crate::admin::tls::{incoming, server_config};

type Body = BoxBody<Bytes, Infallible>;

/// Starts serving; returns the port bound.
pub(super) async fn serve(cfg: &NodeConfig, host: Arc<KubeHost>) -> anyhow::Result<u16> {
    let (cert, key) = match &cfg.tls {
        Some(pair) => pair.clone(),
        None => self_signed(cfg)?,
    };
    let tls = TlsConfig {
        cert,
        key,
        client_ca: cfg.client_ca.clone(),
        client_auth_optional: false,
    };
    let config = server_config(&tls).context("the node's kubelet endpoint")?;
    let listener = TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("node: cannot listen on {}", cfg.listen))?;
    let port = listener.local_addr()?.port();
    let mut conns = Box::pin(incoming(listener, config));
    tokio::spawn(async move {
        while let Some(conn) = conns.next().await {
            let Ok(stream) = conn else { continue };
            let host = host.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let host = host.clone();
                    async move { Ok::<_, Infallible>(answer(req, &host)) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(port)
}

/// A serving certificate for 127.0.0.1 made on first start and kept in the
/// data directory (the API server must then not be told to verify it).
fn self_signed(cfg: &NodeConfig) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let dir = cfg.data_dir.join("pki");
    let (crt, key) = (dir.join("kubelet.crt"), dir.join("kubelet.key"));
    if crt.is_file() && key.is_file() {
        return Ok((crt, key));
    }
    std::fs::create_dir_all(&dir)?;
    let names = vec![
        "127.0.0.1".to_string(),
        "localhost".into(),
        cfg.name.clone(),
    ];
    let made = rcgen::generate_simple_self_signed(names)?;
    std::fs::write(&crt, made.cert.pem())?;
    std::fs::write(&key, made.signing_key.serialize_pem())?;
    Ok((crt, key))
}

fn reply(code: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(http_body_util::Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = code;
    r
}

fn answer(req: Request<Incoming>, host: &KubeHost) -> Response<Body> {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["containerLogs", ns, pod, container] = parts[..] else {
        return reply(
            StatusCode::NOT_FOUND,
            format!("weft node serves GET /containerLogs/NS/POD/CONTAINER, not {path}\n"),
        );
    };
    let Some(pod_obj) = host.pod(ns, pod) else {
        return reply(
            StatusCode::NOT_FOUND,
            format!("pod {ns}/{pod} is not on node {}\n", host.name),
        );
    };
    let mut q: HashMap<String, String> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    q.insert("container".into(), container.to_string());
    let read = match logs::read(&host.data_dir, &pod_obj, &q) {
        Ok(r) => r,
        Err(e) => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_REQUEST);
            return reply(code, e.message);
        }
    };
    if read.follow.is_none() {
        return reply(StatusCode::OK, String::from_utf8_lossy(&read.first).into());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let live = {
        let seen = host.live.clone();
        move |p: &std::path::Path| seen.lock().unwrap_or_else(|e| e.into_inner()).contains(p)
    };
    // The node never stops a follower but by closing the connection.
    let (_keep, shutdown) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _keep = _keep;
        logs::follow(read, live, tx, shutdown).await;
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx).map(|b| Ok(Frame::data(b)));
    Response::new(http_body_util::BodyExt::boxed(StreamBody::new(frames)))
}
