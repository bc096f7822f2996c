//! When a finished Workflow is deleted: Argo's `ttlStrategy` (Kubernetes
//! Jobs' `ttlSecondsAfterFinished`), with a controller-wide default.
//!
//! The due time is computed from `status.finishedAt`, never kept in a
//! timer alone, so a controller that was down when a workflow fell due
//! deletes it as soon as it is back.

use std::time::{Duration, SystemTime};

use crate::status::{WorkflowPhase, WorkflowStatus, parse_timestamp};

pub use crate::spec::lifecycle::TtlStrategy;

/// When a finished workflow is to be deleted: the TTL for how it ended
/// (success or failure, else completion, else the controller's
/// `default`) after `finishedAt`. `None`: it is kept (not finished, or no
/// TTL applies).
pub fn due(
    strategy: Option<&TtlStrategy>,
    default: Option<Duration>,
    status: &WorkflowStatus,
) -> Option<SystemTime> {
    if !status.phase.is_terminal() {
        return None;
    }
    let finished = parse_timestamp(status.finished_at.as_deref())?;
    let s = strategy.cloned().unwrap_or_default();
    let by_outcome = match status.phase {
        WorkflowPhase::Succeeded => s.seconds_after_success,
        _ => s.seconds_after_failure,
    };
    let ttl = by_outcome
        .or(s.seconds_after_completion)
        .map(Duration::from_secs)
        .or(default)?;
    Some(finished + ttl)
}

#[cfg(test)]
mod tests;
