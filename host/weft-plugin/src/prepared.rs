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
//! alive (one more where instances are cheap, with one used one waiting
//! to be reset: the preparer is woken in batches, see [`Spares`]), each
//! holding one slot of the pooling allocator and the memory pages it
//! wrote (copy-on-write pages it only read are shared with the compiled
//! image).
//!
//! [`EngineConfig::spares`]: crate::engine::EngineConfig::spares

use std::sync::{
    Arc, Mutex, Weak,
    atomic::{AtomicBool, AtomicUsize, Ordering},
    mpsc,
};
use std::time::{Duration, Instant};

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

    /// Drops a used store on the preparer thread (where no spares are
    /// kept, so no refill job would take it).
    fn retire(&self, store: Store<HostState>) {
        if self.retiring.fetch_add(1, Ordering::AcqRel) >= MAX_RETIRING {
            self.retiring.fetch_sub(1, Ordering::AcqRel);
            drop(store);
            return;
        }
        let retiring = self.retiring.clone();
        self.submit(Box::new(move || {
            drop(store);
            retiring.fetch_sub(1, Ordering::AcqRel);
        }));
    }

    fn submit(&self, job: Job) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        // The thread only stops when every handle is gone, so sending
        // cannot fail while `self` exists.
        let _ = jobs.send(job);
    }
}

/// Most used stores one plugin version holds for the preparer at once;
/// past that a caller drops its own.
const MAX_USED: usize = 16;

/// An instance made faster than this is cheap: its version keeps one more
/// spare, so that its calls wake the preparer every other time.
const CHEAP: Duration = Duration::from_micros(250);

/// The spare instances of one plugin version.
///
/// The preparer is woken in batches where that pays: waking a sleeping
/// thread on another core is a futex wake and, on a VM, an
/// inter-processor interrupt, several µs on the caller's path
/// (docs/benchmarks.md). A used store waits in `used` until fewer than
/// `target` instances are ready; then one job drops every used store and
/// refills. A cheap version (a Rust plugin's instance takes ~15 µs) is
/// refilled to `target + 1`, so every other call skips the wake. An
/// expensive one (a Python runtime's takes ~1 ms) is refilled to
/// `target` after every call: a refill of two would still be running when
/// the next call comes, and the preparer's resets beside a call in the
/// same address space made that call fault (measured: Python's p99 8–40
/// ms instead of 0.7 ms).
pub(crate) struct Spares<B> {
    ready: Mutex<Vec<Prepared<B>>>,
    used: Mutex<Vec<Store<HostState>>>,
    make: Make<B>,
    target: usize,
    /// Whether the last instance made was [`CHEAP`].
    cheap: AtomicBool,
    queued: AtomicBool,
    preparer: Preparer,
}

impl<B: Send + 'static> Spares<B> {
    /// Keeps `target` instances ready (none when `target` is 0).
    pub(crate) fn new(preparer: Preparer, target: usize, make: Make<B>) -> Arc<Self> {
        let spares = Arc::new(Spares {
            ready: Mutex::default(),
            used: Mutex::default(),
            make,
            target,
            cheap: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            preparer,
        });
        spares.refill();
        spares
    }

    /// A ready instance, if there is one.
    pub(crate) fn take(&self) -> Option<Prepared<B>> {
        lock(&self.ready).pop()
    }

    /// Done with a call's store. It is dropped on the preparer thread
    /// (resetting its memory slot is work the caller need not wait for),
    /// and spares are made after, usually in the slots just freed, whose
    /// pages are still resident. Preparing only after the call keeps the
    /// preparer's mmap work from contending with the call's page faults.
    pub(crate) fn retire(self: &Arc<Self>, store: Store<HostState>) {
        if self.target == 0 {
            self.preparer.retire(store);
            return;
        }
        let mut used = lock(&self.used);
        if used.len() >= MAX_USED {
            // The preparer is behind: this caller resets its own slot.
            drop(used);
            drop(store);
            self.refill();
            return;
        }
        used.push(store);
        drop(used);
        if self.ready() < self.target {
            self.refill();
        }
    }

    /// How many instances are ready now.
    pub(crate) fn ready(&self) -> usize {
        lock(&self.ready).len()
    }

    /// How many instances a refill makes ready.
    fn high_water(&self) -> usize {
        self.target + usize::from(self.cheap.load(Ordering::Relaxed))
    }

    /// Queues one job that drops the used stores and tops the spares up,
    /// unless one is queued already (or no spares are kept). It holds the
    /// spares weakly: a version dropped meanwhile is not kept alive, nor
    /// prepared for.
    fn refill(self: &Arc<Self>) {
        if self.target == 0 || self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        self.preparer.submit(Box::new(move || {
            let Some(spares) = weak.upgrade() else {
                return;
            };
            spares.queued.store(false, Ordering::Release);
            // Out of the lock first: a reset takes a while, and a caller
            // retiring meanwhile must not wait for it.
            let used = std::mem::take(&mut *lock(&spares.used));
            drop(used);
            while spares.ready() < spares.high_water() {
                let started = Instant::now();
                match (spares.make)() {
                    Ok(p) => {
                        let cheap = started.elapsed() < CHEAP;
                        spares.cheap.store(cheap, Ordering::Relaxed);
                        lock(&spares.ready).push(p);
                    }
                    Err(e) => {
                        // The caller will instantiate inline and report
                        // the same failure where it belongs.
                        tracing::debug!("cannot prepare a plugin instance: {e:#}");
                        break;
                    }
                }
            }
        }));
    }
}

/// A lock that a panicking holder did not poison for good.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
