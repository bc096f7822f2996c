//! The controller's Workflow watch cache, lent to the rest of the process
//! while the controller runs, so that what only reads Workflows reads the
//! cache instead of listing them from the API server.
//!
//! Why: the hot loader counts which plugin versions running Workflows pin
//! every 2 s. Listing them decodes every Workflow whole, and the peers
//! bench's tree (100 children of 1,000 nodes) made that list 42 % of the
//! controller's CPU while the cache it duplicates sat beside it.

use std::sync::{Arc, RwLock};

use kube::runtime::reflector::Store;

use crate::api::Workflow;

/// The cache, while a controller of this process has one synced.
#[derive(Default)]
pub struct LiveWorkflows(RwLock<Option<Store<Workflow>>>);

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

    /// Lends a cache that has synced (its first list is in): until then
    /// it would read as no Workflows at all.
    pub fn lend(&self, store: Store<Workflow>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(store);
    }

    /// Takes the cache back (the controller stopped: it goes stale).
    pub fn withdraw(&self) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The cache, if lent.
    pub fn get(&self) -> Option<Store<Workflow>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
