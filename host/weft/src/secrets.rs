//! Secret references in plugin configuration, as Kubernetes env vars have
//! them: any value of a plugin's `config` (in its manifest) may be
//!
//! ```yaml
//! tokens:
//!   valueFrom:
//!     secretKeyRef: {name: weft-auth-token, key: tokens.json, format: json, optional: true}
//! ```
//!
//! The host reads the Secret (in the plugin ConfigMap's namespace) when it
//! loads the plugin and again whenever the Secret changes, and hands the
//! value to the guest in its `plugin-config`. The value lives only in the
//! host's memory: ConfigMaps, Events, logs, metrics and status name the
//! Secret and the key, never the value. Errors do the same.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Map, Value};

/// How a Secret's bytes become a config value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A string (UTF-8), as an env var would be.
    #[default]
    String,
    /// Parsed as JSON (a map of tokens, a list of keys, a number...).
    Json,
}

/// One `secretKeyRef`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret, in the plugin's namespace.
    pub name: String,
    /// The key of its `data`.
    pub key: String,
    /// When the Secret or the key is missing, leave the config key out
    /// (the plugin's own default applies) instead of refusing the plugin.
    #[serde(default)]
    pub optional: bool,
    /// How the bytes are read.
    #[serde(default)]
    pub format: Format,
}

/// A reference that cannot be resolved. Names the config path, the Secret
/// and the key; never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// `valueFrom` is not a well-formed `{secretKeyRef: {name, key}}`.
    #[error(
        "{path}: bad valueFrom (want {{secretKeyRef: {{name, key, optional?, format?: string|json}}}}): {problem}"
    )]
    BadRef {
        /// Where in the config.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The Secret or its key is missing, or its value does not read.
    #[error("{path}: Secret {namespace}/{name} key {key:?}: {problem}")]
    Unresolved {
        /// Where in the config.
        path: String,
        /// The Secret's namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The key.
        key: String,
        /// What is wrong (not found, no such key, not UTF-8, not JSON, API error).
        problem: String,
    },
}

/// Every reference in `config`, with its path (`config.tokens`), in order.
pub fn refs(config: &Map<String, Value>) -> Result<Vec<(String, SecretKeyRef)>, SecretError> {
    let mut out = Vec::new();
    for (k, v) in config {
        collect(v, &format!("config.{k}"), &mut out)?;
    }
    Ok(out)
}

/// The Secrets `config` refers to, by name.
pub fn secret_names(config: &Map<String, Value>) -> BTreeSet<String> {
    refs(config)
        .map(|r| r.into_iter().map(|(_, r)| r.name).collect())
        .unwrap_or_default()
}

fn collect(
    v: &Value,
    path: &str,
    out: &mut Vec<(String, SecretKeyRef)>,
) -> Result<(), SecretError> {
    match v {
        Value::Object(m) if m.contains_key("valueFrom") => {
            out.push((path.to_string(), parse(m, path)?))
        }
        Value::Object(m) => {
            for (k, v) in m {
                collect(v, &format!("{path}.{k}"), out)?;
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                collect(v, &format!("{path}[{i}]"), out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn parse(m: &Map<String, Value>, path: &str) -> Result<SecretKeyRef, SecretError> {
    let bad = |problem: String| SecretError::BadRef {
        path: path.to_string(),
        problem,
    };
    if m.len() != 1 {
        return Err(bad("valueFrom must be the only key of its map".into()));
    }
    let from = m["valueFrom"]
        .as_object()
        .filter(|f| f.len() == 1)
        .and_then(|f| f.get("secretKeyRef"))
        .ok_or_else(|| bad("valueFrom takes exactly one secretKeyRef".into()))?;
    serde_json::from_value(from.clone()).map_err(|e| bad(e.to_string()))
}

/// The Secrets a config needs, read once: name -> `data` (None: not found).
pub type Fetched = BTreeMap<String, Option<BTreeMap<String, Vec<u8>>>>;

/// Reads every Secret `config` refers to from `namespace`; also returns
/// each one's resourceVersion (None: not found), to notice changes.
pub async fn fetch(
    api: &Api<Secret>,
    namespace: &str,
    config: &Map<String, Value>,
) -> Result<(Fetched, BTreeMap<String, Option<String>>), SecretError> {
    let mut out = Fetched::new();
    let mut versions = BTreeMap::new();
    for (path, r) in refs(config)? {
        if out.contains_key(&r.name) {
            continue;
        }
        let data = match api.get_opt(&r.name).await {
            Ok(s) => s.map(|s| {
                versions.insert(r.name.clone(), s.metadata.resource_version.clone());
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect()
            }),
            Err(e) => {
                return Err(SecretError::Unresolved {
                    path,
                    namespace: namespace.to_string(),
                    name: r.name,
                    key: r.key,
                    problem: format!("cannot read it: {e}"),
                });
            }
        };
        versions.entry(r.name.clone()).or_insert(None);
        out.insert(r.name, data);
    }
    Ok((out, versions))
}

/// `config` with every reference replaced by its Secret's value (an
/// optional one that is missing: its key left out).
pub fn resolve(
    config: &Map<String, Value>,
    namespace: &str,
    fetched: &Fetched,
) -> Result<Map<String, Value>, SecretError> {
    let mut out = Map::new();
    for (k, v) in config {
        if let Some(v) = resolve_value(v, &format!("config.{k}"), namespace, fetched)? {
            out.insert(k.clone(), v);
        }
    }
    Ok(out)
}

fn resolve_value(
    v: &Value,
    path: &str,
    namespace: &str,
    fetched: &Fetched,
) -> Result<Option<Value>, SecretError> {
    Ok(Some(match v {
        Value::Object(m) if m.contains_key("valueFrom") => {
            return lookup(&parse(m, path)?, path, namespace, fetched);
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if let Some(v) = resolve_value(v, &format!("{path}.{k}"), namespace, fetched)? {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            let mut out = Vec::new();
            for (i, v) in a.iter().enumerate() {
                if let Some(v) = resolve_value(v, &format!("{path}[{i}]"), namespace, fetched)? {
                    out.push(v);
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }))
}

fn lookup(
    r: &SecretKeyRef,
    path: &str,
    namespace: &str,
    fetched: &Fetched,
) -> Result<Option<Value>, SecretError> {
    let fail = |problem: &str| SecretError::Unresolved {
        path: path.to_string(),
        namespace: namespace.to_string(),
        name: r.name.clone(),
        key: r.key.clone(),
        problem: problem.to_string(),
    };
    let bytes = match fetched.get(&r.name) {
        Some(Some(data)) => match data.get(&r.key) {
            Some(b) => b,
            None if r.optional => return Ok(None),
            None => return Err(fail("the Secret has no such key")),
        },
        _ if r.optional => return Ok(None),
        _ => return Err(fail("not found")),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| fail("the value is not UTF-8"))?;
    Ok(Some(match r.format {
        Format::String => Value::String(text.to_string()),
        // serde_json's messages give a line and column, not the text.
        Format::Json => {
            serde_json::from_str(text).map_err(|e| fail(&format!("the value is not JSON ({e})")))?
        }
    }))
}

#[cfg(test)]
mod tests;
