//! Running the controller: the Workflow watch and the children's wake-ups
//! into kube-runtime's controller, the periodic resync, the cron
//! scheduler, the task cache's collector and the gauges.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::Controller as KubeController;

use super::reconcile::{error_policy, reconcile};
use super::{Context, cache, children, cron, intake, queue_key};
use crate::api::Workflow;
use crate::metrics::standard::WORKFLOW_CONTROLLER;

/// Runs the controller until `shutdown` resolves: Workflows in `namespace`
/// (all when `None`), children of every kind the plugins declare.
pub async fn run(
    ctx: Arc<Context>,
    wake: children::Wake,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let kinds: Vec<(String, String)> = ctx
        .registry
        .snapshot()
        .plugins()
        .values()
        .flat_map(|p| {
            p.manifest()
                .resources
                .iter()
                .map(|r| (r.api_version.clone(), r.kind.clone()))
        })
        .collect();
    // Optional operators' kinds whose CRDs are not installed are the
    // usual case (a dev cluster, a cluster without Spark): one info line,
    // not a warning per kind.
    let mut absent = Vec::new();
    for (api_version, kind) in kinds {
        match ctx.children.ensure(&api_version, &kind).await {
            Ok(_) => {}
            Err(e) if e.is::<children::NotInstalled>() => {
                absent.push(format!("{api_version}/{kind}"))
            }
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    if !absent.is_empty() {
        tracing::info!(
            "not watching kinds whose CRDs are not installed (watched once a workflow needs one): {}",
            absent.join(", ")
        );
    }
    let cache = ctx.cache.get_or_init(|| {
        cache::TaskCache::start(
            ctx.client.clone(),
            namespace.as_deref(),
            ctx.metrics.clone(),
        )
    });
    let collector = tokio::spawn({
        let cache = cache.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(300));
            loop {
                tick.tick().await;
                cache.collect().await;
            }
        }
    });
    let (store, workflows) = intake::workflows(ctx.clone(), namespace.as_deref());
    let locks = super::sync::start(&ctx, namespace.as_deref());
    let sweeper = tokio::spawn(super::sync::sweep(locks.clone(), ctx.live.clone()));
    let concurrency = ctx.concurrency();
    let standard = &ctx.metrics.standard;
    standard.controller_started(WORKFLOW_CONTROLLER, concurrency);
    standard.queue_started(WORKFLOW_CONTROLLER);
    let queued = ctx.clone();
    let workflows = workflows.inspect(move |wf| {
        if let Ok(wf) = wf {
            queued.queue.add(&queue_key(wf));
        }
    });
    let queued = ctx.clone();
    let wake = wake.inspect(move |r| {
        let ns = r.namespace.as_deref().unwrap_or_default();
        queued.queue.add(&format!("{ns}/{}", r.name));
    });
    // The limit is kept by `workers` (new Workflows first), so
    // kube-runtime hands every due Workflow to a reconcile at once.
    if concurrency > 0 {
        let _ = ctx
            .workers
            .set(super::workers::Workers::new(concurrency.into()));
    }
    let controller = KubeController::for_stream(workflows, store);
    let gauges = tokio::spawn(count_nodes(controller.store(), ctx.clone()));
    let resync = resyncs(controller.store(), ctx.clone());
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let workflows = controller
        .reconcile_on(wake)
        .reconcile_all_on(resync)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    futures::join!(workflows, cron::run(ctx.clone(), namespace, shutdown));
    ctx.live.withdraw();
    gauges.abort();
    sweeper.abort();
    locks.stop();
    collector.abort();
    cache.stop();
    ctx.children.stop();
}

/// A tick every `--sync-period` (none when it is zero), each putting
/// every Workflow of the watch cache in the queue: controller-runtime's
/// periodic resync, the safety net for a change no event reported.
fn resyncs(
    store: kube::runtime::reflector::Store<Workflow>,
    ctx: Arc<Context>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    let period = ctx.sync_period();
    let ticks = match period {
        Some(p) => {
            let first = tokio::time::Instant::now() + p;
            futures::stream::StreamExt::boxed(tokio_stream::wrappers::IntervalStream::new(
                tokio::time::interval_at(first, p),
            ))
        }
        None => futures::stream::StreamExt::boxed(futures::stream::pending()),
    };
    ticks.map(move |_| {
        let all = store.state();
        tracing::debug!(workflows = all.len(), "periodic resync");
        for wf in all {
            ctx.queue.add(&queue_key(&wf));
        }
    })
}

/// Keeps the `active_workflows` and `nodes{phase}` gauges current from the
/// controller's watch cache (this shard's Workflows only): a scrape sees
/// at most two seconds' lag, and reconciles do no bookkeeping for it.
async fn count_nodes(store: kube::runtime::reflector::Store<Workflow>, ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let mut active = 0;
        let mut by_phase: BTreeMap<String, i64> = BTreeMap::new();
        for wf in store.state() {
            let Some(status) = wf.status.as_ref() else {
                continue;
            };
            if status.phase.is_terminal() || !ctx.owns(&wf) {
                continue;
            }
            active += 1;
            for n in status.nodes.values() {
                *by_phase.entry(format!("{:?}", n.phase)).or_default() += 1;
            }
        }
        ctx.metrics.set_active(active);
        ctx.metrics.set_nodes(&by_phase);
        ctx.queue.refresh();
    }
}
