//! Task output caching (Flyte's data catalog, Argo's memoize): what a
//! cache entry is keyed by and when it may be used. Where entries are
//! stored is the controller's business (see `docs/lifecycle.md`).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::artifacts::ResolvedInput;
use crate::spec::TaskSpec;

pub use crate::spec::cache::CacheSpec;

/// The cache key: a sha256, in hex, over the task type, its config, the
/// resolved inputs and the cache version (and the plugin digest when
/// `includePlugin`). serde_json writes object keys sorted, so equal
/// values give equal keys whatever order the YAML had.
pub fn key(
    task: &TaskSpec,
    inputs: &Map<String, Value>,
    artifacts: &[ResolvedInput],
    cache: &CacheSpec,
    plugin: Option<&str>,
) -> String {
    // Input artifacts count by content (their digests, in declaration
    // order), not by name, path or key: the same file under another name
    // is the same input. Absent when none, so older keys stay valid.
    let contents: Vec<&str> = artifacts.iter().map(|a| a.cache_identity()).collect();
    let mut doc = serde_json::json!({
        "type": task.task_type,
        "config": task.config,
        "inputs": inputs,
        "version": cache.version,
        "plugin": if cache.include_plugin { plugin } else { None },
    });
    if !contents.is_empty() {
        doc["artifacts"] = contents.into();
    }
    let digest = Sha256::digest(doc.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// One cached result, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheEntry {
    /// The task type.
    pub task_type: String,
    /// The cache version it was written under.
    pub version: String,
    /// The Workflow that produced it.
    pub workflow: String,
    /// The node that produced it.
    pub node: String,
    /// When it was written (RFC 3339).
    pub created_at: String,
    /// The writer's `maxAge`: past it the entry is collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
    /// The task's outputs.
    #[serde(default)]
    pub outputs: Map<String, Value>,
    /// Or where they are kept, when too large to hold here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs_ref: Option<crate::artifacts::ArtifactRef>,
}

impl CacheEntry {
    /// Whether a reader with `max_age` may use the entry at `now`.
    pub fn fresh(&self, max_age: Option<Duration>, now: SystemTime) -> bool {
        let Some(created) = crate::status::parse_timestamp(Some(&self.created_at)) else {
            return false;
        };
        max_age.is_none_or(|age| created + age > now)
    }

    /// Whether the entry is past its writer's `maxAge` (to be collected).
    pub fn expired(&self, now: SystemTime) -> bool {
        let age = self
            .max_age
            .as_deref()
            .and_then(|s| humantime::parse_duration(s).ok());
        age.is_some() && !self.fresh(age, now)
    }
}

#[cfg(test)]
mod tests;
