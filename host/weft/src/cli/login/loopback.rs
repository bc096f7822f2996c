//! The loopback redirect (RFC 8252): a one-request HTTP server on
//! 127.0.0.1 that the provider sends the browser back to with the code.

use std::convert::Infallible;
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::admin::identity::Oidc;
use crate::admin::identity::login::Tokens;

/// How long the CLI waits for the browser.
const WAIT: Duration = Duration::from_secs(300);

/// Prints the URL to open and waits for the provider's redirect.
pub async fn browser(oidc: &Oidc, scopes: &[String]) -> anyhow::Result<Tokens> {
    let d = oidc.discovery().await?;
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot listen on a loopback port for the sign-in's redirect")?;
    let redirect = format!(
        "http://127.0.0.1:{}/callback",
        listener.local_addr()?.port()
    );
    let (url, pending) = super::authorize_url(&d, oidc, scopes, &redirect)?;
    eprintln!("To sign in, open this URL in a browser:\n{url}");
    let (tx, mut rx) = mpsc::channel::<Vec<(String, String)>>(1);
    let server = tokio::spawn(serve(listener, tx));
    let query = tokio::time::timeout(WAIT, rx.recv())
        .await
        .context("no sign-in within 5 minutes")?
        .context("the loopback server stopped")?;
    server.abort();
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.clone());
    if let Some(error) = get("error") {
        bail!(
            "the identity provider refused the sign-in: {error} {}",
            get("error_description").unwrap_or_default()
        );
    }
    if get("state").as_deref() != Some(pending.state.as_str()) {
        bail!("the redirect's state does not match this sign-in (another browser tab?)");
    }
    let code = get("code").context("the provider's redirect carried no code")?;
    super::exchange(oidc, pending, code).await
}

/// Answers requests to `/callback` until one carries a code or an error.
async fn serve(listener: TcpListener, tx: mpsc::Sender<Vec<(String, String)>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let tx = tx.clone();
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let tx = tx.clone();
            async move { Ok::<_, Infallible>(answer(req, &tx).await) }
        });
        tokio::spawn(async move {
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn answer(
    req: Request<Incoming>,
    tx: &mpsc::Sender<Vec<(String, String)>>,
) -> Response<Full<Bytes>> {
    let query: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let done =
        req.uri().path() == "/callback" && query.iter().any(|(k, _)| k == "code" || k == "error");
    let body = if done {
        let _ = tx.send(query).await;
        "Signed in to Weft: you can close this tab and go back to the terminal.\n"
    } else {
        "This is weft login's redirect page; it waits for the identity provider.\n"
    };
    Response::new(Full::new(Bytes::from(body)))
}
