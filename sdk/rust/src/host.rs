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
        crate::wit::host::log::log(level, message);
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
            crate::wit::host::clock::now_millis()
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
            crate::wit::host::clock::monotonic_nanos()
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
            crate::wit::host::state::get(key)
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
            crate::wit::host::state::set(key, value, ttl_millis)
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
            crate::wit::host::state::delete(key)
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
