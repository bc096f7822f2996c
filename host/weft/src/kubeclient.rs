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
//! shared by a manager's clients. Waiting happens in `poll_ready`, behind
//! kube's request buffer: callers queue as they do in client-go.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use governor::clock::Clock;
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
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    metrics: Arc<Metrics>,
    /// The API server's `host:port` (the `host` label).
    host: Arc<str>,
}

impl Throttle {
    /// A layer with `limits`, counting into `metrics`.
    pub fn new(limits: ApiLimits, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        Ok(Throttle {
            limiter: limits.limiter()?.map(Arc::new),
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
            sleep: None,
            token: false,
            waiting_since: None,
        }
    }
}

/// A service whose requests each take a token first.
pub struct Throttled<S> {
    inner: S,
    throttle: Throttle,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token taken for the next call.
    token: bool,
    /// When the next call started waiting for its token.
    waiting_since: Option<Instant>,
}

impl<S> Throttled<S> {
    /// Ready once a token is held (at once without a limit).
    fn poll_token(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(limiter) = &self.throttle.limiter else {
            return Poll::Ready(());
        };
        self.waiting_since.get_or_insert_with(Instant::now);
        while !self.token {
            if let Some(sleep) = &mut self.sleep {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
            }
            match limiter.check() {
                Ok(()) => self.token = true,
                Err(not_until) => {
                    let wait = not_until.wait_time_from(limiter.clock().now());
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
        }
        Poll::Ready(())
    }
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
        ready!(self.poll_token(cx));
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        self.token = false;
        let method = req.method().to_string();
        let host = self.throttle.host.clone();
        let metrics = self.throttle.metrics.clone();
        if let Some(since) = self.waiting_since.take() {
            metrics
                .standard
                .rate_limited(&method, &host, since.elapsed());
        }
        let started = Instant::now();
        let sent = self.inner.call(req);
        Box::pin(async move {
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
