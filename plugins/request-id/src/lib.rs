//! Keeps `x-request-id` usable: one short, plain id per call that logs,
//! traces and support tickets can quote.
//!
//! The host always sets `x-request-id` before any plugin runs (a client's
//! own, or one it generates), so this plugin never has to invent one for a
//! call that lacks it; it *normalises* what a client sent. A client id that
//! is longer than `maxLength` or has characters outside `[A-Za-z0-9._:-]`
//! would break log parsers and lets a client smuggle text into every log
//! line that quotes it, so it is either
//!
//! - replaced (`onInvalid: replace`, the default) by `<prefix><now
//!   millis>-<counter>`, the client's value kept in `x-request-id-original`
//!   for whoever must correlate with the client's logs; or
//! - refused (`onInvalid: reject`) with `INVALID_ARGUMENT` naming
//!   `x-request-id`, for installations that want clients to fix theirs.
//!
//! The final id is also copied to every key in `propagateAs` (e.g.
//! `x-correlation-id`) for services that look for another name.
//!
//! The counter lives in host state because every call gets a fresh
//! instance; its read-modify-write is not atomic, so two concurrent calls
//! in the same millisecond may share an id. The id is for correlation, not
//! a unique key.

use serde::Deserialize;
use weft_plugin_sdk::{clock, log, state, Call, Code, MiddlewarePlugin, Value, Verdict};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The metadata key this plugin is about.
pub const REQUEST_ID: &str = "x-request-id";
/// Where a replaced client id is kept.
pub const ORIGINAL: &str = "x-request-id-original";
/// The state key of the id counter.
const COUNTER: &str = "counter";

/// What to do with a client id that does not fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Replace it, keeping it in `x-request-id-original`.
    #[default]
    Replace,
    /// Refuse the call with `INVALID_ARGUMENT`.
    Reject,
}

/// The plugin's configuration (manifest defaults merged with the
/// operator's overrides). Unknown keys are an error, so a typo is noticed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// The longest id kept as it is.
    pub max_length: usize,
    /// What to do with an id that is too long or has other characters.
    pub on_invalid: OnInvalid,
    /// The start of generated ids, so they are told apart from clients'.
    pub prefix: String,
    /// More metadata keys that get the final id.
    pub propagate_as: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_length: 128,
            on_invalid: OnInvalid::Replace,
            prefix: "weft-".into(),
            propagate_as: Vec::new(),
        }
    }
}

impl Config {
    /// Reads and checks the configuration the host passed (`null`: defaults).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        if value.is_null() {
            return Ok(Config::default());
        }
        let config: Config = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        if config.max_length == 0 {
            return Err("maxLength must be at least 1".into());
        }
        if config.prefix.len() > 64 || !config.prefix.chars().all(allowed) {
            return Err(format!(
                "prefix {:?} must be at most 64 characters of [A-Za-z0-9._:-]",
                config.prefix
            ));
        }
        for key in &config.propagate_as {
            if !is_key(key) {
                return Err(format!(
                    "propagateAs: {key:?} is not a lower-case metadata key"
                ));
            }
            // Writing the id into an identity or credential key would let
            // a client choose it.
            if key.starts_with("x-weft-")
                || key == "authorization"
                || key == REQUEST_ID
                || key == ORIGINAL
            {
                return Err(format!("propagateAs: {key} is reserved"));
            }
        }
        Ok(config)
    }
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

fn is_key(key: &str) -> bool {
    !key.is_empty()
        && !key.ends_with("-bin")
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

/// Whether a client's id is kept as it is.
pub fn is_valid(id: &str, max_length: usize) -> bool {
    !id.is_empty() && id.len() <= max_length && id.chars().all(allowed)
}

/// A new id: the prefix, the time and a counter from host state (so ids
/// generated in the same millisecond differ).
pub fn generate(prefix: &str, now_millis: u64) -> String {
    let n = state::get(COUNTER)
        .and_then(|v| String::from_utf8(v).ok()?.parse::<u64>().ok())
        .unwrap_or(0)
        .wrapping_add(1);
    if let Err(e) = state::set(COUNTER, n.to_string().as_bytes(), None) {
        log::warn(&format!("could not store the id counter: {e}"));
    }
    format!("{prefix}{now_millis}-{n}")
}

/// Decides about one call at `now_millis` (the host's clock in the
/// component, a fixed time in tests).
pub fn normalise(call: &Call, now_millis: u64) -> Verdict {
    let config = match Config::from_value(&call.plugin_config) {
        Ok(c) => c,
        Err(e) => {
            // Fail open like the manifest says: the id is a convenience,
            // not worth refusing calls over.
            log::error(&format!("invalid configuration, leaving ids alone: {e}"));
            return Verdict::proceed();
        }
    };
    let (id, mut verdict) = match call.metadata.get(REQUEST_ID) {
        Some(id) if is_valid(id, config.max_length) => (id.clone(), Verdict::proceed()),
        Some(_) if config.on_invalid == OnInvalid::Reject => {
            return Verdict::reject(
                Code::InvalidArgument,
                format!(
                    "x-request-id must be 1 to {} characters of [A-Za-z0-9._:-]",
                    config.max_length
                ),
            );
        }
        Some(original) => {
            let id = generate(&config.prefix, now_millis);
            let verdict = Verdict::proceed_setting(REQUEST_ID, id.clone())
                .and_set(ORIGINAL, original.clone());
            (id, verdict)
        }
        // The host guarantees one; should it ever not, make one.
        None => {
            let id = generate(&config.prefix, now_millis);
            (id.clone(), Verdict::proceed_setting(REQUEST_ID, id))
        }
    };
    for key in &config.propagate_as {
        verdict = verdict.and_set(key.clone(), id.clone());
    }
    verdict
}

/// The component.
pub struct RequestId;

impl MiddlewarePlugin for RequestId {
    fn on_request(call: Call) -> Verdict {
        normalise(&call, clock::now_millis())
    }
}

weft_plugin_sdk::export_middleware_plugin!(RequestId);

#[cfg(test)]
mod tests;
