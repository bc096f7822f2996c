//! The controller's Workflow watch cache, lent to the rest of the process
//! while the controller runs, so that what only reads Workflows reads the
//! cache instead of listing them from the API server.
//!
//! Why: the hot loader counts which plugin versions running Workflows pin
//! every 2 s. Listing them decodes every Workflow whole, and the peers
//! bench's tree (100 children of 1,000 nodes) made that list 42 % of the
//! controller's CPU while the cache it duplicates sat beside it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kube::runtime::reflector::Store;

use crate::api::Workflow;

/// The cache, while a controller of this process has one, and whether
/// its first list is in.
#[derive(Default)]
pub struct LiveWorkflows {
    store: RwLock<Option<Store<Workflow>>>,
    synced: AtomicBool,
}

impl std::fmt::Debug for LiveWorkflows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.get() {
            Some(_) => "LiveWorkflows(lent)",
            None => "LiveWorkflows(none)",
        })
    }
}

impl LiveWorkflows {
    /// A slot shared by the controller (which lends) and its readers.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Lends the cache; readers get it once [`LiveWorkflows::synced`]
    /// says its first list is in.
    pub fn lend(&self, store: Store<Workflow>) {
        self.synced.store(false, Ordering::SeqCst);
        *self.store.write().unwrap_or_else(|e| e.into_inner()) = Some(store);
    }

    /// Says the cache holds its first list (the reflector applied the
    /// watch's `InitDone`). Not kube-runtime's `Store::wait_until_ready`:
    /// its readiness is a oneshot channel that wakes only the last of
    /// several waiters, and the controller already waits on it (a second
    /// waiter, such as the lock sweep, never woke).
    pub fn synced(&self) {
        self.synced.store(true, Ordering::SeqCst);
    }

    /// Takes the cache back (the controller stopped: it goes stale).
    pub fn withdraw(&self) {
        self.synced.store(false, Ordering::SeqCst);
        *self.store.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The cache, if lent and synced.
    pub fn get(&self) -> Option<Store<Workflow>> {
        if !self.synced.load(Ordering::SeqCst) {
            return None;
        }
        self.store.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;

    #[test]
    fn a_cache_is_read_only_while_lent_and_synced() {
        let live = LiveWorkflows::new();
        let (store, _writer) = reflector::store::<Workflow>();
        assert!(live.get().is_none(), "nothing lent");
        live.lend(store.clone());
        assert!(live.get().is_none(), "lent, its first list not in");
        live.synced();
        assert!(live.get().is_some());
        live.lend(store);
        assert!(live.get().is_none(), "a new term's cache starts unsynced");
        live.synced();
        live.withdraw();
        assert!(live.get().is_none(), "withdrawn");
    }
}
