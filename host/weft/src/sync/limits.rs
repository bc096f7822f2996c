//! The controller's own limits on running workflows (Argo's
//! `parallelism` and `namespaceParallelism`): `--parallelism` (all
//! workflows) and `--namespace-parallelism` (per namespace, overridden by
//! the Namespace's `weft.dev/parallelism` annotation). Each is a lock
//! of kind `parallelism` that top-level workflows take before they start,
//! so the waiting, ordering (priority, then creation) and restarts work
//! as for any semaphore. Resource pools (`--resource-pool TYPE=N`,
//! Flyte's resource manager) are locks of kind `pool`, one per task type
//! and namespace, that each such task node takes while it runs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use weft_dag::spec::sync::{Limit, LockRef};

/// The annotation on a Namespace that sets its own limit (`0`: none).
pub const NAMESPACE_ANNOTATION: &str = "weft.dev/parallelism";

/// How long a Namespace's annotation is trusted before it is read again.
const KEEP: Duration = Duration::from_secs(10);

/// The limits the controller was started with.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Running workflows in all (`--parallelism`).
    pub parallelism: Option<u32>,
    /// Running workflows per namespace (`--namespace-parallelism`).
    pub namespace_parallelism: Option<u32>,
    /// Where the controller-wide lock lives: the controller's namespace.
    pub home: String,
    /// Resource pools: at most this many running tasks of a task type
    /// per namespace (`--resource-pool TYPE=N`).
    pub pools: std::collections::BTreeMap<String, u32>,
}

/// Parses `--resource-pool TYPE=N`.
pub fn parse_pool(s: &str) -> Result<(String, u32), String> {
    let (t, n) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected TASK_TYPE=N, e.g. http=20"))?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {n:?} is not a number of tasks"))?;
    if t.trim().is_empty() || n == 0 {
        return Err(format!("{s:?}: needs a task type and a cap of at least 1"));
    }
    Ok((t.trim().to_string(), n))
}

/// The limits in force, with Namespaces' overrides read and kept briefly.
#[derive(Debug, Default)]
pub struct Parallelism {
    limits: Limits,
    namespaces: Mutex<HashMap<String, (Option<u32>, Instant)>>,
    /// Held while a Namespace is read: a thousand workflows created at once
    /// all missed the cache together and each read the Namespace (1,391
    /// GETs in the peers bench's workload a); now the first reads and the
    /// rest find its answer kept.
    reading: tokio::sync::Mutex<()>,
}

impl Parallelism {
    /// Limits from the flags.
    pub fn new(limits: Limits) -> Self {
        Parallelism {
            limits,
            namespaces: Mutex::new(HashMap::new()),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    /// The resource pool a task of `task_type` takes a slot of, if any:
    /// a lock of kind `pool` in the workflow's namespace.
    pub fn pool(&self, task_type: &str) -> Option<LockRef> {
        let n = *self.limits.pools.get(task_type)?;
        let name: String = task_type
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() || c == '.' {
                true => c.to_ascii_lowercase(),
                false => '-',
            })
            .collect();
        let mut r = lock(name.trim_matches('-'), n, None);
        r.kind = "pool";
        Some(r)
    }

    /// The parallelism locks a top-level workflow in `ns` takes.
    pub async fn locks(&self, client: &Client, ns: &str) -> Vec<LockRef> {
        let mut out = Vec::new();
        if let Some(n) = self.limits.parallelism.filter(|n| *n > 0) {
            out.push(lock("controller", n, Some(self.limits.home.clone())));
        }
        if let Some(n) = self.namespace_limit(client, ns).await {
            out.push(lock("namespace", n, None));
        }
        out
    }

    /// The namespace's own limit: its annotation, else the flag.
    async fn namespace_limit(&self, client: &Client, ns: &str) -> Option<u32> {
        if let Some(n) = self.kept(ns) {
            return n;
        }
        let _reading = self.reading.lock().await;
        if let Some(n) = self.kept(ns) {
            return n;
        }
        let api: Api<Namespace> = Api::all(client.clone());
        let annotated = match api.get_opt(ns).await {
            Ok(found) => found
                .and_then(|n| n.metadata.annotations)
                .and_then(|a| a.get(NAMESPACE_ANNOTATION).cloned()),
            Err(e) => {
                tracing::debug!(namespace = %ns, "cannot read the Namespace's parallelism annotation: {e}");
                None
            }
        };
        let n = match annotated.as_deref().map(str::trim).map(str::parse::<u32>) {
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                tracing::warn!(namespace = %ns, value = ?annotated, "{NAMESPACE_ANNOTATION} is not a number; using --namespace-parallelism");
                self.limits.namespace_parallelism
            }
            None => self.limits.namespace_parallelism,
        };
        let n = n.filter(|n| *n > 0);
        self.lock().insert(ns.to_string(), (n, Instant::now()));
        n
    }

    /// The namespace's limit as last read, while it is fresh.
    fn kept(&self, ns: &str) -> Option<Option<u32>> {
        let kept = self.lock().get(ns).copied();
        kept.filter(|(_, at)| at.elapsed() < KEEP).map(|(n, _)| n)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<u32>, Instant)>> {
        self.namespaces.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn lock(name: &str, n: u32, namespace: Option<String>) -> LockRef {
    LockRef {
        kind: "parallelism",
        name: name.to_string(),
        limit: Limit::Fixed(n),
        namespace,
    }
}
