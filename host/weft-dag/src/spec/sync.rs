//! `synchronization` (Argo's, at workflow and node level): mutexes and
//! semaphores named within the workflow's namespace. Only the spec and
//! its checks live here; the locks themselves are Kubernetes objects the
//! controller keeps (`host/weft/src/sync/`), and the round asks for them
//! through `Executor::acquire`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The locks a workflow or a node holds while it runs: every one of
/// them, taken in one step when all are free.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Synchronization {
    /// One mutex (Argo's short form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutex: Option<MutexSpec>,
    /// One semaphore (Argo's short form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semaphore: Option<SemaphoreSpec>,
    /// Several mutexes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutexes: Vec<MutexSpec>,
    /// Several semaphores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub semaphores: Vec<SemaphoreSpec>,
}

/// A mutex: one holder at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutexSpec {
    /// Its name in the namespace.
    pub name: String,
}

/// A semaphore: at most `limit` holders at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SemaphoreSpec {
    /// Its name in the namespace.
    pub name: String,
    /// How many may hold it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Where the limit is kept instead (Argo's form): a key of a ConfigMap
    /// in the namespace, so operators change it without editing workflows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<ConfigMapKeyRef>,
}

/// A key of a ConfigMap in the workflow's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapKeyRef {
    /// The ConfigMap.
    pub name: String,
    /// The key whose value is the limit.
    pub key: String,
}

/// Where a semaphore's limit comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Given in the spec (1 for a mutex).
    Fixed(u32),
    /// A ConfigMap's key.
    ConfigMap(ConfigMapKeyRef),
}

/// One lock asked for: which, and its limit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockRef {
    /// `mutex`, `semaphore` or (the controller's own) `parallelism`.
    pub kind: &'static str,
    /// The name in the namespace.
    pub name: String,
    /// Its limit.
    pub limit: Limit,
    /// Where the lock lives when not in the workflow's namespace (the
    /// controller-wide parallelism limit).
    pub namespace: Option<String>,
}

impl LockRef {
    /// How users and messages name it: `mutex/db`, `semaphore/writers`.
    pub fn display(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

impl Synchronization {
    /// Every lock named, mutexes first, in the order written.
    pub fn locks(&self) -> Vec<LockRef> {
        let mutexes = self.mutex.iter().chain(&self.mutexes).map(|m| LockRef {
            kind: "mutex",
            name: m.name.clone(),
            limit: Limit::Fixed(1),
            namespace: None,
        });
        let semaphores = self
            .semaphore
            .iter()
            .chain(&self.semaphores)
            .map(|s| LockRef {
                kind: "semaphore",
                name: s.name.clone(),
                limit: match (&s.limit, &s.config_map_key_ref) {
                    (_, Some(r)) => Limit::ConfigMap(r.clone()),
                    (Some(n), None) => Limit::Fixed(*n),
                    (None, None) => Limit::Fixed(1),
                },
                namespace: None,
            });
        mutexes.chain(semaphores).collect()
    }

    /// What is wrong with it, for `compile` (which names the field).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let named = self.locks();
        if named.is_empty() {
            out.push("names no mutex or semaphore".to_string());
        }
        let mut seen = std::collections::HashSet::new();
        for l in &named {
            if !valid_name(&l.name) {
                out.push(format!(
                    "{} {:?} is not a valid name (lower-case letters, digits, '-' and '.', at most 200)",
                    l.kind, l.name
                ));
            }
            if !seen.insert((l.kind, l.name.clone())) {
                out.push(format!("{} is named twice", l.display()));
            }
        }
        for s in self.semaphore.iter().chain(&self.semaphores) {
            match (&s.limit, &s.config_map_key_ref) {
                (Some(0), _) => out.push(format!("semaphore {} has limit 0", s.name)),
                (Some(_), Some(_)) => out.push(format!(
                    "semaphore {} sets both limit and configMapKeyRef",
                    s.name
                )),
                (None, None) => out.push(format!(
                    "semaphore {} needs a limit or a configMapKeyRef",
                    s.name
                )),
                _ => {}
            }
        }
        out
    }
}

/// A name that fits in a Kubernetes object name after `mutex.` or
/// `semaphore.`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Synchronization {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn short_and_list_forms_name_every_lock_once() {
        let s = parse(
            "mutex: {name: db}\nsemaphores: [{name: writers, limit: 3}, {name: w2, configMapKeyRef: {name: limits, key: w2}}]",
        );
        let names: Vec<String> = s.locks().iter().map(LockRef::display).collect();
        assert_eq!(names, ["mutex/db", "semaphore/writers", "semaphore/w2"]);
        assert_eq!(s.locks()[1].limit, Limit::Fixed(3));
        assert!(s.problems().is_empty());
    }

    #[test]
    fn bad_specs_are_named() {
        let p = parse("mutexes: [{name: db}, {name: db}]\nsemaphore: {name: Bad_Name}").problems();
        assert!(
            p.iter().any(|m| m.contains("mutex/db is named twice")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|m| m.contains("\"Bad_Name\" is not a valid name")),
            "{p:?}"
        );
        assert!(p.iter().any(|m| m.contains("needs a limit")), "{p:?}");
        let zero = parse("semaphore: {name: s, limit: 0}").problems();
        assert!(zero[0].contains("limit 0"), "{zero:?}");
        assert!(parse("{}").problems()[0].contains("names no mutex"));
        assert!(serde_yaml::from_str::<Synchronization>("mutex: {name: a, limit: 2}").is_err());
    }
}
