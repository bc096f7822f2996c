//! The reconcile loop (flytepropeller's job), on kube-runtime.
//!
//! One reconcile of a Workflow: validate and compile its spec (cached per
//! generation), run one scheduler round in a blocking task (plugin calls
//! are synchronous), then make the round's writes: apply new children,
//! delete aborted ones, and patch the status once with only what changed.
//! Data flows one way: watch event -> reconcile -> round -> plugin call ->
//! child apply -> status patch.
//!
//! Where each part lives: [`context`] (what reconciles share, the
//! settings), [`reconcile`] (one reconcile, stage by stage), [`writes`]
//! (the round's API writes), [`report`] (Events and metrics of a round),
//! [`run`] (the controller's streams); the node handlers' side of the
//! round is [`executor`].

pub mod artifact_gc;
pub mod backoff;
pub mod cache;
pub mod children;
pub mod context;
pub mod cron;
pub mod elected;
pub mod executor;
pub mod features;
mod history;
pub mod impersonation;
pub mod intake;
pub mod leader;
pub mod lifecycle;
mod observe;
pub mod quota;
mod reconcile;
mod report;
pub mod repositories;
mod run;
pub mod shadow;
pub mod shard;
mod sync;
pub mod webapi;
pub mod workers;
pub mod workqueue;
pub mod write_pace;
mod writes;
mod written;

use std::time::Duration;

use kube::ResourceExt;

pub use crate::api::SKIP_CACHE_ANNOTATION;
use crate::api::Workflow;
pub use crate::events::{WorkflowEvents, record_event, set_instance};
pub use crate::metrics;
pub use crate::metrics::standard as standard_metrics;
pub use context::{Context, STATUS_HOLD, Settings};
pub use reconcile::reconcile;
pub use run::run;
pub use writes::merge_diff;
pub(crate) use writes::patch_status;

/// The field manager of everything the controller writes.
pub const MANAGER: &str = crate::events::COMPONENT;

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server said no.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Anything else.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

/// When a reconcile wants to look at its Workflow again without an event
/// (a timeout, a deferred status write, a TTL): `None` waits for one.
type Requeue = Option<Duration>;

/// A Workflow's key in [`workqueue::WorkQueue`].
fn queue_key(wf: &Workflow) -> String {
    format!("{}/{}", wf.namespace().unwrap_or_default(), wf.name_any())
}

/// A Workflow's key in [`backoff::Backoff`]: its uid, so a Workflow
/// deleted and created again under the same name starts afresh.
fn backoff_key(wf: &Workflow) -> String {
    wf.uid()
        .unwrap_or_else(|| format!("{}/{}", wf.namespace().unwrap_or_default(), wf.name_any()))
}
