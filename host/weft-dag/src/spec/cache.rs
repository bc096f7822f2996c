//! A task node's `cache` (the type; keys and entries are `crate::cache`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A task node's `cache`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheSpec {
    /// Part of the key: bump it to stop using what was cached before (a
    /// changed task image or code that the config does not show).
    pub version: String,
    /// An entry older than this is not used (e.g. `24h`); absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
    /// Also key on the plugin's digest, so a plugin upgrade starts an
    /// empty cache. Off by default: a plugin upgrade (a bug fix in how a
    /// pod is built) rarely changes what a task computes, and emptying
    /// every cache on each upgrade would rerun days of work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_plugin: bool,
}

impl CacheSpec {
    /// `maxAge`, parsed (validated at compile time).
    pub fn max_age(&self) -> Option<Duration> {
        self.max_age
            .as_deref()
            .and_then(|s| humantime::parse_duration(s).ok())
    }
}
