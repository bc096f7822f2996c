//! The console's files, built from `host/weft/console` by `build.rs` and
//! embedded in the binary, served on the admin port beside the gRPC
//! services: a plain GET that is not gRPC gets a file, or `index.html` for
//! any other path (the console routes in the browser, so a deep link such
//! as `/workflows/default/diamond` loads the app). Nothing is fetched from
//! anywhere else.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response, StatusCode, header};
use tonic::body::Body;

use crate::admin::identity::{Authenticator, login};

#[derive(rust_embed::RustEmbed)]
#[folder = "$OUT_DIR/console"]
struct Files;

/// The response for `path`: the file, else the app's `index.html`.
fn respond(path: &str) -> Response<Body> {
    let path = path.trim_start_matches('/');
    let (file, name) = match Files::get(path).filter(|_| !path.is_empty()) {
        Some(f) => (Some(f), path),
        None => (Files::get("index.html"), "index.html"),
    };
    let Some(file) = file else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::new(
                "the console was not built into this binary\n".to_string(),
            ))
            .expect("a valid response");
    };
    // Hashed asset names never change content; index.html must be re-read
    // so a new build's assets are found.
    let cache = if name.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    Response::builder()
        .header(header::CONTENT_TYPE, file.metadata.mimetype())
        .header(header::CACHE_CONTROL, cache)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        // The page may talk to its own origin only.
        .header(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
        )
        .body(Body::new(http_body_util::Full::new(bytes::Bytes::from(
            file.data.into_owned(),
        ))))
        .expect("a valid response")
}

/// Whether a request is for the console rather than a gRPC service.
fn is_console(req: &Request<impl Sized>) -> bool {
    let grpc = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/grpc"));
    !grpc && (req.method() == Method::GET || req.method() == Method::HEAD)
}

/// What the sign-in pages need of a request.
fn auth_request<B>(req: &Request<B>, tls: bool) -> login::AuthRequest {
    let header = |h| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    login::AuthRequest {
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or_default().to_string(),
        cookie: header(header::COOKIE),
        host: header(header::HOST).or_else(|| req.uri().authority().map(|a| a.to_string())),
        tls,
    }
}

/// A layer that answers console requests (and the sign-in pages under
/// `/auth/`, see [`login`]) and passes the rest on.
#[derive(Clone, Default)]
pub struct ConsoleLayer {
    /// The authenticators, for the sign-in pages.
    pub auth: Option<Arc<Authenticator>>,
    /// Whether the server speaks TLS (the sign-in's redirect URL).
    pub tls: bool,
}

impl<S> tower::Layer<S> for ConsoleLayer {
    type Service = Console<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Console {
            inner,
            auth: self.auth.clone(),
            tls: self.tls,
        }
    }
}

/// See [`ConsoleLayer`].
#[derive(Clone)]
pub struct Console<S> {
    inner: S,
    auth: Option<Arc<Authenticator>>,
    tls: bool,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> tower::Service<Request<B>> for Console<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    R: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    R::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if is_console(&req) && req.uri().path().starts_with("/auth/") {
            let r = auth_request(&req, self.tls);
            let auth = self.auth.clone();
            return Box::pin(async move { Ok(login::route(auth, r).await) });
        }
        if is_console(&req) {
            let resp = respond(req.uri().path());
            return Box::pin(async move { Ok(resp) });
        }
        let fut = self.inner.call(req);
        Box::pin(async move { Ok(fut.await?.map(Body::new)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_links_get_the_app_and_assets_their_type() {
        let index = respond("/workflows/default/diamond");
        assert_eq!(index.status(), StatusCode::OK);
        assert_eq!(index.headers()[header::CONTENT_TYPE], "text/html");
        let root = respond("/");
        assert_eq!(root.headers()[header::CONTENT_TYPE], "text/html");
        let js = Files::iter()
            .find(|f| f.ends_with(".js"))
            .expect("the build has a script");
        let resp = respond(&format!("/{js}"));
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/javascript");
    }
}
