//! The host's imports: log, clock, state.
//!
//! In a component they call the host. Natively (a plugin's unit tests and
//! benchmarks) they are stand-ins: log lines go to stderr, the clocks are
//! the system's, and state is an in-memory map of this process.

/// Log lines that land in the host's log under the plugin's name.
///
/// ```
/// use weft_plugin_sdk::log;
///
/// log::info("building the pod");
/// log::log(log::Level::Debug, "config parsed");
/// ```
pub mod log {
    /// Severity of a log line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Level {
        /// Very detailed tracing.
        Trace,
        /// Diagnostics for plugin authors.
        Debug,
        /// Normal operation.
        Info,
        /// Something unexpected that the plugin handled.
        Warn,
        /// Something failed.
        Error,
    }

    /// Writes one log line.
    #[cfg(target_arch = "wasm32")]
    pub fn log(level: Level, message: &str) {
        use crate::wit::host::types::Level as L;
        let level = match level {
            Level::Trace => L::Trace,
            Level::Debug => L::Debug,
            Level::Info => L::Info,
            Level::Warn => L::Warn,
            Level::Error => L::Error,
        };
        super::imports::log(level, message);
    }

    /// Writes one log line (natively: to stderr).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn log(level: Level, message: &str) {
        eprintln!("[{level:?}] {message}");
    }

    /// Logs at trace level.
    pub fn trace(message: &str) {
        log(Level::Trace, message)
    }

    /// Logs at debug level.
    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }

    /// Logs at info level.
    pub fn info(message: &str) {
        log(Level::Info, message)
    }

    /// Logs at warn level.
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }

    /// Logs at error level.
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// Clocks from the host: a plugin needs no WASI for the time.
///
/// ```
/// use weft_plugin_sdk::clock;
///
/// let start = clock::monotonic_nanos();
/// assert!(clock::now_millis() > 1_600_000_000_000); // after September 2020
/// assert!(clock::monotonic_nanos() >= start);
/// ```
pub mod clock {
    /// Wall-clock time in milliseconds since the Unix epoch.
    pub fn now_millis() -> u64 {
        #[cfg(target_arch = "wasm32")]
        {
            super::imports::now_millis()
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
    }

    /// A monotonic clock in nanoseconds, for durations inside one call.
    pub fn monotonic_nanos() -> u64 {
        #[cfg(target_arch = "wasm32")]
        {
            super::imports::monotonic_nanos()
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            use std::sync::OnceLock;
            static START: OnceLock<std::time::Instant> = OnceLock::new();
            let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        }
    }
}

/// The plugin's key/value store on the host: the only memory that outlives
/// a call, since every call gets a fresh instance. Keys are private to the
/// plugin; the host bounds key and value sizes.
///
/// ```
/// use weft_plugin_sdk::state;
///
/// let seen = state::get("calls").map_or(0, |v| v.len());
/// state::set("calls", &vec![1; seen + 1], Some(60_000)).expect("small enough");
/// assert_eq!(state::get("calls").map(|v| v.len()), Some(seen + 1));
/// state::delete("calls");
/// assert_eq!(state::get("calls"), None);
/// ```
pub mod state {
    /// Reads a value; `None` when missing or expired.
    pub fn get(key: &str) -> Option<Vec<u8>> {
        #[cfg(target_arch = "wasm32")]
        {
            super::imports::get(key)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            native::get(key)
        }
    }

    /// Stores a value, optionally expiring after `ttl_millis`. Fails when
    /// the key or value is larger than the host allows.
    pub fn set(key: &str, value: &[u8], ttl_millis: Option<u64>) -> Result<(), String> {
        #[cfg(target_arch = "wasm32")]
        {
            super::imports::set(key, value, ttl_millis)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            native::set(key, value, ttl_millis);
            Ok(())
        }
    }

    /// Removes a value; removing a missing key is not an error.
    pub fn delete(key: &str) {
        #[cfg(target_arch = "wasm32")]
        {
            super::imports::delete(key)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            native::delete(key)
        }
    }

    /// The stand-in: one map per process, expiry included.
    #[cfg(not(target_arch = "wasm32"))]
    mod native {
        use std::collections::HashMap;
        use std::sync::{Mutex, MutexGuard, OnceLock};

        type Entry = (Vec<u8>, Option<u64>);

        fn map() -> MutexGuard<'static, HashMap<String, Entry>> {
            static MAP: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
            MAP.get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner())
        }

        pub(super) fn get(key: &str) -> Option<Vec<u8>> {
            let now = crate::clock::now_millis();
            let mut map = map();
            match map.get(key) {
                Some((_, Some(expiry))) if *expiry <= now => {
                    map.remove(key);
                    None
                }
                Some((value, _)) => Some(value.clone()),
                None => None,
            }
        }

        pub(super) fn set(key: &str, value: &[u8], ttl_millis: Option<u64>) {
            let expiry = ttl_millis.map(|t| crate::clock::now_millis().saturating_add(t));
            map().insert(key.to_string(), (value.to_vec(), expiry));
        }

        pub(super) fn delete(key: &str) {
            map().remove(key);
        }
    }
}

/// Sends a panic's message to the host log at error level before the
/// instance traps, so the host's error says why the plugin died, not only
/// that it did. Installed by the export glue on the first call.
#[cfg_attr(not(any(feature = "task", feature = "middleware")), allow(dead_code))]
pub(crate) fn install_panic_hook() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log::log(log::Level::Error, &format!("panic: {info}"));
        }));
    });
}

/// The host imports the functions above call in a component: those of
/// `weft:plugin@0.1.0` (`log`, `clock`, `state`), directly.
#[cfg(all(target_arch = "wasm32", not(feature = "webapi")))]
mod imports {
    pub(super) use crate::wit::host::clock::{monotonic_nanos, now_millis};
    pub(super) use crate::wit::host::log::log;
    pub(super) use crate::wit::host::state::{delete, get, set};
}

/// With the `webapi` feature, the imports of the world a call entered by.
///
/// A component of a 0.1 world (task, middleware) imports
/// `weft:plugin/{log,clock,state}@0.1.0`; one of the web-API world imports
/// the same interfaces of `weft:plugin@0.2.0`. Each export glue selects its
/// world's [`world::Imports`] before it runs the plugin, and these functions
/// call through it, so a component imports only its own world's interfaces
/// (the other table is never referenced, and the linker drops it). Without
/// the feature, the 0.1 imports are called directly, as before the feature
/// existed.
#[cfg(all(target_arch = "wasm32", feature = "webapi"))]
mod imports {
    use super::world::{current, NOT_ENTERED};
    use crate::wit::host::types::Level;

    pub(super) fn log(level: Level, message: &str) {
        if let Some(imports) = current() {
            (imports.log)(level, message)
        }
    }

    pub(super) fn now_millis() -> u64 {
        current().map_or(0, |imports| (imports.now_millis)())
    }

    pub(super) fn monotonic_nanos() -> u64 {
        current().map_or(0, |imports| (imports.monotonic_nanos)())
    }

    pub(super) fn get(key: &str) -> Option<Vec<u8>> {
        current().and_then(|imports| (imports.get)(key))
    }

    pub(super) fn set(key: &str, value: &[u8], ttl_millis: Option<u64>) -> Result<(), String> {
        match current() {
            Some(imports) => (imports.set)(key, value, ttl_millis),
            None => Err(NOT_ENTERED.to_string()),
        }
    }

    pub(super) fn delete(key: &str) {
        if let Some(imports) = current() {
            (imports.delete)(key)
        }
    }
}

/// The world a call entered by (the `webapi` feature in a component): a
/// component serves one world, so the first selection holds for the
/// instance's life. Before any (impossible through the exports), log
/// lines are dropped, the clocks read 0, and state is empty and refuses
/// writes.
#[cfg(all(target_arch = "wasm32", feature = "webapi"))]
pub(crate) mod world {
    use std::sync::OnceLock;

    /// One world's log, clock and state imports (the level is the 0.1
    /// type, the same enum in both versions).
    pub(crate) struct Imports {
        pub(crate) log: fn(crate::wit::host::types::Level, &str),
        pub(crate) now_millis: fn() -> u64,
        pub(crate) monotonic_nanos: fn() -> u64,
        pub(crate) get: fn(&str) -> Option<Vec<u8>>,
        pub(crate) set: fn(&str, &[u8], Option<u64>) -> Result<(), String>,
        pub(crate) delete: fn(&str),
    }

    static CURRENT: OnceLock<&'static Imports> = OnceLock::new();

    pub(crate) const NOT_ENTERED: &str =
        "no host world selected: state is only reachable inside a plugin call";

    /// Selects the imports of the world whose export was called.
    pub(crate) fn enter(imports: &'static Imports) {
        let _ = CURRENT.set(imports);
    }

    pub(crate) fn current() -> Option<&'static Imports> {
        CURRENT.get().copied()
    }
}
