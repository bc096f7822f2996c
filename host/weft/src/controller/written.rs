//! The last status this controller wrote for each Workflow, kept until
//! the watch cache holds that write.
//!
//! Only the controller writes status, so what it wrote is never older than
//! the watch cache, which may lag behind its own last write: a round
//! diffs from it (`reconcile::Current::read`). Once the cache's object is
//! that write (the same `resourceVersion`), the cache's copy serves and
//! this one goes, so a Workflow's status is held once, not twice (a
//! 1,000-node child's is ~1 MB decoded; the peers bench's 100,000-node
//! tree, issue 41).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use weft_dag::WorkflowStatus;

/// Statuses written and not yet seen in the watch cache, by uid.
#[derive(Default)]
pub struct Written(Mutex<HashMap<String, Write>>);

/// A status written, with the `resourceVersion` the write made.
struct Write {
    version: String,
    status: WorkflowStatus,
}

impl Written {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Write>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers a status written and the version the write made (none:
    /// nothing was written, and what was remembered still holds).
    pub fn record(&self, uid: &str, version: Option<String>, status: &WorkflowStatus) {
        let Some(version) = version else { return };
        let status = status.clone();
        self.lock()
            .insert(uid.to_string(), Write { version, status });
    }

    /// The status last written, unless the watch cache's object (at
    /// `cached`, its `resourceVersion`) is that write: then it is
    /// forgotten and `None` says the cache's status serves.
    pub fn last(&self, uid: &str, cached: Option<&str>) -> Option<WorkflowStatus> {
        let mut written = self.lock();
        let w = written.get(uid)?;
        if Some(w.version.as_str()) == cached {
            written.remove(uid);
            return None;
        }
        Some(w.status.clone())
    }

    /// Forgets a Workflow that is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_dag::status::WorkflowPhase;

    fn status(phase: WorkflowPhase) -> WorkflowStatus {
        WorkflowStatus {
            phase,
            ..Default::default()
        }
    }

    #[test]
    fn a_write_serves_until_the_cache_holds_it() {
        let w = Written::default();
        assert!(w.last("u", Some("1")).is_none(), "nothing written yet");
        w.record("u", Some("5".into()), &status(WorkflowPhase::Running));
        let older_cache = w.last("u", Some("4")).expect("the cache lags");
        assert_eq!(older_cache.phase, WorkflowPhase::Running);
        assert!(w.last("u", None).is_some(), "a cache without a version");
        w.record("u", None, &status(WorkflowPhase::Succeeded));
        let kept = w.last("u", Some("4")).unwrap();
        assert_eq!(kept.phase, WorkflowPhase::Running, "no write, no change");
        assert!(w.last("u", Some("5")).is_none(), "the cache caught up");
        assert!(w.last("u", Some("4")).is_none(), "and it was forgotten");
        w.record("u", Some("6".into()), &status(WorkflowPhase::Failed));
        w.forget("u");
        assert!(w.last("u", Some("5")).is_none());
    }
}
