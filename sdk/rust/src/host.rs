//! The host's imports: log, clock, state. Natively (for plugin unit
//! tests) they are stand-ins: stderr, the system clock and an in-memory map.

/// Log lines land in the host's log with the plugin's name.
pub mod log {
    /// Severity.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Level {
        /// Very detailed.
        Trace,
        /// For plugin authors.
        Debug,
        /// Normal operation.
        Info,
        /// Handled surprises.
        Warn,
        /// Failures.
        Error,
    }

    /// Write one line.
    pub fn log(level: Level, message: &str) {
        #[cfg(any(feature = "task", feature = "middleware"))]
        {
            #[cfg(target_arch = "wasm32")]
            {
                use crate::wit::world::weft::plugin::types::Level as L;
                let l = match level {
                    Level::Trace => L::Trace,
                    Level::Debug => L::Debug,
                    Level::Info => L::Info,
                    Level::Warn => L::Warn,
                    Level::Error => L::Error,
                };
                crate::wit::world::log::log(l, message);
                return;
            }
        }
        #[allow(unreachable_code)]
        {
            eprintln!("[{level:?}] {message}");
        }
    }

    /// Log at info level.
    pub fn info(message: &str) {
        log(Level::Info, message)
    }

    /// Log at warn level.
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }

    /// Log at error level.
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// Clocks (plugins need no WASI for the time).
pub mod clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_millis() -> u64 {
        #[cfg(all(target_arch = "wasm32", any(feature = "task", feature = "middleware")))]
        {
            crate::wit::world::clock::now_millis()
        }
        #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
        {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0)
        }
    }

    /// A monotonic clock in nanoseconds.
    pub fn monotonic_nanos() -> u64 {
        #[cfg(all(target_arch = "wasm32", any(feature = "task", feature = "middleware")))]
        {
            crate::wit::world::clock::monotonic_nanos()
        }
        #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
        {
            use std::sync::OnceLock;
            static START: OnceLock<std::time::Instant> = OnceLock::new();
            START
                .get_or_init(std::time::Instant::now)
                .elapsed()
                .as_nanos() as u64
        }
    }
}

/// The plugin's key/value state: the only memory that outlives a call.
pub mod state {
    #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
    fn map() -> std::sync::MutexGuard<'static, std::collections::HashMap<String, Vec<u8>>> {
        use std::sync::{Mutex, OnceLock};
        static MAP: OnceLock<Mutex<std::collections::HashMap<String, Vec<u8>>>> = OnceLock::new();
        MAP.get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Read a value.
    pub fn get(key: &str) -> Option<Vec<u8>> {
        #[cfg(all(target_arch = "wasm32", any(feature = "task", feature = "middleware")))]
        {
            crate::wit::world::state::get(key)
        }
        #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
        {
            map().get(key).cloned()
        }
    }

    /// Store a value, optionally expiring after `ttl_millis`.
    pub fn set(key: &str, value: &[u8], ttl_millis: Option<u64>) -> Result<(), String> {
        #[cfg(all(target_arch = "wasm32", any(feature = "task", feature = "middleware")))]
        {
            crate::wit::world::state::set(key, value, ttl_millis)
        }
        #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
        {
            let _ = ttl_millis;
            map().insert(key.to_string(), value.to_vec());
            Ok(())
        }
    }

    /// Remove a value.
    pub fn delete(key: &str) {
        #[cfg(all(target_arch = "wasm32", any(feature = "task", feature = "middleware")))]
        {
            crate::wit::world::state::delete(key)
        }
        #[cfg(not(all(target_arch = "wasm32", any(feature = "task", feature = "middleware"))))]
        {
            map().remove(key);
        }
    }
}

/// Sends the panic message to the host log at error level before the trap,
/// so the host's error says why the plugin died, not only that it did.
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
