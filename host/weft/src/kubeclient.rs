//! The controller's Kubernetes clients as client-go builds them: every
//! request waits for a token of one client-side bucket (`--kube-api-qps`
//! refill, `--kube-api-burst` size; governor's GCRA) and is counted in
//! client-go's `rest_client_*` metrics. A real API server sheds load
//! above its max-in-flight limits (400 reads, 200 writes by default) for
//! every client at once; a controller that throttles itself keeps a burst
//! of Workflows from crowding out kubectl, the scheduler and the kubelets.
//!
//! The bucket is shared by every client the process makes (its own and
//! the ones impersonating plugins), as one client-go rate limiter is
//! shared by a manager's clients. Unlike client-go, its tokens go out in
//! two lanes ([`crate::lanes`]): creates, which start work, pass the status
//! writes queued before them.

mod tokens;

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::{Request, Response};
use kube::client::{Body, ClientBuilder};
use tower::{BoxError, Layer, Service};

use crate::metrics::Metrics;

/// kube-apiserver-friendly defaults: 100 requests a second with bursts
/// of 200 keep a controller's in-flight requests (at 10-50 ms each) to a
/// handful, far below the server's 200 mutating / 400 read slots.
pub const DEFAULT_QPS: f32 = 100.0;
/// See [`DEFAULT_QPS`].
pub const DEFAULT_BURST: u32 = 200;

/// The client-side limit: `qps` tokens a second into a bucket of `burst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApiLimits {
    /// Sustained requests a second (0: no limit).
    pub qps: f32,
    /// Requests that may go at once after a quiet spell.
    pub burst: u32,
}

impl ApiLimits {
    /// The bucket, or `None` when unlimited.
    fn limiter(&self) -> anyhow::Result<Option<DefaultDirectRateLimiter>> {
        if self.qps <= 0.0 {
            return Ok(None);
        }
        if !self.qps.is_finite() {
            anyhow::bail!(
                "--kube-api-qps {}: not a number of requests a second",
                self.qps
            );
        }
        let burst = NonZeroU32::new(self.burst).ok_or_else(|| {
            anyhow::anyhow!("--kube-api-burst 0: must be at least 1 when --kube-api-qps is set")
        })?;
        let period = Duration::from_secs_f64(1.0 / f64::from(self.qps));
        let quota = Quota::with_period(period)
            .ok_or_else(|| anyhow::anyhow!("--kube-api-qps {}: too high", self.qps))?
            .allow_burst(burst);
        Ok(Some(RateLimiter::direct(quota)))
    }
}

/// The layer every controller client gets: one shared bucket, metrics.
#[derive(Clone)]
pub struct Throttle {
    tokens: Option<Arc<tokens::Tokens>>,
    metrics: Arc<Metrics>,
    /// The API server's `host:port` (the `host` label).
    host: Arc<str>,
}

impl Throttle {
    /// A layer with `limits`, counting into `metrics`.
    pub fn new(limits: ApiLimits, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        Ok(Throttle {
            tokens: limits.limiter()?.map(|l| Arc::new(tokens::Tokens::new(l))),
            metrics,
            host: Arc::from(""),
        })
    }

    /// A client for `config` behind this layer.
    pub fn client(&self, config: kube::Config) -> Result<kube::Client, kube::Error> {
        let host = config.cluster_url.authority().map(|a| a.to_string());
        let layer = Throttle {
            host: Arc::from(host.unwrap_or_default()),
            ..self.clone()
        };
        Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;

    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner,
            throttle: self.clone(),
        }
    }
}

/// A service whose requests each take a token before they are sent.
pub struct Throttled<S> {
    inner: S,
    throttle: Throttle,
}

type Pending<B> = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

impl<S, B> Service<Request<Body>> for Throttled<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pending<B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    /// The inner call only builds its future: nothing is sent until it is
    /// polled, after the token.
    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let lane = tokens::lane_of(&req);
        let method = req.method().to_string();
        let host = self.throttle.host.clone();
        let metrics = self.throttle.metrics.clone();
        let tokens = self.throttle.tokens.clone();
        let sent = self.inner.call(req);
        Box::pin(async move {
            if let Some(tokens) = tokens {
                let since = Instant::now();
                tokens.take(lane).await;
                metrics
                    .standard
                    .rate_limited(&method, &host, since.elapsed());
            }
            let started = Instant::now();
            let result = sent.await.map_err(Into::into);
            let code = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics
                .standard
                .rest_request(&code, &method, &host, started.elapsed());
            result
        })
    }
}
