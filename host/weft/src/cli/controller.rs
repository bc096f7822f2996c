//! `weft controller` (against a real cluster) and `weft get` (a Workflow's DAG).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kube::{Api, Client};

use crate::api::Workflow;
use crate::controller::elected::Elected;
use crate::controller::impersonation::Impersonation;
use crate::controller::leader::LeaderConfig;
use crate::controller::shard::{Shard, ShardKey};
use crate::events::WorkflowEvents;
use crate::metrics::Metrics;
use crate::{render, runtime, serve};

/// Arguments of `weft controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Settings from a YAML file: each flag's long name in camelCase (e.g.
    /// `concurrentReconciles: 4`, `pluginNamespace: [a, b]`,
    /// `noHotload: true`); flags given here override it. An unknown key or
    /// a bad value stops the start, naming it.
    #[arg(long, value_name = "FILE", env = "WEFT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective settings (as a --config file) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Plugin directory (components with their manifests).
    #[arg(long, default_value = "/var/lib/weft/plugins", env = "WEFT_PLUGINS")]
    pub plugins: PathBuf,
    /// The operator's plugin registry settings (YAML): `enabled`,
    /// `defaultForTaskTypes`, `middlewareOrder`, and `plugins.NAME.config`
    /// overrides (which may name Secrets). See docs/hotload.md.
    #[arg(long, value_name = "FILE", env = "WEFT_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// Only Workflows of this namespace (all namespaces when absent).
    #[arg(long, env = "WEFT_NAMESPACE")]
    pub namespace: Option<String>,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    #[arg(long, default_value = "0.0.0.0:8080", env = "WEFT_METRICS_ADDR")]
    pub metrics_addr: SocketAddr,
    /// Precompiled plugin cache.
    #[arg(long, env = "WEFT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Install or update the Workflow CRD at start.
    #[arg(long)]
    pub install_crd: bool,
    /// Namespaces whose ConfigMaps labelled `weft.dev/plugin` are hot-loaded
    /// (default: the --namespace, or all namespaces).
    #[arg(long, env = "WEFT_PLUGIN_NAMESPACES", value_delimiter = ',')]
    pub plugin_namespace: Vec<String>,
    /// Do not hot-load plugins from ConfigMaps (only the plugin directory).
    #[arg(long)]
    pub no_hotload: bool,
    /// Sandbox faults (traps, timeouts) a plugin version may have within
    /// --breaker-window before it is rolled back; 0 disables the breaker.
    #[arg(long, default_value_t = 5)]
    pub breaker_faults: u32,
    /// The circuit breaker's window.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub breaker_window: std::time::Duration,
    /// How long a node waits (Pending, reason WaitingForPlugin) for a plugin
    /// being loaded to serve its task type before it fails.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub plugin_wait_timeout: std::time::Duration,
    /// How deep sub-workflow and dynamic nodes may nest child Workflows; a
    /// node that would go deeper fails (MaxDepthExceeded).
    #[arg(long, default_value_t = crate::controller::executor::DEFAULT_MAX_DEPTH)]
    pub max_workflow_depth: u32,
    /// Delete finished Workflows that set no `ttlStrategy` this long after
    /// they finished (e.g. 7d); kept forever when absent.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub default_ttl_after_completion: Option<std::time::Duration>,
    /// Which Events Workflows get: `warnings` (failures, retries,
    /// refusals and what users asked for) or `all` (also a workflow's
    /// success and its exit handler starting). Each Event is an API write.
    #[arg(long, value_enum, default_value_t = WorkflowEvents::Warnings, env = "WEFT_WORKFLOW_EVENTS")]
    pub workflow_events: WorkflowEvents,
    /// How many Workflows are reconciled at once (controller-runtime's
    /// MaxConcurrentReconciles, KubeVela's --concurrent-reconciles); 0 is
    /// no limit. One Workflow is never reconciled twice at once. Workflows
    /// not yet started get a free worker first (four in five while both
    /// wait), so a burst of new ones is not queued behind running ones.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        env = "WEFT_CONCURRENT_RECONCILES"
    )]
    pub concurrent_reconciles: u16,
    /// Requests a second the controller's Kubernetes clients may send on
    /// average (client-go's QPS; every request, watches included, takes a
    /// token); 0 is no limit. The default keeps well below kube-apiserver's
    /// default max-in-flight (400 reads, 200 writes) shared by all clients.
    /// Creates (children, Workflows) and Lease renewals get a token first
    /// (four in five while other requests wait too).
    #[arg(long, default_value_t = crate::kubeclient::DEFAULT_QPS, value_name = "QPS", env = "WEFT_KUBE_API_QPS")]
    pub kube_api_qps: f32,
    /// Requests that may go at once after a quiet spell (client-go's
    /// Burst: the bucket's size).
    #[arg(long, default_value_t = crate::kubeclient::DEFAULT_BURST, value_name = "N", env = "WEFT_KUBE_API_BURST")]
    pub kube_api_burst: u32,
    /// How often every Workflow is reconciled with no event at all
    /// (controller-runtime's SyncPeriod: a safety net for a change no
    /// watch reported); 0 never.
    #[arg(long, default_value = "10h", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub sync_period: Duration,
    /// How long a round's status may wait to be written with the next
    /// change (gate CoalesceStatusWrites): minor changes, and rounds that
    /// only started nodes or saw them succeed. A task that starts and ends
    /// within it costs its Workflow one status write instead of two; a
    /// node's progress is shown up to this much later (failures and the
    /// workflow's end at once). While status writes are slow the hold
    /// stretches to ten times their recent latency, at most 30s. 0s writes
    /// every round's status at once.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub status_hold: Duration,
    /// How long a SIGTERM waits for running reconciles to finish (and
    /// write their status) before the Lease is released and the process
    /// exits; deploy/ sets terminationGracePeriodSeconds above it.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub graceful_shutdown_timeout: Duration,
    /// Serve CPU (`/debug/pprof/profile?seconds=N`) and heap
    /// (`/debug/pprof/heap`) profiles in pprof's format here; off by
    /// default. Keep it on a loopback or pod-internal address: a profile
    /// shows the process's internals.
    #[arg(long, value_name = "ADDR", env = "WEFT_PROFILING_ADDR")]
    pub profiling_addr: Option<SocketAddr>,
    /// Where tasks' artifacts go.
    #[command(flatten)]
    pub artifacts: super::artifacts::ArtifactArgs,
    /// Where execution history goes.
    #[command(flatten)]
    pub history: super::history::HistoryArgs,
    /// At most this many top-level workflows run at once in all (Argo's
    /// `parallelism`); the others wait `Pending`, started by
    /// `spec.priority`, then creation. 0: no limit.
    #[arg(long, default_value_t = 0, value_name = "N", env = "WEFT_PARALLELISM")]
    pub parallelism: u32,
    /// At most this many top-level workflows run at once per namespace
    /// (Argo's `namespaceParallelism`); a Namespace's
    /// `weft.dev/parallelism` annotation overrides it. 0: no limit.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        env = "WEFT_NAMESPACE_PARALLELISM"
    )]
    pub namespace_parallelism: u32,
    /// A resource pool: at most N tasks of TYPE run at once in each
    /// namespace (Flyte's resource manager; e.g. `http=20` for a
    /// quota-limited service); the others wait `Pending`
    /// (`WaitingForResources`). Repeatable.
    #[arg(long = "resource-pool", value_name = "TYPE=N", value_parser = crate::sync::limits::parse_pool)]
    pub resource_pools: Vec<(String, u32)>,
    /// Alpha and beta features on or off, `Name=true,Other=false`
    /// (Kubernetes' --feature-gates); `weft controller --print-config`
    /// lists them.
    #[arg(long, value_name = "GATES", default_value = "", value_parser = crate::controller::features::FeatureGates::parse)]
    pub feature_gates: crate::controller::features::FeatureGates,
    /// Instances each plugin version keeps prepared ahead of its calls,
    /// so a call does not wait for instantiation (each serves one call,
    /// then is dropped). A plugin whose instances are cheap to make (Rust,
    /// C) keeps one more, so its calls wake the preparer every other time.
    /// Each costs a slot of the instance pool and the memory its
    /// instantiation wrote; 0 instantiates on the caller's path.
    #[arg(
        long,
        default_value_t = runtime::DEFAULT_SPARES,
        value_name = "N",
        env = "WEFT_PLUGIN_SPARES"
    )]
    pub plugin_spares: usize,
    /// How much of a used plugin instance's memory stays resident, reset
    /// in place, for the next instance of the same version (a quantity:
    /// 16Mi, 512Ki, 0). Large enough for a language runtime's heap (a
    /// Python plugin's is ~14 MiB) so its calls take no page faults; the
    /// instance pool holds at most this much per instance alive at once.
    /// 0 gives a used instance's memory back to the system.
    #[arg(
        long,
        default_value = "16Mi",
        value_parser = keep_resident,
        value_name = "QUANTITY",
        env = "WEFT_PLUGIN_KEEP_RESIDENT"
    )]
    pub plugin_keep_resident: usize,
    /// The scheduling priority of the thread that prepares plugin
    /// instances ahead of their calls and resets used ones: `low` (nice
    /// 19: any other thread that wakes goes first, so preparing the next
    /// instance does not delay the request that handed over the last),
    /// `idle` (Linux SCHED_IDLE: only CPU nobody else wants; while the
    /// cores stay busy, calls instantiate inline) or `normal`.
    #[arg(
        long,
        default_value = "low",
        value_name = "low|idle|normal",
        env = "WEFT_PLUGIN_PREPARER_PRIORITY"
    )]
    pub plugin_preparer_priority: weft_plugin::PreparerPriority,
    /// Create, patch and delete each plugin's resources impersonating its
    /// ServiceAccount `weft-plugin-NAME`, whose Role grants exactly the
    /// kinds its manifest declares (`weft plugin rbac`): the API server then
    /// enforces the manifest too. The controller needs `impersonate` on
    /// those ServiceAccounts.
    #[arg(long, env = "WEFT_IMPERSONATE_PLUGINS")]
    pub impersonate_plugins: bool,
    /// The namespace of the plugins' ServiceAccounts (default: the first
    /// --plugin-namespace, else the Lease namespace, i.e. POD_NAMESPACE).
    #[arg(long, requires = "impersonate_plugins")]
    pub plugin_service_account_namespace: Option<String>,
    /// The admission webhook.
    #[command(flatten)]
    pub webhook: crate::webhook::WebhookArgs,
    /// The admin API.
    #[command(flatten)]
    pub admin: super::dev::AdminArgs,
    /// Do not serve the admin API.
    #[arg(long)]
    pub no_admin: bool,
    /// Leader election.
    #[command(flatten)]
    pub election: ElectionArgs,
    /// Sharding.
    #[command(flatten)]
    pub sharding: ShardArgs,
}

/// Leader election flags (client-go's names and defaults).
#[derive(Debug, Args)]
pub struct ElectionArgs {
    /// Reconcile only while holding a coordination.k8s.io Lease, so that
    /// of several replicas exactly one (per shard) reconciles
    /// (also --leader-election).
    #[arg(long, alias = "leader-election")]
    pub leader_elect: bool,
    /// How long the Lease stays held after its last renewal: the longest a
    /// standby waits before taking over from a leader that died.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps failing to renew before it stops
    /// reconciling (shorter than the lease duration).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to take the Lease and the leader renews it.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// The Lease's namespace (KubeVela: --leader-election-namespace).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "default",
        alias = "leader-election-namespace"
    )]
    pub leader_elect_namespace: String,
    /// The Lease's name; with --shards above 1, `-shard-<i>` is appended
    /// (controller-runtime: LeaderElectionID, --leader-election-id).
    #[arg(long, default_value = "weft-controller", alias = "leader-election-id")]
    pub leader_elect_name: String,
    /// Who this replica is in the Lease and in Events (default: the pod
    /// name, else host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub leader_elect_identity: Option<String>,
}

/// Sharding flags.
#[derive(Debug, Args)]
pub struct ShardArgs {
    /// How many shards split the Workflows (each has its own Lease).
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
    /// The shard this process runs, from 0.
    #[arg(long, env = "WEFT_SHARD", default_value_t = 0)]
    pub shard: u32,
    /// What a Workflow is hashed by: `name` (namespace/name) or
    /// `label:<key>` (that label's value).
    #[arg(long, default_value = "name")]
    pub shard_by: ShardKey,
}

impl ControllerArgs {
    /// This process's name: the pod's in a cluster.
    pub fn identity(&self) -> String {
        self.election
            .leader_elect_identity
            .clone()
            .unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "weft".into());
                format!("{host}-{}", std::process::id())
            })
    }

    /// The shard these arguments ask for (`None`: one shard, everything).
    pub fn shard(&self) -> anyhow::Result<Option<Shard>> {
        let s = &self.sharding;
        let shard =
            Shard::new(s.shard, s.shards, s.shard_by.clone()).map_err(anyhow::Error::msg)?;
        Ok((s.shards > 1).then_some(shard))
    }

    /// The Lease to hold, when --leader-elect.
    pub fn leader(&self) -> anyhow::Result<Option<LeaderConfig>> {
        let e = &self.election;
        if !e.leader_elect {
            return Ok(None);
        }
        let name = match self.shard()? {
            Some(s) => format!("{}-shard-{}", e.leader_elect_name, s.index),
            None => e.leader_elect_name.clone(),
        };
        let config = LeaderConfig {
            namespace: e.leader_elect_namespace.clone(),
            name,
            identity: self.identity(),
            lease_duration: e.leader_elect_lease_duration,
            renew_deadline: e.leader_elect_renew_deadline,
            retry_period: e.leader_elect_retry_period,
        };
        config.validate()?;
        Ok(Some(config))
    }
}

impl ControllerArgs {
    /// The hot loading configuration these arguments ask for.
    pub fn hotload(&self) -> crate::hotload::HotloadConfig {
        let namespaces = if self.plugin_namespace.is_empty() {
            self.namespace.iter().cloned().collect()
        } else {
            self.plugin_namespace.clone()
        };
        crate::hotload::HotloadConfig {
            namespaces,
            workflow_namespace: self.namespace.clone(),
            breaker: weft_plugin::breaker::BreakerConfig {
                max_faults: self.breaker_faults,
                window: self.breaker_window,
            },
            ..Default::default()
        }
    }
}

/// Run `weft controller`: kubeconfig or in-cluster config, as kube-rs finds it.
pub fn controller(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let admin_config = (!args.no_admin)
        .then(|| args.admin.config(false))
        .transpose()?;
    // Bad flags fail before anything starts.
    let registry_config = runtime::registry_config(args.registry_config.as_deref())?;
    let leader = args.leader()?;
    let shard = args.shard()?;
    crate::events::set_instance(&args.identity());
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let kube_config = kube::Config::infer().await?;
        let metrics = Arc::new(Metrics::default());
        let limits = crate::kubeclient::ApiLimits {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
        };
        let throttle = crate::kubeclient::Throttle::new(limits, metrics.clone())?;
        let client = throttle.client(kube_config.clone())?;
        if let Some(addr) = args.profiling_addr {
            let addr = crate::profiling::serve(addr).await?;
            tracing::info!(%addr, "serving CPU and heap profiles at /debug/pprof/");
        }
        let (engine, registry) =
            runtime::load_plugins_with(&args.plugins, args.cache_dir.as_deref(), registry_config, runtime::PluginSizing {
                spares: args.plugin_spares,
                keep_resident: args.plugin_keep_resident,
                preparer_priority: args.plugin_preparer_priority,
                ..runtime::PluginSizing::weft()
            })?;
        if args.install_crd {
            runtime::install_crd(&client).await?;
        }
        let artifacts = args
            .artifacts
            .open(&client, &args.election.leader_elect_namespace, None)
            .await?;
        let history = args.history.open(metrics.clone(), None)?;
        let ready = Arc::new(serve::Readiness::default());
        if let Some(h) = history.clone() {
            ready.add_detail("history", Box::new(move || h.health()));
        }
        // The controller lends its Workflow cache here; the loader's pins
        // read it.
        let live = crate::live::LiveWorkflows::new();
        let loader = (!args.no_hotload).then(|| {
            let config = crate::hotload::HotloadConfig {
                workflows: Some(live.clone()),
                ..args.hotload()
            };
            runtime::spawn_hotload(
                client.clone(),
                engine,
                registry.clone(),
                metrics.clone(),
                config,
                futures::future::pending(),
            )
        });
        // Reconcile only once the plugins (and the archived versions that
        // running workflows pin) are loaded.
        if let Some((l, _)) = &loader {
            l.synced().await;
        }
        let loader = loader.map(|(_, task)| task);
        // The admin API, hot loading and /metrics serve on every replica;
        // only reconciling waits for the lease. The admin API opens once
        // the plugins are loaded and configured (its middleware chain with
        // them): before, an authenticator without its tokens would refuse
        // every caller.
        let admin = match &admin_config {
            Some(config) => Some(
                crate::admin::serve_with(
                    config,
                    client.clone(),
                    registry.clone(),
                    metrics.clone(),
                    crate::admin::Planes {
                        artifacts: artifacts.clone(),
                        history: history.clone(),
                    },
                    super::dev::shutdown_signal(),
                )
                .await?,
            ),
            None => None,
        };
        let ns = &args.election.leader_elect_namespace;
        args.webhook.start(&client, registry.clone(), ns).await?;
        let addr = serve::serve(args.metrics_addr, metrics.clone(), ready.clone()).await?;
        tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
        if let Some(l) = &leader {
            tracing::info!(lease = %l.name, namespace = %l.namespace, identity = %l.identity, "leader election on");
        }
        if let Some(s) = &shard {
            tracing::info!(shard = s.index, shards = s.count, "sharded");
        }
        ready.set_ready();
        let controller = Elected {
            client,
            registry,
            metrics,
            namespace: args.namespace.clone(),
            leader,
            shard,
            settings: crate::controller::Settings {
                plugin_wait: args.plugin_wait_timeout,
                max_depth: args.max_workflow_depth,
                default_ttl: args.default_ttl_after_completion,
                events: args.workflow_events,
                concurrency: args.concurrent_reconciles,
                impersonation: args.impersonate_plugins.then(|| {
                    let ns = args
                        .plugin_service_account_namespace
                        .clone()
                        .or_else(|| args.plugin_namespace.first().cloned())
                        .unwrap_or_else(|| args.election.leader_elect_namespace.clone());
                    tracing::info!(namespace = %ns, "plugins' resources are written as their ServiceAccounts weft-plugin-NAME");
                    std::sync::Arc::new(Impersonation::new(kube_config, &ns, throttle))
                }),
                sync_period: Some(args.sync_period),
                status_hold: args.status_hold,
                gates: args.feature_gates.clone(),
                artifacts,
                history,
                limits: crate::sync::Limits {
                    parallelism: Some(args.parallelism).filter(|n| *n > 0),
                    namespace_parallelism: Some(args.namespace_parallelism).filter(|n| *n > 0),
                    home: args
                        .namespace
                        .clone()
                        .unwrap_or_else(|| args.election.leader_elect_namespace.clone()),
                    pools: args.resource_pools.iter().cloned().collect(),
                },
                live,
            },
            grace: args.graceful_shutdown_timeout,
        };
        controller
            .run(async {
                super::dev::shutdown_signal().await;
            })
            .await?;
        if let Some(l) = loader {
            l.abort();
        }
        if let Some(a) = admin {
            a.task.abort();
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Output formats of `weft get`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GetFormat {
    /// The Workflow as YAML.
    Yaml,
    /// Graphviz dot of the DAG with node phases.
    Dot,
    /// A Mermaid flowchart of the DAG with node phases.
    Mermaid,
}

/// Arguments of `weft get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The Workflow's name.
    pub name: String,
    /// Its namespace.
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = GetFormat::Yaml)]
    pub output: GetFormat,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

/// A Workflow as YAML with its nodes readable: a large status is stored
/// with them compressed (`compressedNodes`), shown here as `nodes`, as
/// `argo get` shows them.
fn yaml_with_nodes(wf: &Workflow) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(wf)?;
    if let Some(status) = v.get_mut("status") {
        weft_dag::status::expand(status).map_err(anyhow::Error::msg)?;
    }
    Ok(serde_yaml::to_string(&v)?)
}

/// Run `weft get`.
pub fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = match &args.server {
            Some(url) => runtime::client_for(url)?,
            None => Client::try_default().await?,
        };
        let api: Api<Workflow> = Api::namespaced(client.clone(), &args.namespace);
        let wf = api.get(&args.name).await?;
        // A template launch has no nodes of its own: it runs the spec
        // resolved when it started, or (before that) the template's.
        let resolved = wf
            .status
            .as_ref()
            .and_then(|s| s.resolved_spec.as_deref().cloned());
        let spec = match (resolved, &wf.spec.spec.workflow_template_ref) {
            (Some(spec), _) => spec,
            (None, Some(t)) if !matches!(args.output, GetFormat::Yaml) => {
                super::template::get_template(&client, &args.namespace, &t.name)
                    .await?
                    .spec
                    .spec
                    .workflow
            }
            _ => wf.spec.spec.clone(),
        };
        let out = match args.output {
            GetFormat::Yaml => yaml_with_nodes(&wf)?,
            GetFormat::Dot => render::dot(&args.name, &spec, wf.status.as_ref()),
            GetFormat::Mermaid => render::mermaid(&spec, wf.status.as_ref()),
        };
        super::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `--plugin-keep-resident`: a byte quantity, at most the pool's 512 MiB
/// slot.
fn keep_resident(s: &str) -> Result<usize, String> {
    let bytes = weft_plugin::manifest::parse_quantity(s)?;
    if bytes > 512 << 20 {
        return Err(format!(
            "{s} is more than a plugin instance's memory can be (512Mi)"
        ));
    }
    usize::try_from(bytes).map_err(|e| e.to_string())
}
