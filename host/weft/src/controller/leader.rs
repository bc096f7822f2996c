//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics (`tools/leaderelection`): a candidate takes the Lease when it
//! is free or its holder has not renewed it for `lease_duration`; the
//! leader renews it every `retry_period` and steps down the moment it has
//! failed to renew for `renew_deadline`, before anyone else may take it.
//!
//! Written here rather than taken from a crate: kube-rs has none,
//! kube-leader-election is on kube 4, and kube-lease-manager counts in
//! whole seconds and keeps a leader that cannot reach the API server
//! believing it leads, which is exactly when two leaders would reconcile.
//!
//! Expiry is judged as client-go judges it, by when *this* process last saw
//! the record change, never by the holder's clock: nodes' clocks may differ.
//! So a standby takes over at most `lease_duration + 2 × retry_period`
//! after the leader's last renewal.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

/// How a process competes for one Lease.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Who this process is (the pod name in a cluster).
    pub identity: String,
    /// How long a Lease stays held after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

/// Why a [`LeaderConfig`] cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The timings contradict each other.
    #[error(
        "leader election: need retry period ({retry:?}) < renew deadline ({renew:?}) < lease duration ({lease:?})"
    )]
    Timings {
        /// The lease duration.
        lease: Duration,
        /// The renew deadline.
        renew: Duration,
        /// The retry period.
        retry: Duration,
    },
    /// An empty identity would make every process the holder.
    #[error("leader election: the identity is empty (set --leader-elect-identity or POD_NAME)")]
    NoIdentity,
}

impl LeaderConfig {
    /// Checks the timings as client-go does: a leader must give up
    /// (`renew_deadline`) before others may take over (`lease_duration`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::NoIdentity);
        }
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            return Err(ConfigError::Timings {
                lease: self.lease_duration,
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// The last record this process saw, and when it saw it change.
struct Observed {
    holder: String,
    renew_time: Option<MicroTime>,
    at: Instant,
}

/// Competes for one Lease. [`Elector::run`] publishes whether this
/// process leads on a watch channel.
pub struct Elector {
    api: Api<Lease>,
    config: LeaderConfig,
    observed: Option<Observed>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn whole_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs_f64().ceil() as u64).unwrap_or(i32::MAX)
}

impl Elector {
    /// An elector for `config` (validated) over `client`.
    pub fn new(client: Client, config: LeaderConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    /// One attempt to acquire or renew. `Ok(true)`: this process holds the
    /// Lease now. `Ok(false)`: someone else holds it, or another candidate
    /// won a race for it. Errors are the API server's.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let me = self.config.identity.clone();
        let current = match self.api.get_opt(&self.config.name).await? {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me.clone()),
                        lease_duration_seconds: Some(whole_seconds(self.config.lease_duration)),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => {
                        self.saw(&me, None);
                        Ok(true)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            self.saw(&holder, spec.renew_time.clone());
        }
        let seen_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
        let held_by_other = !holder.is_empty() && holder != me;
        if held_by_other && seen_at.elapsed() < self.config.lease_duration {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        let mut next = current.clone();
        next.spec = Some(LeaseSpec {
            holder_identity: Some(me.clone()),
            lease_duration_seconds: Some(whole_seconds(self.config.lease_duration)),
            renew_time: Some(now()),
            acquire_time: if holder == me {
                spec.acquire_time.clone()
            } else {
                Some(now())
            },
            lease_transitions: Some(if holder == me {
                transitions
            } else {
                transitions + 1
            }),
            ..spec
        });
        // A replace carries the resourceVersion read above: if another
        // candidate wrote in between, the server answers 409 and we lose.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(l) => {
                let renewed = l.spec.and_then(|s| s.renew_time);
                self.saw(&me, renewed);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn saw(&mut self, holder: &str, renew_time: Option<MicroTime>) {
        self.observed = Some(Observed {
            holder: holder.to_string(),
            renew_time,
            at: Instant::now(),
        });
    }

    /// Gives the Lease up, if this process holds it, so a standby takes
    /// over at once rather than after `lease_duration` (client-go's
    /// `ReleaseOnCancel`). Best effort.
    pub async fn release(&mut self) {
        let Ok(Some(current)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let mut next = current;
        next.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(now()),
            ..spec
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.config.name, "released the leader lease"),
            Err(e) => {
                tracing::warn!(lease = %self.config.name, "cannot release the leader lease: {e}")
            }
        }
    }

    /// Competes until `shutdown` resolves, then releases the Lease if held.
    /// `leading` says whether this process leads; it turns false the moment
    /// a renewal has failed for `renew_deadline`.
    pub async fn run(
        mut self,
        leading: watch::Sender<bool>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let retry = self.config.retry_period;
        loop {
            // Candidate: try every retry period (with jitter, as client-go).
            loop {
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(lease = %self.config.name, "leader election: {e}"),
                }
                let jitter = retry.mul_f64(fastrand_fraction() * 0.2);
                tokio::select! {
                    () = tokio::time::sleep(retry + jitter) => {}
                    () = &mut shutdown => return,
                }
            }
            tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became the leader");
            leading.send_replace(true);
            // Leader: renew every retry period; give up once the last good
            // renewal is `renew_deadline` old.
            let mut renewed = Instant::now();
            loop {
                tokio::select! {
                    () = tokio::time::sleep(retry) => {}
                    () = &mut shutdown => {
                        leading.send_replace(false);
                        self.release().await;
                        return;
                    }
                }
                let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
                let attempt = tokio::time::timeout(left, self.try_acquire_or_renew()).await;
                match attempt {
                    Ok(Ok(true)) => renewed = Instant::now(),
                    Ok(Ok(false)) => {
                        tracing::warn!(lease = %self.config.name, "another process took the leader lease");
                        break;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.config.name, "cannot renew the leader lease: {e}")
                    }
                    Err(_) => {}
                }
                if renewed.elapsed() >= self.config.renew_deadline {
                    tracing::warn!(lease = %self.config.name, deadline = ?self.config.renew_deadline, "leader lease not renewed in time");
                    break;
                }
            }
            tracing::warn!(lease = %self.config.name, "stopped leading");
            leading.send_replace(false);
        }
    }
}

/// A number in [0, 1) that differs between processes and calls, for
/// jitter (no `rand` dependency for one multiplication).
fn fastrand_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from((nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % 1000) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lease: u64, renew: u64, retry: u64) -> LeaderConfig {
        LeaderConfig {
            namespace: "weft-system".into(),
            name: "weft-controller".into(),
            identity: "a".into(),
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        }
    }

    #[test]
    fn timings_must_nest() {
        assert!(config(15_000, 10_000, 2_000).validate().is_ok());
        let e = config(10_000, 10_000, 2_000).validate().unwrap_err();
        assert!(e.to_string().contains("renew deadline"), "{e}");
        assert!(config(15_000, 10_000, 10_000).validate().is_err());
        let mut c = config(15_000, 10_000, 2_000);
        c.identity.clear();
        assert!(matches!(c.validate(), Err(ConfigError::NoIdentity)));
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(whole_seconds(Duration::from_millis(2_500)), 3);
        assert_eq!(whole_seconds(Duration::from_secs(15)), 15);
    }
}
