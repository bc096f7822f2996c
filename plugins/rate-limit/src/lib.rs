//! A token-bucket rate limit per caller for Weft's admin API, so one
//! runaway script or client cannot starve the others (or the cluster the
//! API writes to).
//!
//! Each caller has a bucket of `burst` tokens that refills at `rate` tokens
//! per second; a call takes one token, and a call that finds less than one
//! is refused with `RESOURCE_EXHAUSTED`, naming the caller, the limit and
//! how long to wait. The caller is the authenticated principal
//! (`x-weft-principal`, so put this plugin after `auth-token`), else the
//! peer's IP address (the port is left out: a new connection must not mean
//! a new bucket), else `anonymous`. `overrides` gives named principals
//! their own `rate` and `burst`; `perMethod: true` keeps one bucket per
//! caller *and* method.
//!
//! Every call gets a fresh instance, so buckets live in host state, with a
//! time to live a little longer than a full refill: a bucket that expired
//! would have been full anyway, so forgetting it changes nothing.
//!
//! The manifest says `failStrategy: closed`. A limiter that fails open is
//! only as strong as its weakest input: whatever made it trap (a deadline
//! overrun under load, a broken configuration) would lift the limit exactly
//! when it matters. Its work is a few arithmetic operations and two state
//! calls, so it is not the plugin likely to fail; a broken configuration
//! is noticed at once (every call is refused with `INTERNAL`) instead of
//! silently running without limits.

use std::collections::BTreeMap;

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

use serde::Deserialize;
use weft_plugin_sdk::{clock, log, state, Call, Code, MiddlewarePlugin, Value, Verdict};

/// Where `auth-token` puts the authenticated identity.
const PRINCIPAL: &str = "x-weft-principal";
/// Set by the host in the second (outcome) call of observing plugins.
const PHASE: &str = "x-weft-phase";

/// One caller's limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// Tokens added per second.
    pub rate: f64,
    /// The bucket's size: how many calls may come at once after a pause.
    pub burst: f64,
}

/// A principal's own limit; a key left out keeps the global one.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// Tokens per second.
    pub rate: Option<f64>,
    /// Bucket size.
    pub burst: Option<f64>,
}

/// The plugin's configuration (manifest defaults merged with the
/// operator's overrides). Unknown keys are an error, so a typo is noticed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Tokens per second.
    pub rate: f64,
    /// Bucket size.
    pub burst: f64,
    /// Per-caller limits, by principal (or `peer:<ip>`, or `anonymous`).
    pub overrides: BTreeMap<String, Override>,
    /// One bucket per caller and method instead of per caller.
    pub per_method: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rate: 10.0,
            burst: 20.0,
            overrides: BTreeMap::new(),
            per_method: false,
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
        check(
            "",
            Limit {
                rate: config.rate,
                burst: config.burst,
            },
        )?;
        for who in config.overrides.keys() {
            check(&format!("overrides.{who}."), config.limit_for(who))?;
        }
        Ok(config)
    }

    /// The limit of the caller named `who`.
    pub fn limit_for(&self, who: &str) -> Limit {
        let o = self.overrides.get(who).copied().unwrap_or_default();
        Limit {
            rate: o.rate.unwrap_or(self.rate),
            burst: o.burst.unwrap_or(self.burst),
        }
    }
}

fn check(path: &str, limit: Limit) -> Result<(), String> {
    if !(limit.rate.is_finite() && limit.rate > 0.0) {
        return Err(format!("{path}rate must be a positive number"));
    }
    if !(limit.burst.is_finite() && limit.burst >= 1.0) {
        return Err(format!("{path}burst must be at least 1"));
    }
    Ok(())
}

/// Who a call counts against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An authenticated principal.
    Principal(String),
    /// An unauthenticated peer, by IP address.
    Peer(String),
    /// Neither is known.
    Anonymous,
}

impl Caller {
    /// Identifies the caller of `call`.
    pub fn of(call: &Call) -> Caller {
        if let Some(p) = call.metadata.get(PRINCIPAL).filter(|p| !p.is_empty()) {
            return Caller::Principal(p.clone());
        }
        match call.peer.as_deref().map(peer_host) {
            Some(host) if !host.is_empty() => Caller::Peer(host.to_string()),
            _ => Caller::Anonymous,
        }
    }

    /// The name `overrides` matches.
    pub fn name(&self) -> String {
        match self {
            Caller::Principal(p) => p.clone(),
            Caller::Peer(ip) => format!("peer:{ip}"),
            Caller::Anonymous => "anonymous".into(),
        }
    }

    /// The state key of its bucket; the prefixes keep a principal from
    /// sharing a bucket with a peer address that spells the same.
    fn key(&self, method: Option<&str>) -> String {
        let base = match self {
            Caller::Principal(p) => format!("p/{p}"),
            Caller::Peer(ip) => format!("a/{ip}"),
            Caller::Anonymous => "anon".into(),
        };
        match method {
            Some(m) => format!("{base} {m}"),
            None => base,
        }
    }
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Principal(p) => write!(f, "principal {p}"),
            Caller::Peer(ip) => write!(f, "peer {ip}"),
            Caller::Anonymous => f.write_str("anonymous callers"),
        }
    }
}

/// The host part of a peer address: `10.0.0.1:5555` -> `10.0.0.1`,
/// `[::1]:5555` -> `::1`.
pub fn peer_host(peer: &str) -> &str {
    if let Some(rest) = peer.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match peer.split_once(':') {
        // Exactly one colon: host and port. More: a bare IPv6 address.
        Some((host, port)) if !port.contains(':') => host,
        _ => peer,
    }
}

/// A caller's bucket as stored: the tokens left at the last refill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens left (fractional: refill is continuous).
    pub tokens: f64,
    /// When it was last refilled, host milliseconds.
    pub at_millis: u64,
}

impl Bucket {
    /// 16 bytes: the tokens and the time, little-endian.
    pub fn encode(&self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.tokens.to_le_bytes());
        out[8..].copy_from_slice(&self.at_millis.to_le_bytes());
        out
    }

    /// Reads [`Bucket::encode`]'s bytes; anything else is no bucket.
    pub fn decode(bytes: &[u8]) -> Option<Bucket> {
        let bytes: &[u8; 16] = bytes.try_into().ok()?;
        let tokens = f64::from_le_bytes(bytes[..8].try_into().ok()?);
        let at_millis = u64::from_le_bytes(bytes[8..].try_into().ok()?);
        tokens.is_finite().then_some(Bucket { tokens, at_millis })
    }
}

/// Takes one token from `bucket` (none: a full one) at `now_millis`: the
/// bucket to store, or the milliseconds until a token is there.
pub fn take(bucket: Option<Bucket>, limit: Limit, now_millis: u64) -> Result<Bucket, u64> {
    let tokens = match bucket {
        None => limit.burst,
        Some(b) => {
            // A clock that went back refills nothing (and takes nothing).
            let elapsed = now_millis.saturating_sub(b.at_millis) as f64 / 1000.0;
            (b.tokens + elapsed * limit.rate).min(limit.burst)
        }
    };
    if tokens >= 1.0 {
        Ok(Bucket {
            tokens: tokens - 1.0,
            at_millis: bucket.map_or(now_millis, |b| b.at_millis.max(now_millis)),
        })
    } else {
        Err(((1.0 - tokens) / limit.rate * 1000.0).ceil().max(1.0) as u64)
    }
}

/// How long a stored bucket is kept: a full refill and a second.
pub fn ttl_millis(limit: Limit) -> u64 {
    (limit.burst / limit.rate * 1000.0).ceil() as u64 + 1000
}

/// Decides about one call at `now_millis` (the host's clock in the
/// component, a fixed time in tests).
///
/// The bucket's read-modify-write through host state is not atomic: calls
/// of one caller that run concurrently may each see the same tokens, so
/// under concurrency the limit is approximate (a burst may let a few more
/// through), never stricter than configured.
pub fn limit(call: &Call, now_millis: u64) -> Verdict {
    if call.metadata.get(PHASE).map(String::as_str) == Some("outcome") {
        return Verdict::proceed();
    }
    let config = match Config::from_value(&call.plugin_config) {
        Ok(c) => c,
        Err(e) => {
            log::error(&format!("invalid configuration: {e}"));
            return Verdict::reject(Code::Internal, format!("rate-limit is misconfigured: {e}"));
        }
    };
    let caller = Caller::of(call);
    let limit = config.limit_for(&caller.name());
    let key = caller.key(config.per_method.then_some(call.method.as_str()));
    let bucket = state::get(&key).and_then(|b| Bucket::decode(&b));
    match take(bucket, limit, now_millis) {
        Ok(bucket) => {
            if let Err(e) = state::set(&key, &bucket.encode(), Some(ttl_millis(limit))) {
                // Cannot count this call; refusing it would punish the
                // caller for the host's limit.
                log::warn(&format!("could not store the bucket of {caller}: {e}"));
            }
            Verdict::proceed()
        }
        Err(retry_after) => Verdict::reject(
            Code::ResourceExhausted,
            format!(
                "rate limit exceeded for {caller}{}: {} calls/s, burst {}; retry after {retry_after} ms",
                if config.per_method {
                    format!(" on {}", call.method)
                } else {
                    String::new()
                },
                limit.rate,
                limit.burst,
            ),
        ),
    }
}

/// The component.
pub struct RateLimit;

impl MiddlewarePlugin for RateLimit {
    fn on_request(call: Call) -> Verdict {
        limit(&call, clock::now_millis())
    }
}

weft_plugin_sdk::export_middleware_plugin!(RateLimit);

#[cfg(test)]
mod tests;
