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
use std::time::Duration;

use wasmtime::Store;

use crate::host::HostState;

/// The scheduling priority of the engine's preparer thread.
///
/// The preparer is handed a used instance in the middle of a request (a
/// middleware call returns before the handler runs), so its resets and
/// instantiations (~30–120 µs a request) run while the rest of that very
/// request needs a core; on a 2-core node a woken thread of the request
/// then waits for them. A lower priority lets it take the core at once
/// (measured in docs/benchmarks.md, "Admin API latency").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreparerPriority {
    /// Nice 19: every normal thread that wakes goes first, and the
    /// preparer still gets a small share of busy cores (~1.5% each).
    #[default]
    Low,
    /// Linux `SCHED_IDLE`: only CPU nobody else wants. While the cores
    /// stay busy, spares are made late and calls instantiate inline, as
    /// with no spares.
    Idle,
    /// The same priority as every other thread.
    Normal,
}

impl std::str::FromStr for PreparerPriority {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "low" => Ok(PreparerPriority::Low),
            "idle" => Ok(PreparerPriority::Idle),
            "normal" => Ok(PreparerPriority::Normal),
            _ => Err(format!(
                "{s:?} is not a preparer priority (low, idle or normal)"
            )),
        }
    }
}

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

/// Lowers the calling thread's priority as asked (see [`PreparerPriority`]).
#[cfg(target_os = "linux")]
fn lower_priority(priority: PreparerPriority) -> std::io::Result<()> {
    // SAFETY: plain syscalls on the calling thread with valid arguments:
    // `param` lives for the call; on Linux the nice value is per thread
    // and `gettid` names this one.
    #[allow(unsafe_code)]
    let rc = unsafe {
        match priority {
            PreparerPriority::Normal => 0,
            PreparerPriority::Low => {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19)
            }
            PreparerPriority::Idle => {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param)
            }
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Elsewhere the preparer keeps the default priority.
#[cfg(not(target_os = "linux"))]
fn lower_priority(priority: PreparerPriority) -> std::io::Result<()> {
    match priority {
        PreparerPriority::Normal => Ok(()),
        _ => Err(std::io::Error::other("only set on Linux")),
    }
}

/// The calling thread's CPU time, to tell what making an instance cost
/// from how long a low-priority preparer waited for a core meanwhile.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere, wall time since the first use.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Duration {
    use std::time::Instant;
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Most used stores queued for dropping at once; past that a caller drops
/// its own, so a slow preparer never holds many pool slots.
const MAX_RETIRING: usize = 16;

impl Preparer {
    /// Starts the thread; it ends when the last handle is dropped.
    pub(crate) fn start(priority: PreparerPriority) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("weft-plugin-prepare".into())
            .spawn(move || {
                if let Err(e) = lower_priority(priority) {
                    tracing::warn!(error = %e, ?priority, "the instance preparer runs at normal priority: cannot lower it");
                }
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
    /// Whether an instance of this version was ever made in under
    /// [`CHEAP`] of the preparer's CPU: the fastest one tells what the
    /// version costs, the slower ones what the machine was doing.
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
        try_lock(&self.ready)?.pop()
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
        let Some(mut used) = try_lock(&self.used) else {
            // The preparer holds the list: its own job drops this one.
            self.preparer.retire(store);
            return;
        };
        if used.len() >= MAX_USED {
            // The preparer is behind: this caller resets its own slot.
            drop(used);
            drop(store);
            self.refill();
            return;
        }
        used.push(store);
        drop(used);
        if try_lock(&self.ready).is_none_or(|ready| ready.len() < self.target) {
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
                let started = thread_cpu_time();
                match (spares.make)() {
                    Ok(p) => {
                        // The fastest one made: a preempted preparer's
                        // cache misses must not make a version expensive.
                        if thread_cpu_time().saturating_sub(started) < CHEAP {
                            spares.cheap.store(true, Ordering::Relaxed);
                        }
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

/// The callers' side of a lock the preparer also takes: never waits. A
/// low-priority preparer preempted while it holds the lock (for a push,
/// nanoseconds) may not run again for a long while on busy cores, and a
/// caller waiting for it would wait as long (priority inversion); a
/// busy lock reads as "no spare" or "hand it over another way" instead.
fn try_lock<T>(m: &Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// A lock that a panicking holder did not poison for good.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The nice value and scheduling policy of the thread that runs
    /// this, from procfs (fields 19 and 41 of `stat`; policy 0 is
    /// SCHED_OTHER, 5 SCHED_IDLE).
    fn nice_and_policy() -> (i64, i64) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        (
            fields[19 - 3].parse().unwrap(),
            fields[41 - 3].parse().unwrap(),
        )
    }

    #[test]
    fn the_preparer_runs_at_the_priority_asked() {
        let caller = nice_and_policy();
        for (priority, want) in [
            (PreparerPriority::Low, (19, libc::SCHED_OTHER as i64)),
            (PreparerPriority::Idle, (caller.0, libc::SCHED_IDLE as i64)),
            (PreparerPriority::Normal, caller),
        ] {
            let preparer = Preparer::start(priority).unwrap();
            let (tx, rx) = mpsc::channel();
            preparer.submit(Box::new(move || tx.send(nice_and_policy()).unwrap()));
            let got = rx.recv_timeout(Duration::from_secs(30)).unwrap();
            assert_eq!(got, want, "{priority:?}");
        }
        assert_eq!(nice_and_policy(), caller, "the caller keeps its own");
    }

    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let start = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_time() - start;
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = thread_cpu_time() - start - slept;
        assert!(
            slept < Duration::from_millis(10),
            "{slept:?} of CPU while asleep"
        );
        assert!(worked > Duration::ZERO, "{worked:?} of CPU while spinning");
    }
}
