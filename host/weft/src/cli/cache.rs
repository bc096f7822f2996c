//! `weft cache`: the task output cache, listed, shown and pruned.
//!
//! The cache lives in the cluster, in each namespace: one `TaskCache` per
//! task type, named `weft-cache-<task type>` (see
//! [`crate::controller::cache`]) and labelled `weft.dev/cache: "true"` and
//! `weft.dev/task-type: <task type>`. Its `spec.entries` maps a cache key
//! (a sha256, 64 lower-case hex characters) to the entry:
//!
//! ```json
//! {"taskType":"pod","version":"1","workflow":"wf-a","node":"train",
//!  "createdAt":"2026-11-25T10:00:00Z","maxAge":"24h","outputs":{...}}
//! ```
//!
//! `maxAge` is optional (absent: the entry never expires). The controller
//! writes entries into the same objects concurrently, so deleting an entry
//! is a JSON merge patch setting only its key to null: a whole-object
//! update would drop entries written since it was read.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::{Subcommand, ValueEnum};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};
use weft_dag::status::parse_timestamp;

use super::list::{human_duration, table};

use crate::api::TaskCache;
use crate::controller::cache::{
    LABEL as LABEL_CACHE, TASK_TYPE_LABEL as LABEL_TASK_TYPE, object_name,
};

/// `weft cache ...`.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Cache entries, newest first: key, task type, node, workflow, age,
    /// expiry and size.
    List {
        /// Only this task type's entries.
        #[arg(long, value_name = "TYPE")]
        task_type: Option<String>,
        /// `wide` (full keys, version, max age, TaskCache) or `json`.
        #[arg(short, long, value_enum)]
        output: Option<ListFormat>,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
    /// One entry as JSON, with its full key.
    Get {
        /// The key, or a unique prefix of it (at least 6 characters).
        key: String,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
    /// Remove entries (each by its key or a unique prefix), or with
    /// `--all` every TaskCache (of `--task-type` when given).
    Delete {
        /// Keys, or unique prefixes of them (at least 6 characters).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        keys: Vec<String>,
        /// Delete the TaskCaches themselves.
        #[arg(long)]
        all: bool,
        /// Only this task type's entries.
        #[arg(long, value_name = "TYPE")]
        task_type: Option<String>,
        /// Where to connect, and the namespace.
        #[command(flatten)]
        cluster: super::ClusterArgs,
    },
}

/// Formats of `weft cache list`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ListFormat {
    /// More columns, full keys.
    Wide,
    /// A JSON array of the entries.
    Json,
}

/// Run `weft cache ...`.
pub fn run(cmd: CacheCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match cmd {
            CacheCommand::List {
                task_type,
                output,
                cluster,
            } => list(&cluster, task_type.as_deref(), output).await,
            CacheCommand::Get { key, cluster } => get(&cluster, &key).await,
            CacheCommand::Delete {
                keys,
                all,
                task_type,
                cluster,
            } => match all {
                true => delete_all(&cluster, task_type.as_deref()).await,
                false => delete(&cluster, &keys, task_type.as_deref()).await,
            },
        }
    })
}

/// Whether an `entries` key is a cache key (a sha256 in lower-case hex);
/// other keys, if any, are not entries.
fn is_key(key: &str) -> bool {
    key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// One cache entry as stored.
#[derive(Debug, Clone)]
struct Entry {
    /// The full key.
    key: String,
    /// The TaskCache holding it.
    cache: String,
    /// The stored JSON text.
    raw: String,
    /// The same, parsed (`Null` when it is not JSON).
    value: Value,
    /// The task type: the entry's own, else the TaskCache's label.
    task_type: String,
}

/// When an entry stops being served.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expiry {
    /// No `maxAge`.
    Never,
    /// `createdAt + maxAge`.
    At(SystemTime),
    /// `createdAt` or `maxAge` could not be read.
    Unknown,
}

impl Entry {
    fn field(&self, name: &str) -> Option<&str> {
        self.value.get(name).and_then(Value::as_str)
    }

    fn created(&self) -> Option<SystemTime> {
        parse_timestamp(self.field("createdAt"))
    }

    fn expiry(&self) -> Expiry {
        let Some(max_age) = self.field("maxAge") else {
            return Expiry::Never;
        };
        match (self.created(), parse_max_age(max_age)) {
            (Some(created), Some(age)) => Expiry::At(created + age),
            _ => Expiry::Unknown,
        }
    }

    /// The entry for `get` and `-o json`: as stored, without its key.
    fn object(&self) -> Map<String, Value> {
        match &self.value {
            Value::Object(o) => o.clone(),
            _ => Map::new(),
        }
    }
}

/// A `maxAge`: `24h`, `90m`, `1h30m`, `2d`, also Go's `1h30m0s` (what
/// `time.Duration` prints).
fn parse_max_age(s: &str) -> Option<Duration> {
    humantime::parse_duration(s.trim()).ok()
}

/// The EXPIRES column: `in 23h`, `expired`, `never`.
fn expires(expiry: Expiry, now: SystemTime) -> String {
    match expiry {
        Expiry::Never => "never".into(),
        Expiry::At(t) if t <= now => "expired".into(),
        Expiry::At(t) => format!(
            "in {}",
            human_duration(t.duration_since(now).unwrap_or_default())
        ),
        Expiry::Unknown => "-".into(),
    }
}

/// The TaskCaches of the namespace (only the task type's when given: by
/// its label, or by the name derived from it).
async fn caches(
    cluster: &super::ClusterArgs,
    task_type: Option<&str>,
) -> anyhow::Result<(Api<TaskCache>, Vec<TaskCache>)> {
    let api: Api<TaskCache> = Api::namespaced(cluster.client().await?, &cluster.namespace);
    let params = ListParams::default().labels(&format!("{LABEL_CACHE}=true"));
    let mut found = api.list(&params).await?.items;
    if let Some(t) = task_type {
        found.retain(|cm| {
            cm.labels().get(LABEL_TASK_TYPE).map(String::as_str) == Some(t)
                || cm.name_any() == object_name(t)
        });
    }
    Ok((api, found))
}

/// Every entry of these TaskCaches.
fn entries(caches: &[TaskCache]) -> Vec<Entry> {
    let mut out = Vec::new();
    for cm in caches {
        let label = cm.labels().get(LABEL_TASK_TYPE).cloned();
        for (key, entry) in cm.spec.entries.iter().filter(|(k, _)| is_key(k)) {
            let value = serde_json::to_value(entry).unwrap_or(Value::Null);
            let raw = value.to_string();
            let task_type = value["taskType"]
                .as_str()
                .map(String::from)
                .or_else(|| label.clone())
                .unwrap_or_else(|| "-".into());
            out.push(Entry {
                key: key.clone(),
                cache: cm.name_any(),
                raw,
                value,
                task_type,
            });
        }
    }
    out
}

/// Entries newest first (then by key; unknown creation times last).
fn newest_first(entries: &mut [Entry]) {
    entries.sort_by(|a, b| {
        b.created()
            .cmp(&a.created())
            .then_with(|| a.key.cmp(&b.key))
    });
}

async fn list(
    cluster: &super::ClusterArgs,
    task_type: Option<&str>,
    output: Option<ListFormat>,
) -> anyhow::Result<ExitCode> {
    let (_, caches) = caches(cluster, task_type).await?;
    let mut entries = entries(&caches);
    newest_first(&mut entries);
    let now = SystemTime::now();
    if let Some(ListFormat::Json) = output {
        let items: Vec<Value> = entries.iter().map(|e| as_json(e, now)).collect();
        super::out(&serde_json::to_string_pretty(&items)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        eprintln!("No cache entries found in namespace {}.", cluster.namespace);
        return Ok(ExitCode::SUCCESS);
    }
    let wide = matches!(output, Some(ListFormat::Wide));
    super::out(&render(&entries, wide, now))?;
    Ok(ExitCode::SUCCESS)
}

/// The table of `weft cache list` (`-o wide`: full keys and more columns).
fn render(entries: &[Entry], wide: bool, now: SystemTime) -> String {
    let mut header = vec![
        "KEY",
        "TASK TYPE",
        "NODE",
        "WORKFLOW",
        "AGE",
        "EXPIRES",
        "SIZE",
    ];
    if wide {
        header.extend(["VERSION", "MAX AGE", "CONFIGMAP"]);
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for e in entries {
        let text = |name| e.field(name).unwrap_or("-").to_string();
        let age = e
            .created()
            .map(|c| human_duration(now.duration_since(c).unwrap_or_default()));
        let mut row = vec![
            match wide {
                true => e.key.clone(),
                false => e.key[..12].to_string(),
            },
            e.task_type.clone(),
            text("node"),
            text("workflow"),
            age.unwrap_or_else(|| "-".into()),
            expires(e.expiry(), now),
            e.raw.len().to_string(),
        ];
        if wide {
            row.extend([text("version"), text("maxAge"), e.cache.clone()]);
        }
        rows.push(row);
    }
    table(&rows)
}

/// One entry of `-o json`: its key, where it is, its size and expiry, and
/// the entry as stored.
fn as_json(e: &Entry, now: SystemTime) -> Value {
    let expires_at = match e.expiry() {
        Expiry::At(t) => Value::String(humantime::format_rfc3339_seconds(t).to_string()),
        _ => Value::Null,
    };
    json!({
        "key": e.key,
        "taskCache": e.cache,
        "size": e.raw.len(),
        "expiresAt": expires_at,
        "expired": matches!(e.expiry(), Expiry::At(t) if t <= now),
        "entry": e.value,
    })
}

/// The entry a key or key prefix names: exactly one must match.
fn resolve<'a>(entries: &'a [Entry], key: &str, namespace: &str) -> anyhow::Result<&'a Entry> {
    let prefix = key.to_ascii_lowercase();
    if prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!("cache key {key}: a key is at most 64 hex characters (a sha256)");
    }
    if prefix.len() < 6 {
        anyhow::bail!("cache key {key}: give at least 6 characters of it");
    }
    let found: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.key.starts_with(&prefix))
        .collect();
    match found[..] {
        [one] => Ok(one),
        [] => anyhow::bail!("no cache entry {key} in namespace {namespace}"),
        _ => {
            let keys: Vec<String> = found
                .iter()
                .map(|e| format!("{} ({})", e.key, e.cache))
                .collect();
            anyhow::bail!(
                "cache key {key} is ambiguous in namespace {namespace}: it begins {} keys: {}; give more of it",
                found.len(),
                keys.join(", ")
            )
        }
    }
}

async fn get(cluster: &super::ClusterArgs, key: &str) -> anyhow::Result<ExitCode> {
    let (_, caches) = caches(cluster, None).await?;
    let entries = entries(&caches);
    let entry = resolve(&entries, key, &cluster.namespace)?;
    if !entry.value.is_object() {
        anyhow::bail!(
            "cache entry {} (taskcache/{}) is not a JSON object: {}",
            entry.key,
            entry.cache,
            entry.raw
        );
    }
    super::out(&with_key(&entry.key, entry.object())?)?;
    Ok(ExitCode::SUCCESS)
}

/// The entry as pretty JSON with `"key"` first. serde_json sorts an
/// object's fields (no `preserve_order` here), which would bury the key
/// among them, so it is written ahead of the entry's own fields.
fn with_key(key: &str, mut entry: Map<String, Value>) -> anyhow::Result<String> {
    entry.remove("key");
    let key = serde_json::to_string(key)?;
    if entry.is_empty() {
        return Ok(format!("{{\n  \"key\": {key}\n}}"));
    }
    let body = serde_json::to_string_pretty(&entry)?;
    Ok(format!("{{\n  \"key\": {key},\n{}", &body[2..]))
}

async fn delete(
    cluster: &super::ClusterArgs,
    keys: &[String],
    task_type: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let (api, caches) = caches(cluster, task_type).await?;
    let entries = entries(&caches);
    // Every key is resolved before anything is deleted: one that names
    // nothing (or too much) deletes nothing.
    let mut chosen: Vec<&Entry> = Vec::new();
    let mut problems = Vec::new();
    for key in keys {
        match resolve(&entries, key, &cluster.namespace) {
            Ok(e) if chosen.iter().any(|c| c.key == e.key) => {}
            Ok(e) => chosen.push(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        anyhow::bail!("{}; nothing deleted", problems.join("; "));
    }
    let mut by_map: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in chosen {
        by_map.entry(&e.cache).or_default().push(e);
    }
    for (name, doomed) in by_map {
        let nulls: Map<String, Value> = doomed
            .iter()
            .map(|e| (e.key.clone(), Value::Null))
            .collect();
        let patch = json!({"spec": {"entries": nulls}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| anyhow::anyhow!("taskcache/{name}: {e}"))?;
        for e in doomed {
            super::out(&format!(
                "cache entry {} deleted ({}, node {} of workflow {})",
                e.key,
                e.task_type,
                e.field("node").unwrap_or("-"),
                e.field("workflow").unwrap_or("-"),
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn delete_all(
    cluster: &super::ClusterArgs,
    task_type: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let (api, caches) = caches(cluster, task_type).await?;
    if caches.is_empty() {
        eprintln!("No cache entries found in namespace {}.", cluster.namespace);
        return Ok(ExitCode::SUCCESS);
    }
    for cm in &caches {
        let name = cm.name_any();
        let count = entries(std::slice::from_ref(cm)).len();
        api.delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| anyhow::anyhow!("taskcache/{name}: {e}"))?;
        let entries = if count == 1 { "entry" } else { "entries" };
        super::out(&format!("taskcache/{name} deleted ({count} {entries})"))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
