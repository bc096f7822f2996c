//! Sharding, for users who outgrow one leader (flytepropeller's manager
//! does the same): N shards, each run by its own process(es) under its own
//! Lease, and each owning the Workflows whose key hashes to it. The key is
//! `namespace/name`, or the value of a label (so a team's workflows stay
//! together). Every shard watches every Workflow but reconciles only its
//! own; a shard that is down stops only its workflows.

use std::str::FromStr;

use sha2::{Digest, Sha256};

/// What a Workflow is sharded by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardKey {
    /// `namespace/name`.
    Name,
    /// The value of this label (Workflows without it: `namespace/name`).
    Label(String),
}

impl FromStr for ShardKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            None if s == "name" => Ok(ShardKey::Name),
            Some(("label", key)) if !key.is_empty() => Ok(ShardKey::Label(key.to_string())),
            _ => Err(format!(
                "shard key {s:?}: expected `name` or `label:<label key>`"
            )),
        }
    }
}

/// The shard this process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 0.
    pub index: u32,
    /// How many shards there are.
    pub count: u32,
    /// What workflows are hashed by.
    pub key: ShardKey,
}

impl Shard {
    /// Shard `index` of `count`; says what is wrong with impossible ones.
    pub fn new(index: u32, count: u32, key: ShardKey) -> Result<Self, String> {
        if count == 0 {
            return Err("--shards must be at least 1".into());
        }
        if index >= count {
            return Err(format!(
                "--shard {index} does not exist: shards are numbered 0 to {} (--shards {count})",
                count - 1
            ));
        }
        Ok(Shard { index, count, key })
    }

    /// Whether this shard owns the Workflow `namespace/name` with `labels`.
    pub fn owns(
        &self,
        namespace: &str,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        self.count <= 1 || self.of(namespace, name, labels) == self.index
    }

    /// The shard that owns the Workflow `namespace/name` with `labels`.
    pub fn of(
        &self,
        namespace: &str,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> u32 {
        let key = match &self.key {
            ShardKey::Label(l) => labels.get(l).cloned(),
            ShardKey::Name => None,
        }
        .unwrap_or_else(|| format!("{namespace}/{name}"));
        shard_of(&key, self.count)
    }
}

/// The shard of a key: stable across processes, versions and platforms
/// (the first 8 bytes of its SHA-256), so every replica agrees.
pub fn shard_of(key: &str, count: u32) -> u32 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(count.max(1))) as u32
}

#[cfg(test)]
mod tests;
