//! The controller behind a leader lease: it reconciles only while this
//! process leads its shard, and stops the moment the lease is lost.
//!
//! Each term of leadership gets a fresh [`Context`]: what the last term
//! remembered (status it wrote, finalizers, observed children) may be stale
//! once another leader has worked in between, so it starts again from the
//! cluster's state. Metrics, the plugin registry and the client outlive
//! terms, and the admin API and `/metrics` serve on every replica.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{oneshot, watch};
use weft_plugin::Registry;

use super::children::Children;
use super::leader::{ConfigError, Elector, LeaderConfig};
use super::shard::Shard;
use super::{Context, run as run_controller};
use crate::metrics::Metrics;

/// What one `weft controller` process runs.
pub struct Elected {
    /// The cluster.
    pub client: Client,
    /// Plugins.
    pub registry: Arc<Registry>,
    /// Shared by every term.
    pub metrics: Arc<Metrics>,
    /// Only Workflows of this namespace (all when `None`).
    pub namespace: Option<String>,
    /// The lease to hold before reconciling; `None` reconciles at once.
    pub leader: Option<LeaderConfig>,
    /// The shard to reconcile; `None` is every Workflow.
    pub shard: Option<Shard>,
    /// How every term's controller behaves.
    pub settings: super::Settings,
    /// How long a shutdown waits for running reconciles.
    pub grace: Duration,
}

async fn until(rx: &mut watch::Receiver<bool>, leading: bool) -> bool {
    rx.wait_for(|l| *l == leading).await.is_ok()
}

impl Elected {
    /// The `shard` label of the leader metrics.
    fn shard_label(&self) -> String {
        self.shard
            .as_ref()
            .map_or_else(|| "0".into(), |s| s.index.to_string())
    }

    fn context(&self) -> (Arc<Context>, super::children::Wake) {
        let (children, wake) = Children::new_in(self.client.clone(), self.namespace.clone());
        let ctx = Context::new(
            self.client.clone(),
            self.registry.clone(),
            children,
            self.metrics.clone(),
            self.shard.clone(),
            self.settings.clone(),
        );
        (ctx, wake)
    }

    /// After a shutdown began: lets the running reconciles finish (and
    /// write their status) within the grace period, then stops whatever
    /// is left and the watches.
    async fn drain(&self, run: &mut tokio::task::JoinHandle<()>, ctx: &super::Context) {
        tracing::info!(grace = ?self.grace, "shutting down: no new reconciles, waiting for the running ones");
        if tokio::time::timeout(self.grace, &mut *run).await.is_err() {
            tracing::warn!(grace = ?self.grace, "reconciles still running after the grace period: stopped");
            run.abort();
        }
        ctx.stop_watches();
    }

    /// Runs until `shutdown` resolves: reconciles while leading (always,
    /// without a lease), stops reconciling at once when the lease is lost,
    /// and on shutdown stops reconciling before it releases the lease.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) -> Result<(), ConfigError> {
        let Some(leader) = self.leader.clone() else {
            let (ctx, wake) = self.context();
            let (stop, stopped) = oneshot::channel::<()>();
            let mut run = tokio::spawn(run_controller(
                ctx.clone(),
                wake,
                self.namespace.clone(),
                async {
                    let _ = stopped.await;
                },
            ));
            tokio::select! {
                () = shutdown => {
                    let _ = stop.send(());
                    self.drain(&mut run, &ctx).await;
                }
                _ = &mut run => {}
            }
            return Ok(());
        };
        let elector = Elector::new(self.client.clone(), leader)?;
        let shard = self.shard_label();
        let (leading_tx, mut leading) = watch::channel(false);
        let (stop_election, election_stopped) = oneshot::channel::<()>();
        let election = tokio::spawn(elector.run(leading_tx, async {
            let _ = election_stopped.await;
        }));
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                ok = until(&mut leading, true) => if !ok { break },
                () = &mut shutdown => break,
            }
            self.metrics.set_leader(&shard, true);
            let (ctx, wake) = self.context();
            let (stop_term, term_stopped) = oneshot::channel::<()>();
            let mut term = tokio::spawn(run_controller(
                ctx.clone(),
                wake,
                self.namespace.clone(),
                async {
                    let _ = term_stopped.await;
                },
            ));
            let shutting_down = tokio::select! {
                _ = until(&mut leading, false) => {
                    // Lost: no graceful drain, not one more write.
                    term.abort();
                    false
                }
                () = &mut shutdown => {
                    let _ = stop_term.send(());
                    self.drain(&mut term, &ctx).await;
                    true
                }
                _ = &mut term => false,
            };
            ctx.children.stop();
            self.metrics.set_leader(&shard, false);
            if shutting_down {
                break;
            }
        }
        // Releasing the lease only now: nothing reconciles any more.
        let _ = stop_election.send(());
        let _ = election.await;
        Ok(())
    }
}
