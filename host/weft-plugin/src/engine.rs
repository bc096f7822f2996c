//! The wasmtime engine every plugin runs on: configuration, the epoch
//! ticker, the linker with the host imports, and compilation cached by the
//! component's sha256 digest (in memory, and as precompiled artifacts on disk
//! so a restart does not compile again).

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use sha2::{Digest as _, Sha256};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig,
    component::{Component, Linker},
};

use crate::{
    host::{HostState, StateLimits, StateStore},
    prepared::Preparer,
};

/// The imports of `weft:plugin@0.2.0`'s web-API world: its log, clock and
/// state, and `wasi:http` (whose hooks allow nothing but a web-API
/// plugin's egress, so a task or middleware plugin that imports it gets
/// every request denied, besides being refused at load).
fn add_webapi_imports(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use crate::bindings::webapi::weft::plugin as v02;
    use wasmtime::component::HasSelf;
    v02::log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v02::clock::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v02::state::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(linker)
}

/// Failures of the engine itself (not of a plugin).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// wasmtime rejected the engine configuration (e.g. the pool does not fit in memory).
    #[error("cannot configure the Wasm engine: {0}")]
    Config(String),
    /// The host imports could not be linked (a host bug).
    #[error("cannot link host imports: {0}")]
    Link(String),
    /// The artifact cache directory is unusable.
    #[error("cannot use plugin cache directory {path}: {source}")]
    CacheDir {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A component's sha256 digest, the identity of a plugin version.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// Digest of these bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }

    /// Lower-case hex without prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses `sha256:<hex>` or bare hex.
    pub fn parse(s: &str) -> Option<Self> {
        let h = s.strip_prefix("sha256:").unwrap_or(s);
        let bytes = hex::decode(h).ok()?;
        Some(Digest(bytes.try_into().ok()?))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", &self.hex()[..12])
    }
}

/// The settings every plugin is compiled with (the running engine adds
/// its instance pool): the artifact's compatibility depends on them, so
/// an in-process compile and a child's ([`compile_artifact`]) agree.
fn compile_config() -> Config {
    let mut wasm = Config::new();
    wasm.epoch_interruption(true);
    // Plugins get a bounded stack: runaway recursion is a clean trap.
    wasm.max_wasm_stack(1 << 20);
    // Map data segments copy-on-write from the compiled image instead of
    // copying them into every fresh instance.
    wasm.memory_init_cow(true);
    wasm
}

/// Compiles a component to the artifact a [`PluginEngine`] loads (in this
/// process, or in a [`ChildCompiler`]'s: `weft plugin compile-artifact`).
/// In an engine made for this compile and dropped after it: cranelift
/// keeps every compile's scratch buffers (function bodies, register
/// allocation) in its engine for the engine's life, and after the
/// first-party plugins an idle controller held ~24 MiB of them (its heap
/// profile), and more in the allocator's pages around them.
pub fn compile_artifact(bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
    Engine::new(&compile_config())?.precompile_component(bytes)
}

/// How the engine is set up.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where precompiled artifacts are kept across restarts; `None` keeps them in memory only.
    pub cache_dir: Option<PathBuf>,
    /// How many instances may be alive at once (calls in flight across all plugins).
    pub max_instances: u32,
    /// The largest linear memory any plugin may ask for in its manifest.
    pub max_memory: u64,
    /// The epoch tick: deadlines are enforced to within about one tick.
    pub tick: Duration,
    /// Limits of each plugin's key/value state.
    pub state: StateLimits,
    /// Whether to use the pooling allocator (fast instantiation, reserves
    /// address space up front). Off is useful where virtual memory is scarce.
    pub pooling: bool,
    /// Instances each plugin version keeps prepared ahead of its calls
    /// (each used for one call, then dropped); 0 instantiates on the
    /// caller's path. A version whose instances are cheap to make (under
    /// 250 µs: Rust, C) keeps one more, so its calls wake the preparer
    /// thread every other time. Each costs a pool slot and the pages its
    /// instantiation wrote.
    pub spares: usize,
    /// How much of a used pool slot's linear memory stays resident, reset
    /// in place, for the next instance (the rest is given back to the
    /// system). Large enough for a language runtime's heap (CPython's is
    /// ~14 MB) so its calls take no page faults; the pool's resident
    /// memory is at most this per slot ever used at once.
    pub keep_resident: usize,
    /// How the preparer thread competes for CPU with the callers.
    pub preparer_priority: PreparerPriority,
    /// Compile plugins in a child process of this program (`None`: in
    /// this process). Its artifact is loaded as a cached one is; a child
    /// that fails is reported and the compile done here instead.
    pub compiler: Option<ChildCompiler>,
}

mod child;
pub use crate::prepared::PreparerPriority;
pub use child::{ChildCompiler, ChildOutcome, REFUSED};

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_dir: None,
            max_instances: 256,
            max_memory: 512 << 20,
            tick: Duration::from_millis(5),
            state: StateLimits::default(),
            pooling: true,
            spares: 1,
            keep_resident: 16 << 20,
            preparer_priority: PreparerPriority::default(),
            compiler: None,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) tick: Duration,
    pub(crate) max_memory: u64,
    pub(crate) preparer: Preparer,
    pub(crate) spares: usize,
    cache_dir: Option<PathBuf>,
    compiler: Option<ChildCompiler>,
    compiled: Mutex<HashMap<Digest, Component>>,
    states: Mutex<HashMap<String, Arc<StateStore>>>,
    state_limits: StateLimits,
    stop: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The shared plugin engine. Cheap to clone; one per host process.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginEngine")
            .field("cache_dir", &self.inner.cache_dir)
            .finish_non_exhaustive()
    }
}

/// Where a compiled component came from, for metrics and `weft plugin inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Already compiled in this process.
    Memory,
    /// Loaded from a precompiled artifact on disk.
    Disk,
    /// Compiled now.
    Compiled,
}

impl PluginEngine {
    /// Build the engine and start its epoch ticker.
    pub fn new(config: EngineConfig) -> Result<Self, Error> {
        // Compiles run in an engine of these settings made for each (see
        // `compile_artifact`); the instance pool is the running engine's only.
        let mut wasm = compile_config();

        if config.pooling {
            let mut pool = PoolingAllocationConfig::default();
            let n = config.max_instances;
            pool.total_component_instances(n)
                .total_core_instances(n * 4)
                .total_memories(n * 2)
                .total_tables(n * 4)
                .total_stacks(0)
                .max_memory_size(usize::try_from(config.max_memory).unwrap_or(usize::MAX))
                .max_core_instances_per_component(64)
                .max_memories_per_component(8)
                .max_tables_per_component(16)
                .table_elements(100_000)
                .max_component_instance_size(1 << 20)
                .max_core_instance_size(1 << 20)
                // A used slot's first `keep_resident` bytes are reset in
                // place (copied back from the image, or zeroed) and stay
                // resident and writable: the next instance in the slot (the
                // same version's, by the pool's affinity) writes them with
                // no page fault. Beyond that, memory is given back.
                .linear_memory_keep_resident(config.keep_resident)
                .table_keep_resident(1 << 16);
            // Not PAGEMAP_SCAN (reset only the pages a call dirtied): wasmtime
            // asks it for at most 32 dirty regions and gives back everything
            // past the 32nd, so a runtime that writes all over a large heap
            // (CPython's reference counts) faulted on ~230 pages in every
            // call, 2.6–3 µs each: a Python call on a spare 740 µs instead
            // of 107 µs (docs/benchmarks.md).
            pool.pagemap_scan(wasmtime::Enabled::No);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm).map_err(|e| Error::Config(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        crate::bindings::task::K8sTaskPlugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |s| s,
        )
        .map_err(|e| Error::Link(format!("{e:#}")))?;
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| Error::Link(format!("{e:#}")))?;
        add_webapi_imports(&mut linker).map_err(|e| Error::Link(format!("{e:#}")))?;
        if let Some(dir) = &config.cache_dir {
            std::fs::create_dir_all(dir).map_err(|source| Error::CacheDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (engine, stop, tick) = (engine.clone(), stop.clone(), config.tick);
            std::thread::Builder::new()
                .name("weft-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| Error::Config(format!("cannot start the epoch ticker: {e}")))?;
        }
        let preparer = Preparer::start(config.preparer_priority)
            .map_err(|e| Error::Config(format!("cannot start the instance preparer: {e}")))?;
        Ok(PluginEngine {
            inner: Arc::new(Inner {
                engine,
                linker,
                tick: config.tick,
                max_memory: config.max_memory,
                preparer,
                spares: config.spares,
                cache_dir: config.cache_dir,
                compiler: config.compiler,
                compiled: Mutex::default(),
                states: Mutex::default(),
                state_limits: config.state,
                stop,
            }),
        })
    }

    /// The underlying wasmtime engine.
    pub fn wasmtime(&self) -> &Engine {
        &self.inner.engine
    }

    /// The key/value state of a plugin (by name), shared by all its versions.
    pub fn state_of(&self, plugin: &str) -> Arc<StateStore> {
        let mut states = self.inner.states.lock().unwrap_or_else(|e| e.into_inner());
        states
            .entry(plugin.to_string())
            .or_insert_with(|| Arc::new(StateStore::new(self.inner.state_limits)))
            .clone()
    }

    /// Compile a component, or reuse the compilation of the same bytes.
    /// Blocking and CPU-heavy on a miss: call it off the async runtime.
    pub(crate) fn compile(
        &self,
        digest: Digest,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CompileSource)> {
        if let Some(c) = self.lock_compiled().get(&digest) {
            return Ok((c.clone(), CompileSource::Memory));
        }
        let artifact = self.artifact_path(digest);
        if let Some(path) = &artifact
            && path.exists()
        {
            match self.deserialize(path) {
                Ok(c) => {
                    self.lock_compiled().insert(digest, c.clone());
                    return Ok((c, CompileSource::Disk));
                }
                Err(e) => {
                    tracing::warn!(artifact = %path.display(), "ignoring unusable precompiled plugin: {e:#}");
                }
            }
        }
        let (compiled, component) = self.compile_fresh(bytes)?;
        if let Some(path) = &artifact
            && let Err(e) = write_artifact(path, &compiled)
        {
            tracing::warn!(artifact = %path.display(), "cannot cache precompiled plugin: {e:#}");
        }
        self.lock_compiled().insert(digest, component.clone());
        Ok((component, CompileSource::Compiled))
    }

    /// Compiles `bytes` and loads the result: in the child compiler when
    /// there is one (its refusal is the component's error), else, or when
    /// the child fails or its artifact does not load, here.
    fn compile_fresh(&self, bytes: &[u8]) -> wasmtime::Result<(Vec<u8>, Component)> {
        if let Some(child) = &self.inner.compiler {
            let why = match child.compile(bytes) {
                ChildOutcome::Compiled(artifact) => match self.load_artifact(&artifact) {
                    Ok(c) => return Ok((artifact, c)),
                    Err(e) => format!("its artifact does not load: {e:#}"),
                },
                ChildOutcome::Refused(why) => return Err(wasmtime::format_err!("{why}")),
                ChildOutcome::Failed(why) => why,
            };
            tracing::warn!(
                "compiling a plugin in a child process failed, compiling it here: {why}"
            );
        }
        let compiled = compile_artifact(bytes)?;
        let component = self.load_artifact(&compiled)?;
        Ok((compiled, component))
    }

    #[allow(unsafe_code)]
    fn load_artifact(&self, artifact: &[u8]) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize` trusts the bytes to be an artifact that
        // wasmtime produced: `compile_artifact` made them just now, in this
        // process or in a child running this same executable, with this
        // engine's settings, which wasmtime checks again from the header.
        unsafe { Component::deserialize(&self.inner.engine, artifact) }
    }

    /// The names a component exports and imports, for `weft plugin inspect`.
    /// Compiles (or reuses the cached compilation of) the component.
    pub fn describe(&self, bytes: &[u8]) -> wasmtime::Result<(Vec<String>, Vec<String>)> {
        let (component, _) = self.compile(Digest::of(bytes), bytes)?;
        let ty = component.component_type();
        let engine = &self.inner.engine;
        let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        Ok((exports, imports))
    }

    /// Forget in-memory compilations no longer referenced by a loaded plugin.
    pub fn forget(&self, digest: Digest) {
        self.lock_compiled().remove(&digest);
    }

    fn lock_compiled(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Component>> {
        self.inner
            .compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Artifacts are keyed by the component digest and the engine's
    /// compatibility hash, so a host upgrade or a config change never loads
    /// an artifact compiled for something else.
    fn artifact_path(&self, digest: Digest) -> Option<PathBuf> {
        use std::hash::{Hash, Hasher};
        let dir = self.inner.cache_dir.as_ref()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner
            .engine
            .precompile_compatibility_hash()
            .hash(&mut h);
        Some(dir.join(format!("{}-{:016x}.cwasm", digest.hex(), h.finish())))
    }

    #[allow(unsafe_code)]
    fn deserialize(&self, path: &Path) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize_file` trusts the file to be an artifact that
        // wasmtime produced. Only this host writes into its cache directory,
        // under a name derived from the engine's compatibility hash, via an
        // atomic rename; wasmtime additionally checks the artifact's header
        // against this engine's configuration before using it.
        unsafe { Component::deserialize_file(&self.inner.engine, path) }
    }
}

fn write_artifact(path: &Path, bytes: &[u8]) -> wasmtime::Result<()> {
    // Write then rename: a crash mid-write never leaves a torn artifact
    // under the final name.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
