//! What a plugin instance can reach: the store data of one call, the host
//! imports (log, clock, state), the memory limiter, and a WASI context that
//! grants nothing.
//!
//! A fresh [`HostState`] backs every call, so nothing leaks from one call to
//! the next except through the per-plugin [`StateStore`], which the host
//! bounds.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use wasmtime::{ResourceLimiter, component::ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView, p2::pipe::MemoryOutputPipe};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::PLUGIN_LOG_TARGET;
use crate::outbound::Hooks;

use crate::bindings::task::weft::plugin::{clock, log, state, types::Level};

/// Most log lines one call may write; the rest are counted and dropped so a
/// chatty plugin cannot flood the host's log.
const MAX_LOG_LINES_PER_CALL: u32 = 200;
/// Longest log line kept, in bytes.
const MAX_LOG_LINE: usize = 4096;
/// Bytes of stdout/stderr a WASI guest may write per call (each).
const MAX_STDIO: usize = 64 << 10;

/// Limits of the per-plugin key/value state.
#[derive(Debug, Clone, Copy)]
pub struct StateLimits {
    /// Longest key in bytes.
    pub max_key: usize,
    /// Largest value in bytes.
    pub max_value: usize,
    /// Most entries one plugin may hold.
    pub max_entries: usize,
}

impl Default for StateLimits {
    fn default() -> Self {
        StateLimits {
            max_key: 256,
            max_value: 64 << 10,
            max_entries: 10_000,
        }
    }
}

/// Values with their expiry.
type Entries = HashMap<String, (Vec<u8>, Option<Instant>)>;

/// A plugin's key/value state: survives calls and version swaps, bounded in size.
#[derive(Debug, Default)]
pub struct StateStore {
    limits: StateLimits,
    entries: Mutex<Entries>,
}

impl StateStore {
    /// An empty store with these limits.
    pub fn new(limits: StateLimits) -> Self {
        StateStore {
            limits,
            entries: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A poisoned lock only means another call panicked on the host side
        // while holding it; the map itself is still consistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read a live value.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let mut entries = self.lock();
        match entries.get(key) {
            Some((_, Some(expiry))) if *expiry <= Instant::now() => {
                entries.remove(key);
                None
            }
            Some((v, _)) => Some(v.clone()),
            None => None,
        }
    }

    /// Store a value, evicting expired entries when full.
    pub fn set(&self, key: String, value: Vec<u8>, ttl: Option<Duration>) -> Result<(), String> {
        if key.len() > self.limits.max_key {
            return Err(format!(
                "state key of {} bytes is over the limit of {}",
                key.len(),
                self.limits.max_key
            ));
        }
        if value.len() > self.limits.max_value {
            return Err(format!(
                "state value of {} bytes is over the limit of {}",
                value.len(),
                self.limits.max_value
            ));
        }
        let now = Instant::now();
        let mut entries = self.lock();
        if entries.len() >= self.limits.max_entries && !entries.contains_key(&key) {
            entries.retain(|_, (_, exp)| exp.is_none_or(|e| e > now));
            if entries.len() >= self.limits.max_entries {
                return Err(format!(
                    "state is full ({} entries); delete keys or set TTLs",
                    self.limits.max_entries
                ));
            }
        }
        entries.insert(key, (value, ttl.map(|t| now + t)));
        Ok(())
    }

    /// Remove a value.
    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Number of entries (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Caps an instance's linear memory at the manifest's limit and remembers
/// whether the guest hit it, so an abort right after becomes "out of memory"
/// instead of an anonymous trap.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_limit: usize,
    pub(crate) denied: bool,
    pub(crate) peak: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.denied = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The store data of one call.
pub(crate) struct HostState {
    pub(crate) plugin: Arc<str>,
    pub(crate) call: &'static str,
    pub(crate) limiter: Limiter,
    state: Arc<StateStore>,
    log_lines: u32,
    /// The last error-level line the guest logged: the SDKs log their panic
    /// message there, and the host quotes it when the call traps.
    pub(crate) last_error: Option<String>,
    wasi: Option<Wasi>,
    /// `wasi:http`: only a web-API plugin's hooks allow anything.
    pub(crate) http: Http,
    /// When the current call started, for a deadline that leaves out the
    /// time spent waiting on the network.
    pub(crate) started: Instant,
}

#[derive(Default)]
pub(crate) struct Http {
    ctx: WasiHttpCtx,
    pub(crate) hooks: Hooks,
}

struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl HostState {
    pub(crate) fn new(
        plugin: Arc<str>,
        call: &'static str,
        memory_limit: u64,
        state: Arc<StateStore>,
    ) -> Self {
        HostState {
            plugin,
            call,
            limiter: Limiter {
                memory_limit: usize::try_from(memory_limit).unwrap_or(usize::MAX),
                denied: false,
                peak: 0,
            },
            state,
            log_lines: 0,
            last_error: None,
            wasi: None,
            http: Http::default(),
            started: Instant::now(),
        }
    }

    /// Sends what a WASI guest printed to the host log, line by line.
    pub(crate) fn flush_stdio(&mut self) {
        let Some(wasi) = self.wasi.take() else {
            return;
        };
        for (stream, pipe) in [("stdout", &wasi.stdout), ("stderr", &wasi.stderr)] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(&bytes).lines() {
                tracing::info!(target: PLUGIN_LOG_TARGET, plugin = %self.plugin, call = self.call, stream, "{}", truncate(line));
            }
        }
    }
}

impl WasiView for HostState {
    /// WASI is built on first use: Rust and C guests never import it and so
    /// never pay for it. What it grants: nothing but clocks, random and
    /// captured stdio. No preopens, no environment, no arguments, no network
    /// (TCP/UDP/name lookup are off and every address is denied).
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let wasi = self.wasi();
        WasiCtxView {
            ctx: &mut wasi.ctx,
            table: &mut wasi.table,
        }
    }
}

impl WasiHttpView for HostState {
    /// `wasi:http` shares WASI's resource table (its streams and pollables
    /// are `wasi:io`'s); its hooks enforce the plugin's egress.
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.wasi();
        let (Some(wasi), http) = (self.wasi.as_mut(), &mut self.http) else {
            unreachable!("wasi() just made it")
        };
        WasiHttpCtxView {
            ctx: &mut http.ctx,
            table: &mut wasi.table,
            hooks: &mut http.hooks,
        }
    }
}

impl HostState {
    fn wasi(&mut self) -> &mut Wasi {
        self.wasi.get_or_insert_with(|| {
            let stdout = MemoryOutputPipe::new(MAX_STDIO);
            let stderr = MemoryOutputPipe::new(MAX_STDIO);
            let ctx = WasiCtx::builder()
                .stdout(stdout.clone())
                .stderr(stderr.clone())
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                .build();
            Wasi {
                ctx,
                table: ResourceTable::new(),
                stdout,
                stderr,
            }
        })
    }
}

fn truncate(s: &str) -> &str {
    if s.len() <= MAX_LOG_LINE {
        return s;
    }
    let mut end = MAX_LOG_LINE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl crate::bindings::task::weft::plugin::types::Host for HostState {}

impl log::Host for HostState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if matches!(level, Level::Error) {
            self.last_error = Some(truncate(&message).to_string());
        }
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES_PER_CALL {
            if self.log_lines == MAX_LOG_LINES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, call = self.call, "plugin log limit of {MAX_LOG_LINES_PER_CALL} lines per call reached; dropping the rest");
            }
            return Ok(());
        }
        let (plugin, call, msg) = (&*self.plugin, self.call, truncate(&message));
        match level {
            Level::Trace => tracing::trace!(target: PLUGIN_LOG_TARGET, plugin, call, "{msg}"),
            Level::Debug => tracing::debug!(target: PLUGIN_LOG_TARGET, plugin, call, "{msg}"),
            Level::Info => tracing::info!(target: PLUGIN_LOG_TARGET, plugin, call, "{msg}"),
            Level::Warn => tracing::warn!(target: PLUGIN_LOG_TARGET, plugin, call, "{msg}"),
            Level::Error => tracing::error!(target: PLUGIN_LOG_TARGET, plugin, call, "{msg}"),
        }
        Ok(())
    }
}

impl clock::Host for HostState {
    fn now_millis(&mut self) -> wasmtime::Result<u64> {
        Ok(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0))
    }

    fn monotonic_nanos(&mut self) -> wasmtime::Result<u64> {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let start = START.get_or_init(Instant::now);
        Ok(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

impl state::Host for HostState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        Ok(self.state.get(&key))
    }

    fn set(
        &mut self,
        key: String,
        value: Vec<u8>,
        ttl_millis: Option<u64>,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .state
            .set(key, value, ttl_millis.map(Duration::from_millis)))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        self.state.delete(&key);
        Ok(())
    }
}

/// The same imports as `weft:plugin@0.2.0` (its log, clock and state are
/// 0.1's, unchanged): each delegates to the 0.1 implementation.
mod v02 {
    use super::HostState;
    use crate::bindings::task::weft::plugin as v01;
    use crate::bindings::webapi::weft::plugin::{clock, log, state, types};

    impl types::Host for HostState {}

    impl log::Host for HostState {
        fn log(&mut self, level: types::Level, message: String) -> wasmtime::Result<()> {
            use v01::types::Level as L;
            let level = match level {
                types::Level::Trace => L::Trace,
                types::Level::Debug => L::Debug,
                types::Level::Info => L::Info,
                types::Level::Warn => L::Warn,
                types::Level::Error => L::Error,
            };
            v01::log::Host::log(self, level, message)
        }
    }

    impl clock::Host for HostState {
        fn now_millis(&mut self) -> wasmtime::Result<u64> {
            v01::clock::Host::now_millis(self)
        }

        fn monotonic_nanos(&mut self) -> wasmtime::Result<u64> {
            v01::clock::Host::monotonic_nanos(self)
        }
    }

    impl state::Host for HostState {
        fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
            v01::state::Host::get(self, key)
        }

        fn set(
            &mut self,
            key: String,
            value: Vec<u8>,
            ttl_millis: Option<u64>,
        ) -> wasmtime::Result<Result<(), String>> {
            v01::state::Host::set(self, key, value, ttl_millis)
        }

        fn delete(&mut self, key: String) -> wasmtime::Result<()> {
            v01::state::Host::delete(self, key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_enforces_limits_and_ttl() {
        let s = StateStore::new(StateLimits {
            max_key: 4,
            max_value: 4,
            max_entries: 2,
        });
        assert!(s.set("toolong".into(), vec![], None).is_err());
        assert!(s.set("k".into(), vec![0; 5], None).is_err());
        s.set("a".into(), vec![1], None).unwrap();
        s.set("b".into(), vec![2], Some(Duration::ZERO)).unwrap();
        assert_eq!(s.get("b"), None, "expired");
        // "b" was evicted on read, so a new key fits.
        s.set("c".into(), vec![3], None).unwrap();
        let e = s.set("d".into(), vec![4], None).unwrap_err();
        assert!(e.contains("full"), "{e}");
        assert_eq!(s.get("a"), Some(vec![1]));
        s.delete("a");
        assert_eq!(s.get("a"), None);
    }
}
