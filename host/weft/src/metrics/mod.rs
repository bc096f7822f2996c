//! Prometheus metrics with flytepropeller's vocabulary (round latency,
//! reconcile errors, active workflows, node transitions, plugin calls), via
//! prometheus-client, served at `/metrics`.

pub mod history;
pub mod standard;
pub mod sync;

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

type Labels = Vec<(String, String)>;

fn latency_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_01, 4.0, 12,
    ))
}

/// The controller's metrics.
pub struct Metrics {
    registry: Mutex<Registry>,
    round_latency: Histogram,
    reconcile_errors: Counter,
    active_workflows: Gauge,
    node_transitions: Family<Labels, Counter>,
    plugin_calls: Family<Labels, Histogram, fn() -> Histogram>,
    plugin_failures: Family<Labels, Counter>,
    api_writes: Family<Labels, Counter>,
    plugin_loads: Family<Labels, Counter>,
    plugin_load_latency: Histogram,
    plugin_rollbacks: Family<Labels, Counter>,
    plugin_unloads: Family<Labels, Counter>,
    grpc_requests: Family<Labels, Counter>,
    grpc_latency: Family<Labels, Histogram, fn() -> Histogram>,
    reconciles: Family<Labels, Counter>,
    nodes: Family<Labels, Gauge>,
    plugin_traps: Family<Labels, Counter>,
    plugin_deadline_hits: Family<Labels, Counter>,
    plugin_memory: Family<Labels, Gauge>,
    leader: Family<Labels, Gauge>,
    leader_transitions: Family<Labels, Counter>,
    shadow_calls: Family<Labels, Counter>,
    rollouts_aborted: Family<Labels, Counter>,
    undecodable: Counter,
    cache_lookups: Family<Labels, Counter>,
    /// Calls, traps and total seconds per plugin, for the console (the
    /// families above cannot be read back by plugin).
    tally: Mutex<std::collections::HashMap<String, (u64, u64, f64)>>,
    /// controller-runtime's and client-go's metrics, unprefixed.
    pub standard: standard::StandardMetrics,
    /// The execution history's (`weft_history_*`).
    pub history: history::HistoryMetrics,
    /// Synchronization's (`weft_lock_*`).
    pub sync: sync::SyncMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        // Weft's own metrics under `weft_`, the standard ones (whose names
        // dashboards know) at the root.
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("weft");
        let m = Metrics {
            registry: Mutex::new(Registry::default()),
            round_latency: latency_buckets(),
            reconcile_errors: Counter::default(),
            active_workflows: Gauge::default(),
            node_transitions: Family::default(),
            plugin_calls: Family::new_with_constructor(latency_buckets),
            plugin_failures: Family::default(),
            api_writes: Family::default(),
            plugin_loads: Family::default(),
            plugin_load_latency: latency_buckets(),
            plugin_rollbacks: Family::default(),
            plugin_unloads: Family::default(),
            grpc_requests: Family::default(),
            grpc_latency: Family::new_with_constructor(latency_buckets),
            reconciles: Family::default(),
            nodes: Family::default(),
            plugin_traps: Family::default(),
            plugin_deadline_hits: Family::default(),
            plugin_memory: Family::default(),
            leader: Family::default(),
            leader_transitions: Family::default(),
            shadow_calls: Family::default(),
            rollouts_aborted: Family::default(),
            undecodable: Counter::default(),
            cache_lookups: Family::default(),
            tally: Mutex::default(),
            standard: Default::default(),
            history: Default::default(),
            sync: Default::default(),
        };
        registry.register(
            "cache_lookups",
            "Task cache look-ups of cached task nodes, by task type and result (hit, miss)",
            m.cache_lookups.clone(),
        );
        registry.register(
            "workflows_undecodable",
            "Workflow objects (each version once) the controller could not decode and skipped",
            m.undecodable.clone(),
        );
        registry.register(
            "plugin_shadow_calls",
            "Calls copied to a shadow candidate, by plugin, call and result (same, diff, error, skipped)",
            m.shadow_calls.clone(),
        );
        registry.register(
            "plugin_rollouts_aborted",
            "Shadow or canary roll-outs the circuit breaker aborted, by plugin",
            m.rollouts_aborted.clone(),
        );
        registry.register(
            "reconciles",
            "Reconciles of Workflows this shard owns, by result (ok, error)",
            m.reconciles.clone(),
        );
        registry.register(
            "nodes",
            "Nodes of the active Workflows this process leads, by phase",
            m.nodes.clone(),
        );
        registry.register(
            "plugin_traps",
            "Plugin calls that trapped (a panic, an unreachable, a bad memory access), by plugin",
            m.plugin_traps.clone(),
        );
        registry.register(
            "plugin_deadline_hits",
            "Plugin calls stopped at their manifest's deadline, by plugin",
            m.plugin_deadline_hits.clone(),
        );
        registry.register(
            "plugin_memory_high_water_bytes",
            "The most linear memory one call of the plugin has used, by plugin",
            m.plugin_memory.clone(),
        );
        registry.register(
            "leader",
            "1 while this process holds the shard's leader lease, by shard",
            m.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Times this process became or stopped being the shard's leader, by shard",
            m.leader_transitions.clone(),
        );
        registry.register(
            "grpc_requests",
            "Admin API calls answered, by method and gRPC code",
            m.grpc_requests.clone(),
        );
        registry.register(
            "grpc_request_duration_seconds",
            "Admin API call latency (middleware included), by method",
            m.grpc_latency.clone(),
        );
        registry.register(
            "plugin_loads",
            "Plugin versions hot-loaded from ConfigMaps, by plugin, result (loaded, rejected) and reason",
            m.plugin_loads.clone(),
        );
        registry.register(
            "plugin_load_duration_seconds",
            "Time from seeing a plugin ConfigMap change to serving the new version",
            m.plugin_load_latency.clone(),
        );
        registry.register(
            "plugin_rollbacks",
            "Versions the circuit breaker rolled back, by plugin",
            m.plugin_rollbacks.clone(),
        );
        registry.register(
            "plugin_unloads",
            "Plugin versions unloaded (ConfigMap deleted, or no longer pinned), by plugin",
            m.plugin_unloads.clone(),
        );
        registry.register(
            "round_latency_seconds",
            "Time of one reconcile round of one workflow",
            m.round_latency.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed and were retried",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "active_workflows",
            "Workflows not yet in a terminal phase",
            m.active_workflows.clone(),
        );
        registry.register(
            "node_transitions",
            "Node phase transitions",
            m.node_transitions.clone(),
        );
        registry.register(
            "plugin_call_duration_seconds",
            "Plugin call latency, by plugin and call",
            m.plugin_calls.clone(),
        );
        registry.register(
            "plugin_failures",
            "Failed plugin calls, by plugin, call and kind",
            m.plugin_failures.clone(),
        );
        registry.register(
            "api_writes",
            "Writes to the Kubernetes API, by kind",
            m.api_writes.clone(),
        );
        m.history.register(registry);
        m.sync.register(registry);
        m.standard.register(&mut root);
        *m.registry.lock().unwrap_or_else(|e| e.into_inner()) = root;
        m
    }
}

impl Metrics {
    /// A round took this long.
    pub fn round(&self, took: Duration) {
        self.round_latency.observe(took.as_secs_f64());
    }

    /// A Workflow object could not be decoded (reported once per version).
    pub fn undecodable(&self) {
        self.undecodable.inc();
    }

    /// A reconcile failed.
    pub fn reconcile_error(&self) {
        self.reconcile_errors.inc();
    }

    /// A reconcile finished with `result` (`ok` or `error`).
    pub fn reconcile(&self, result: &str) {
        self.reconciles
            .get_or_create(&vec![("result".into(), result.into())])
            .inc();
    }

    /// Replace the per-phase node counts (phases not named become absent).
    pub fn set_nodes(&self, by_phase: &std::collections::BTreeMap<String, i64>) {
        self.nodes.clear();
        for (phase, n) in by_phase {
            self.nodes
                .get_or_create(&vec![("phase".into(), phase.clone())])
                .set(*n);
        }
    }

    /// A call of `plugin` used up to `bytes` of linear memory: keep the most.
    pub fn plugin_memory(&self, plugin: &str, bytes: usize) {
        let g = self
            .plugin_memory
            .get_or_create(&vec![("plugin".into(), plugin.into())]);
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        // Racing writers may each keep their own maximum for a moment; the
        // next larger call settles it.
        if g.get() < bytes {
            g.set(bytes);
        }
    }

    /// Whether this process leads `shard` now.
    pub fn set_leader(&self, shard: &str, leading: bool) {
        let labels = vec![("shard".into(), shard.into())];
        self.leader.get_or_create(&labels).set(i64::from(leading));
        self.leader_transitions.get_or_create(&labels).inc();
    }

    /// Set the number of active workflows.
    pub fn set_active(&self, n: i64) {
        self.active_workflows.set(n);
    }

    /// A node changed phase.
    pub fn transition(&self, from: &str, to: &str) {
        self.node_transitions
            .get_or_create(&vec![
                ("from".into(), from.into()),
                ("to".into(), to.into()),
            ])
            .inc();
    }

    /// An admin API call was answered with `code` (e.g. `OK`) after `took`.
    pub fn grpc_request(&self, method: &str, code: &str, took: Duration) {
        self.grpc_requests
            .get_or_create(&vec![
                ("method".into(), method.into()),
                ("code".into(), code.into()),
            ])
            .inc();
        self.grpc_latency
            .get_or_create(&vec![("method".into(), method.into())])
            .observe(took.as_secs_f64());
    }

    /// A plugin call completed.
    pub fn plugin_call(&self, plugin: &str, call: &str, took: Duration) {
        if let Ok(mut t) = self.tally.lock() {
            let e = t.entry(plugin.to_string()).or_default();
            e.0 += 1;
            e.2 += took.as_secs_f64();
        }
        self.plugin_calls
            .get_or_create(&vec![
                ("plugin".into(), plugin.into()),
                ("call".into(), call.into()),
            ])
            .observe(took.as_secs_f64());
    }

    /// A plugin's calls, traps and mean call time in seconds so far.
    pub fn plugin_figures(&self, plugin: &str) -> (u64, u64, f64) {
        let t = self.tally.lock().ok();
        let (calls, traps, total) = t.and_then(|t| t.get(plugin).copied()).unwrap_or_default();
        (
            calls,
            traps,
            if calls == 0 {
                0.0
            } else {
                total / calls as f64
            },
        )
    }

    /// A plugin call failed; traps and deadline hits are also counted on
    /// their own, the two faults an operator pages on.
    pub fn plugin_failure(&self, plugin: &str, call: &str, kind: &str) {
        let by_plugin = vec![("plugin".into(), plugin.into())];
        match kind {
            "trap" => {
                self.plugin_traps.get_or_create(&by_plugin).inc();
                if let Ok(mut t) = self.tally.lock() {
                    t.entry(plugin.to_string()).or_default().1 += 1;
                }
            }
            "deadline" => {
                self.plugin_deadline_hits.get_or_create(&by_plugin).inc();
            }
            _ => {}
        }
        self.plugin_failures
            .get_or_create(&vec![
                ("plugin".into(), plugin.into()),
                ("call".into(), call.into()),
                ("kind".into(), kind.into()),
            ])
            .inc();
    }

    /// The controller wrote to the API.
    pub fn api_write(&self, what: &str) {
        self.api_writes
            .get_or_create(&vec![("kind".into(), what.into())])
            .inc();
    }

    /// A cached task node looked in the cache.
    pub fn cache_lookup(&self, task_type: &str, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.cache_lookups
            .get_or_create(&vec![
                ("task_type".into(), task_type.into()),
                ("result".into(), result.into()),
            ])
            .inc();
    }

    /// One call copied to a shadow candidate, and how it compared.
    pub fn shadow_call(&self, plugin: &str, call: &str, result: &str) {
        self.shadow_calls
            .get_or_create(&vec![
                ("plugin".into(), plugin.into()),
                ("call".into(), call.into()),
                ("result".into(), result.into()),
            ])
            .inc();
    }

    /// The breaker aborted a plugin's roll-out.
    pub fn rollout_aborted(&self, plugin: &str) {
        self.rollouts_aborted
            .get_or_create(&vec![("plugin".into(), plugin.into())])
            .inc();
    }

    /// A plugin ConfigMap was loaded (`reason` = compile source) or rejected (`reason` = problem).
    pub fn plugin_load(&self, plugin: &str, result: &str, reason: &str) {
        self.plugin_loads
            .get_or_create(&vec![
                ("plugin".into(), plugin.into()),
                ("result".into(), result.into()),
                ("reason".into(), reason.into()),
            ])
            .inc();
    }

    /// How many loads of this result so far (all plugins and reasons), for tests.
    pub fn plugin_loads_total(&self, result: &str) -> u64 {
        let mut n = 0;
        // prometheus-client has no iteration over a family: read the exposition.
        for line in self.render().lines() {
            if line.starts_with("weft_plugin_loads_total{")
                && line.contains(&format!("result=\"{result}\""))
            {
                n += line
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        n
    }

    /// A new version served this long after its ConfigMap changed.
    pub fn plugin_load_latency(&self, took: Duration) {
        self.plugin_load_latency.observe(took.as_secs_f64());
    }

    /// The breaker rolled a plugin back.
    pub fn plugin_rollback(&self, plugin: &str) {
        self.plugin_rollbacks
            .get_or_create(&vec![("plugin".into(), plugin.into())])
            .inc();
    }

    /// A plugin version was unloaded.
    pub fn plugin_unload(&self, plugin: &str) {
        self.plugin_unloads
            .get_or_create(&vec![("plugin".into(), plugin.into())])
            .inc();
    }

    /// Total API writes so far, for benchmarks.
    pub fn api_writes_total(&self) -> u64 {
        ["child", "status", "event", "finalizer"]
            .iter()
            .map(|k| {
                self.api_writes
                    .get_or_create(&vec![("kind".into(), (*k).into())])
                    .get()
            })
            .sum()
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}
