//! The client-side bucket's tokens, handed out in two lanes
//! ([`crate::lanes`]): creates, which start work, pass the status writes,
//! reads and Events queued before them. Every request still takes one
//! token of the same bucket: the rate and burst the API server sees do not
//! change.

use std::sync::{Arc, OnceLock};

use governor::DefaultDirectRateLimiter;
use governor::clock::Clock;
use http::header::CONTENT_TYPE;
use http::{Method, Request};
use tokio::sync::{mpsc, oneshot};

pub use crate::lanes::Lane;
use crate::lanes::Queues;

/// The lane of a request. Creates start work: a `POST` (except an
/// Event, which reports it) or a server-side apply, which is how the
/// controller creates children (status writes are merge patches of
/// `/status`). A Lease's writes go first too: a leader whose renewal
/// waited behind a burst's status writes would lose its Lease.
pub fn lane_of<B>(req: &Request<B>) -> Lane {
    if req.uri().path().starts_with("/apis/coordination.k8s.io/") {
        return Lane::Start;
    }
    let path = req.uri().path().trim_end_matches('/');
    let resource = path.rsplit('/').next();
    let apply = req.method() == Method::PATCH
        && req.headers().get(CONTENT_TYPE).map(|v| v.as_bytes())
            == Some(b"application/apply-patch+yaml".as_slice())
        && resource != Some("status");
    let create = req.method() == Method::POST && resource != Some("events");
    if create || apply {
        Lane::Start
    } else {
        Lane::Rest
    }
}

/// A request waiting for its token.
type Waiter = oneshot::Sender<()>;

/// The shared bucket and the task that hands its tokens out by lane.
pub struct Tokens {
    limiter: Arc<DefaultDirectRateLimiter>,
    /// Started on the first request, in the runtime that makes it.
    lanes: OnceLock<[mpsc::UnboundedSender<Waiter>; 2]>,
}

impl Tokens {
    /// Tokens of `limiter`.
    pub fn new(limiter: DefaultDirectRateLimiter) -> Self {
        Tokens {
            limiter: Arc::new(limiter),
            lanes: OnceLock::new(),
        }
    }

    /// Waits for a token in `lane`.
    pub async fn take(&self, lane: Lane) {
        let (tx, rx) = oneshot::channel();
        let queued = self.lanes()[lane as usize].send(tx).is_ok();
        if !(queued && rx.await.is_ok()) {
            // The dispatcher is gone with the runtime that started it:
            // still take a token, first come, first served.
            one_token(&self.limiter).await;
        }
    }

    fn lanes(&self) -> &[mpsc::UnboundedSender<Waiter>; 2] {
        self.lanes.get_or_init(|| {
            let (start_tx, start_rx) = mpsc::unbounded_channel();
            let (rest_tx, rest_rx) = mpsc::unbounded_channel();
            tokio::spawn(dispatch(self.limiter.clone(), [start_rx, rest_rx]));
            [start_tx, rest_tx]
        })
    }
}

/// Waits until the bucket gives one token.
async fn one_token(limiter: &DefaultDirectRateLimiter) {
    while let Err(not_until) = limiter.check() {
        tokio::time::sleep(not_until.wait_time_from(limiter.clock().now())).await;
    }
}

/// Moves every request that arrived into its queue; false once the
/// clients are all gone.
fn drain(queues: &mut Queues<()>, rx: &mut [mpsc::UnboundedReceiver<Waiter>; 2]) -> bool {
    let mut open = true;
    for (lane, rx) in [Lane::Start, Lane::Rest].into_iter().zip(rx.iter_mut()) {
        loop {
            match rx.try_recv() {
                Ok(w) => queues.push(lane, w),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
    }
    open
}

/// Hands the bucket's tokens to waiting requests until every client is
/// dropped.
async fn dispatch(
    limiter: Arc<DefaultDirectRateLimiter>,
    mut rx: [mpsc::UnboundedReceiver<Waiter>; 2],
) {
    let mut queues = Queues::default();
    loop {
        let open = drain(&mut queues, &mut rx);
        if queues.is_empty() {
            if !open || !wait_for_request(&mut rx, &mut queues).await {
                return;
            }
            continue;
        }
        one_token(&limiter).await;
        // Requests that came while this token was awaited compete for it.
        drain(&mut queues, &mut rx);
        let _ = queues.hand_out(());
    }
}

/// Waits for the next request of either lane; false once no client is left.
async fn wait_for_request(
    rx: &mut [mpsc::UnboundedReceiver<Waiter>; 2],
    queues: &mut Queues<()>,
) -> bool {
    let [start, rest] = rx;
    let (lane, waiter) = tokio::select! {
        w = start.recv() => (Lane::Start, w),
        w = rest.recv() => (Lane::Rest, w),
    };
    match waiter {
        Some(w) => {
            queues.push(lane, w);
            true
        }
        // One lane closed means the Tokens (holding both senders) is gone.
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The requests kube-rs builds for each kind of write.
    #[test]
    fn creates_and_applies_start_work_but_events_and_status_do_not() {
        use kube::api::{Patch, PatchParams, PostParams};
        use kube::core::Request as Url;
        let pods = Url::new("/api/v1/namespaces/a/pods");
        let wfs = Url::new("/apis/weft.dev/v1alpha1/namespaces/a/workflows");
        let events = Url::new("/apis/events.k8s.io/v1/namespaces/a/events");
        let post = PostParams::default();
        let apply = PatchParams::apply("weft").force();
        let json = serde_json::json!({"status": {}});
        let lane = |r: http::Request<Vec<u8>>| lane_of(&r);
        assert_eq!(lane(pods.create(&post, vec![]).unwrap()), Lane::Start);
        assert_eq!(lane(wfs.create(&post, vec![]).unwrap()), Lane::Start);
        assert_eq!(
            lane(pods.patch("p", &apply, &Patch::Apply(&json)).unwrap()),
            Lane::Start
        );
        assert_eq!(lane(events.create(&post, vec![]).unwrap()), Lane::Rest);
        let merge = Patch::Merge(&json);
        let status = wfs.patch_subresource("status", "w", &PatchParams::default(), &merge);
        assert_eq!(lane(status.unwrap()), Lane::Rest);
        assert_eq!(
            lane(pods.patch("p", &PatchParams::default(), &merge).unwrap()),
            Lane::Rest
        );
        assert_eq!(lane(pods.list(&Default::default()).unwrap()), Lane::Rest);
        assert_eq!(
            lane(pods.delete("p", &Default::default()).unwrap()),
            Lane::Rest
        );
        let leases = Url::new("/apis/coordination.k8s.io/v1/namespaces/a/leases");
        let renew = leases.replace("weft", &post, vec![]).unwrap();
        assert_eq!(
            lane(renew),
            Lane::Start,
            "a renewal never waits behind status writes"
        );
    }

    /// Ten status writes queue, then a create: the create goes first, and
    /// all eleven still take the bucket's rate (burst 2, then one per 10 ms).
    #[tokio::test]
    async fn a_create_passes_queued_writes_at_the_buckets_rate() {
        use futures::StreamExt;
        use governor::{Quota, RateLimiter};
        use std::num::NonZeroU32;
        use std::time::{Duration, Instant};
        let quota = Quota::with_period(Duration::from_millis(10))
            .unwrap()
            .allow_burst(NonZeroU32::new(2).unwrap());
        let tokens = Tokens::new(RateLimiter::direct(quota));
        // Drain the burst so every request below waits.
        tokens.take(Lane::Rest).await;
        tokens.take(Lane::Rest).await;
        let started = Instant::now();
        let waiting = futures::stream::FuturesUnordered::new();
        for i in 0..10 {
            let t = &tokens;
            waiting.push(Box::pin(async move {
                t.take(Lane::Rest).await;
                format!("rest{i}")
            })
                as std::pin::Pin<Box<dyn std::future::Future<Output = String>>>);
        }
        let t = &tokens;
        waiting.push(Box::pin(async move {
            t.take(Lane::Start).await;
            "start".to_string()
        }));
        let order: Vec<String> = waiting.collect().await;
        assert_eq!(order[0], "start", "{order:?}");
        assert_eq!(
            order[1..],
            (0..10).map(|i| format!("rest{i}")).collect::<Vec<_>>()[..]
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100),
            "11 tokens at 100/s came in {took:?}"
        );
    }
}
