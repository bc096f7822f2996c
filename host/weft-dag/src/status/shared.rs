//! One copy of each resolved spec, shared by every status that holds it.
//!
//! Why: a WorkflowTemplate launched as a tree's children (the peers
//! bench's `t`: 100 sub-workflows of one 1,000-node template) gives 100
//! statuses the same `resolvedSpec`, and the controller holds each status
//! several times (the watch cache, the last status written, a held
//! status, the round's copy). Decoded separately, that was a quarter of
//! the controller's live heap. Shared, the copies are pointers to one.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::{Deserialize, Deserializer};

use crate::spec::WorkflowSpec;

/// Specs decoded and still held somewhere, by the hash of their JSON.
#[derive(Default)]
struct Shared {
    by_hash: HashMap<u64, Vec<Weak<WorkflowSpec>>>,
    /// Entries when dead ones were last dropped: pruned again at twice.
    pruned_at: usize,
}

fn shared() -> &'static Mutex<Shared> {
    static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();
    SHARED.get_or_init(Mutex::default)
}

/// A [`Hasher`] fed by `serde_json::to_writer`: the spec's JSON is hashed
/// without being kept.
struct HashWriter<H>(H);

impl<H: Hasher> std::io::Write for HashWriter<H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hash(spec: &WorkflowSpec) -> u64 {
    // `DefaultHasher::new` has fixed keys: equal specs hash equally.
    let mut w = HashWriter(std::hash::DefaultHasher::new());
    // Serializing a spec into a hasher cannot fail: no I/O, no maps with
    // non-string keys.
    let _ = serde_json::to_writer(&mut w, spec);
    w.0.finish()
}

/// The shared copy of `spec`: an equal one still held elsewhere, else
/// `spec` itself, now shared.
pub fn share(spec: WorkflowSpec) -> Arc<WorkflowSpec> {
    let key = hash(&spec);
    let mut s = shared().lock().unwrap_or_else(|e| e.into_inner());
    let same = s.by_hash.entry(key).or_default();
    if let Some(found) = same.iter().filter_map(Weak::upgrade).find(|f| **f == spec) {
        return found;
    }
    let spec = Arc::new(spec);
    same.push(Arc::downgrade(&spec));
    if s.by_hash.len() > 2 * s.pruned_at + 64 {
        s.by_hash.retain(|_, v| {
            v.retain(|w| w.strong_count() > 0);
            !v.is_empty()
        });
        s.pruned_at = s.by_hash.len();
    }
    spec
}

/// `deserialize_with` for `resolvedSpec`: decoded, then shared.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Arc<WorkflowSpec>>, D::Error> {
    Ok(Option::<WorkflowSpec>::deserialize(d)?.map(share))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(task: &str) -> WorkflowSpec {
        serde_json::from_value(serde_json::json!({"nodes": [{"id": "a", "task": {"type": task}}]}))
            .unwrap()
    }

    #[test]
    fn equal_specs_share_one_copy_and_different_ones_do_not() {
        let (a, b) = (share(spec("pod")), share(spec("pod")));
        assert!(Arc::ptr_eq(&a, &b));
        let c = share(spec("spark"));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, spec("spark"));
    }

    #[test]
    fn a_spec_no_one_holds_is_decoded_anew_and_dead_entries_are_dropped() {
        let first = share(spec("gone"));
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none());
        let again = share(spec("gone"));
        assert_eq!(*again, spec("gone"));
        for i in 0..300 {
            drop(share(spec(&format!("t{i}"))));
        }
        let s = shared().lock().unwrap();
        assert!(
            s.by_hash.len() < 300,
            "dead entries kept: {}",
            s.by_hash.len()
        );
    }

    #[test]
    fn a_status_decodes_its_resolved_spec_shared() {
        let json = serde_json::json!({"phase": "Running", "resolvedSpec": {"nodes": [{"id": "a", "task": {"type": "shared-test"}}]}});
        let one: crate::WorkflowStatus = serde_json::from_value(json.clone()).unwrap();
        let two: crate::WorkflowStatus = serde_json::from_value(json.clone()).unwrap();
        let (one, two) = (one.resolved_spec.unwrap(), two.resolved_spec.unwrap());
        assert!(Arc::ptr_eq(&one, &two));
        let back = serde_json::to_value(crate::WorkflowStatus {
            resolved_spec: Some(one.clone()),
            ..Default::default()
        })
        .unwrap();
        let again: crate::WorkflowStatus = serde_json::from_value(back).unwrap();
        assert!(Arc::ptr_eq(&again.resolved_spec.unwrap(), &one));
    }
}
