//! An audit trail of Weft's admin API: one structured log line per
//! answered call, saying who called what, from where, and how it ended.
//!
//! The manifest asks for `observeOutcome`, so the host calls the plugin
//! twice: before the call (the request phase; `x-weft-phase` absent or
//! `request`) and once it was answered (`x-weft-phase: outcome`, with
//! `x-weft-outcome` the gRPC code name and `x-weft-outcome-message`). The
//! request phase proceeds at once with no edits, so the plugin costs the
//! call almost nothing; the outcome phase runs off the answer's path and
//! writes the line through the host's log (which tags it with the plugin's
//! name), e.g.
//!
//! ```text
//! audit method=/weft.admin.v1.AdminService/CreateExecution principal=alice peer=127.0.0.1:5555 request_id=r-1 outcome=OK
//! audit method=/weft.admin.v1.AdminService/DeleteExecution principal=anonymous peer=10.0.0.9:4100 request_id=weft-1750000000000-7 outcome=UNAUTHENTICATED message="invalid bearer token: the token has expired"
//! ```
//!
//! The caller's groups and who authenticated it (`groups`,
//! `authenticated_by`: `oidc`, `session`, `token-review`, or absent for a
//! middleware) follow the principal when the host set them, and the
//! authorization's decision in words (`decision`: which binding allowed
//! the call, or who may not do what where) follows the outcome, e.g.
//!
//! ```text
//! audit method=/weft.admin.v1.AdminService/CreateExecution principal=alice groups=team-a authenticated_by=oidc peer=127.0.0.1:5555 request_id=r-2 outcome=PERMISSION_DENIED message="..." decision="user \"alice\" may not create workflows.weft.dev in namespace \"team-b\" (...)"
//! ```
//!
//! Calls refused by an earlier middleware are logged too: the host reports
//! their outcome as well. Values are written logfmt-style, quoted and
//! escaped when they hold spaces, quotes, `=` or anything but printable
//! ASCII, so a client cannot forge fields or lines through its metadata.
//!
//! `methods` restricts the log to some methods (empty: all);
//! `includeMetadata` adds metadata keys as fields. `authorization` is never
//! logged, even when listed: an audit log is not a place for credentials.

use serde::Deserialize;
use weft_plugin_sdk::{log, Call, MiddlewarePlugin, Value, Verdict};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

const PHASE: &str = "x-weft-phase";
const OUTCOME: &str = "x-weft-outcome";
const OUTCOME_MESSAGE: &str = "x-weft-outcome-message";
const PRINCIPAL: &str = "x-weft-principal";
const GROUPS: &str = "x-weft-groups";
const AUTHENTICATED_BY: &str = "x-weft-authenticated-by";
const DECISION: &str = "x-weft-decision";
const REQUEST_ID: &str = "x-request-id";
/// Never logged: the credential.
const AUTHORIZATION: &str = "authorization";

/// The level audit lines are logged at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// `trace`
    Trace,
    /// `debug`
    Debug,
    /// `info`
    #[default]
    Info,
    /// `warn`
    Warn,
    /// `error`
    Error,
}

impl From<Level> for log::Level {
    fn from(l: Level) -> Self {
        match l {
            Level::Trace => log::Level::Trace,
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        }
    }
}

/// The plugin's configuration (manifest defaults merged with the
/// operator's overrides). Unknown keys are an error, so a typo is noticed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// The log level of audit lines.
    pub level: Level,
    /// Full method names to log; empty: every method.
    pub methods: Vec<String>,
    /// Extra metadata keys to log as fields (never `authorization`).
    pub include_metadata: Vec<String>,
}

impl Config {
    /// Reads the configuration the host passed (`null`: defaults).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        if value.is_null() {
            return Ok(Config::default());
        }
        serde_json::from_value(value.clone()).map_err(|e| e.to_string())
    }
}

/// Whether this is the host's second, after-the-answer call.
pub fn is_outcome_phase(call: &Call) -> bool {
    call.metadata.get(PHASE).map(String::as_str) == Some("outcome")
}

/// The audit line for an outcome-phase call, or `None` when `methods`
/// leaves the call out.
pub fn line(call: &Call, config: &Config) -> Option<String> {
    if !config.methods.is_empty() && !config.methods.contains(&call.method) {
        return None;
    }
    let meta = |key: &str| call.metadata.get(key).map(String::as_str);
    let mut line = String::from("audit");
    field(&mut line, "method", &call.method);
    field(
        &mut line,
        "principal",
        meta(PRINCIPAL).unwrap_or("anonymous"),
    );
    for (name, key) in [("groups", GROUPS), ("authenticated_by", AUTHENTICATED_BY)] {
        if let Some(v) = meta(key).filter(|v| !v.is_empty()) {
            field(&mut line, name, v);
        }
    }
    field(&mut line, "peer", call.peer.as_deref().unwrap_or("-"));
    field(&mut line, "request_id", meta(REQUEST_ID).unwrap_or("-"));
    field(&mut line, "outcome", meta(OUTCOME).unwrap_or("-"));
    if let Some(message) = meta(OUTCOME_MESSAGE).filter(|m| !m.is_empty()) {
        field(&mut line, "message", message);
    }
    if let Some(decision) = meta(DECISION) {
        field(&mut line, "decision", decision);
    }
    for key in &config.include_metadata {
        if key == AUTHORIZATION {
            continue;
        }
        if let Some(value) = meta(key) {
            field(&mut line, key, value);
        }
    }
    Some(line)
}

/// Appends ` key=value`, quoting the value when it needs it.
fn field(line: &mut String, key: &str, value: &str) {
    line.push(' ');
    line.push_str(key);
    line.push('=');
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'=' && b != b'\\');
    if plain {
        line.push_str(value);
    } else {
        line.push('"');
        for c in value.chars() {
            match c {
                '"' => line.push_str("\\\""),
                '\\' => line.push_str("\\\\"),
                '\n' => line.push_str("\\n"),
                '\r' => line.push_str("\\r"),
                '\t' => line.push_str("\\t"),
                c if c.is_control() => line.push_str(&format!("\\u{{{:x}}}", c as u32)),
                c => line.push(c),
            }
        }
        line.push('"');
    }
}

/// Decides about one call: always proceeds; logs in the outcome phase.
pub fn audit(call: &Call) -> Verdict {
    if !is_outcome_phase(call) {
        return Verdict::proceed();
    }
    let config = Config::from_value(&call.plugin_config).unwrap_or_else(|e| {
        // An audit trail with default settings beats none.
        log::error(&format!(
            "invalid configuration, logging with defaults: {e}"
        ));
        Config::default()
    });
    if let Some(line) = line(call, &config) {
        log::log(config.level.into(), &line);
    }
    Verdict::proceed()
}

/// The component.
pub struct Audit;

impl MiddlewarePlugin for Audit {
    fn on_request(call: Call) -> Verdict {
        audit(&call)
    }
}

weft_plugin_sdk::export_middleware_plugin!(Audit);

#[cfg(test)]
mod tests;
