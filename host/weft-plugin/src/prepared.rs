//! Instances made ahead of time, off the caller's path.
//!
//! Every plugin call still runs in an instance nobody used before: a spare
//! is instantiated (start functions and all) on the engine's preparer
//! thread, handed to exactly one call, and dropped after it, so isolation
//! is the same as instantiating inline. What moves is the time: the caller
//! takes a ready instance instead of waiting for one. When no spare is
//! ready (a burst of calls, a slow language runtime), the call instantiates
//! inline as before, so the spares bound latency, never correctness.
//!
//! Cost: each plugin version keeps [`EngineConfig::spares`] instances
//! alive, each holding one slot of the pooling allocator and the memory
//! pages its instantiation wrote (copy-on-write pages it only read are
//! shared with the compiled image).
//!
//! [`EngineConfig::spares`]: crate::engine::EngineConfig::spares

use std::sync::{
    Arc, Mutex, Weak,
    atomic::{AtomicBool, AtomicUsize, Ordering},
    mpsc,
};

use wasmtime::Store;

use crate::host::HostState;

/// A call's store: whichever way it ends, it goes back through
/// [`Spares::retire`] when dropped.
pub(crate) struct CallStore<B: Send + 'static> {
    store: Option<Store<HostState>>,
    spares: Arc<Spares<B>>,
}

impl<B: Send + 'static> CallStore<B> {
    pub(crate) fn new(store: Store<HostState>, spares: Arc<Spares<B>>) -> Self {
        CallStore {
            store: Some(store),
            spares,
        }
    }
}

impl<B: Send + 'static> std::ops::Deref for CallStore<B> {
    type Target = Store<HostState>;
    fn deref(&self) -> &Self::Target {
        self.store.as_ref().expect("present until dropped")
    }
}

impl<B: Send + 'static> std::ops::DerefMut for CallStore<B> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.store.as_mut().expect("present until dropped")
    }
}

impl<B: Send + 'static> Drop for CallStore<B> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            self.spares.retire(store);
        }
    }
}

/// A store with its instance, never called yet.
pub(crate) struct Prepared<B> {
    pub(crate) store: Store<HostState>,
    pub(crate) bindings: B,
}

/// Builds one fresh instance of a plugin version.
pub(crate) type Make<B> = Box<dyn Fn() -> wasmtime::Result<Prepared<B>> + Send + Sync>;

/// Work for the preparer thread.
type Job = Box<dyn FnOnce() + Send>;

/// The engine's preparer: one thread that instantiates spares for every
/// plugin, so preparing never competes with more than one core.
#[derive(Clone)]
pub(crate) struct Preparer {
    jobs: Arc<Mutex<mpsc::Sender<Job>>>,
    /// Used stores queued for dropping and not dropped yet.
    retiring: Arc<AtomicUsize>,
}

/// Most used stores queued for dropping at once; past that a caller drops
/// its own, so a slow preparer never holds many pool slots.
const MAX_RETIRING: usize = 16;

impl Preparer {
    /// Starts the thread; it ends when the last handle is dropped.
    pub(crate) fn start() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("weft-plugin-prepare".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })?;
        Ok(Preparer {
            jobs: Arc::new(Mutex::new(tx)),
            retiring: Arc::default(),
        })
    }

    /// Drops a used store on the preparer thread, then runs `then` there:
    /// one job, so a call wakes the thread at most once.
    fn retire(&self, store: Store<HostState>, then: Job) {
        if self.retiring.fetch_add(1, Ordering::AcqRel) >= MAX_RETIRING {
            self.retiring.fetch_sub(1, Ordering::AcqRel);
            drop(store);
            self.submit(then);
            return;
        }
        let retiring = self.retiring.clone();
        self.submit(Box::new(move || {
            drop(store);
            retiring.fetch_sub(1, Ordering::AcqRel);
            then();
        }));
    }

    fn submit(&self, job: Job) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        // The thread only stops when every handle is gone, so sending
        // cannot fail while `self` exists.
        let _ = jobs.send(job);
    }
}

/// The spare instances of one plugin version.
pub(crate) struct Spares<B> {
    ready: Mutex<Vec<Prepared<B>>>,
    make: Make<B>,
    target: usize,
    queued: AtomicBool,
    preparer: Preparer,
}

impl<B: Send + 'static> Spares<B> {
    /// Keeps `target` instances ready (none when `target` is 0).
    pub(crate) fn new(preparer: Preparer, target: usize, make: Make<B>) -> Arc<Self> {
        let spares = Arc::new(Spares {
            ready: Mutex::default(),
            make,
            target,
            queued: AtomicBool::new(false),
            preparer,
        });
        spares.refill();
        spares
    }

    /// A ready instance, if there is one.
    pub(crate) fn take(&self) -> Option<Prepared<B>> {
        self.lock().pop()
    }

    /// Done with a call's store: it is dropped on the preparer thread
    /// (resetting its memory slot is work the caller need not wait for),
    /// then a spare is made, usually in the slot just freed, whose pages
    /// are still resident. Preparing only after the call keeps the
    /// preparer's mmap work from contending with the call's page faults.
    pub(crate) fn retire(self: &Arc<Self>, store: Store<HostState>) {
        let refill = self.refill_job().unwrap_or_else(|| Box::new(|| {}));
        self.preparer.retire(store, refill);
    }

    /// How many instances are ready now.
    pub(crate) fn ready(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Prepared<B>>> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues one job that tops the spares up, unless one is queued already.
    fn refill(self: &Arc<Self>) {
        if let Some(job) = self.refill_job() {
            self.preparer.submit(job);
        }
    }

    /// The job that tops the spares up, unless one is queued already (or
    /// no spares are kept). It holds the spares weakly: a version dropped
    /// meanwhile is not kept alive, nor prepared for.
    fn refill_job(self: &Arc<Self>) -> Option<Job> {
        if self.target == 0 || self.queued.swap(true, Ordering::AcqRel) {
            return None;
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        Some(Box::new(move || {
            let Some(spares) = weak.upgrade() else {
                return;
            };
            spares.queued.store(false, Ordering::Release);
            while spares.ready() < spares.target {
                match (spares.make)() {
                    Ok(p) => spares.lock().push(p),
                    Err(e) => {
                        // The caller will instantiate inline and report
                        // the same failure where it belongs.
                        tracing::debug!("cannot prepare a plugin instance: {e:#}");
                        break;
                    }
                }
            }
        }))
    }
}
