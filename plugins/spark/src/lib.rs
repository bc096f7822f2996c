//! Flyte's spark plugin as a Weft component: a task runs as one
//! `SparkApplication` of the [Kubeflow Spark operator], and the
//! application's state says where the task stands.
//!
//! [Kubeflow Spark operator]: https://github.com/kubeflow/spark-operator
//!
//! # Task config
//!
//! The fields of the operator's `SparkApplication.spec`
//! (`sparkoperator.k8s.io/v1beta2`), with the operator's camelCase names:
//!
//! | key                   | notes                                                                   |
//! |-----------------------|-------------------------------------------------------------------------|
//! | `type`                | required: `Scala`, `Java`, `Python` or `R`                              |
//! | `mode`                | `cluster` (default) or `client`                                         |
//! | `image`               | required unless the plugin config has a default `image`                 |
//! | `mainApplicationFile` | required, e.g. `local:///opt/spark/examples/jars/spark-examples.jar`    |
//! | `mainClass`           | the JVM entry point                                                     |
//! | `arguments`           | a list; numbers and booleans become strings                             |
//! | `sparkVersion`        | required unless the plugin config has a default `sparkVersion`          |
//! | `sparkConf`, `hadoopConf` | maps; values that are not strings become strings (objects as JSON) |
//! | `deps`                | `jars`, `files`, `pyFiles`, `packages`, `excludePackages`, `repositories`, `archives` |
//! | `driver`, `executor`  | the operator's pod specs (`cores`, `coreLimit`, `memory`, `instances`, `serviceAccount`, `labels`, `env`, ...) |
//! | `dynamicAllocation`   | `enabled`, `initialExecutors`, `minExecutors`, `maxExecutors`, `shuffleTrackingEnabled`, `shuffleTrackingTimeout` |
//! | `restartPolicy`       | default `{type: Never}`: Weft retries the node, so the operator should not |
//!
//! and, passed through as written: `imagePullPolicy`, `imagePullSecrets`,
//! `pythonVersion`, `sparkConfigMap`, `hadoopConfigMap`, `nodeSelector`,
//! `volumes`, `timeToLiveSeconds`, `batchScheduler`,
//! `batchSchedulerOptions`, `memoryOverheadFactor`, `monitoring`,
//! `proxyUser`, `sparkUIOptions`, `driverIngressOptions`,
//! `driverPodDisruptionBudget`. Weft's own keys: `inputsAs` (below) and
//! `annotations` (copied onto the SparkApplication).
//!
//! A key the plugin does not know, at the top level or directly inside
//! `driver`, `executor`, `deps`, `dynamicAllocation` or `restartPolicy`,
//! is a permanent error that names it: the API server would prune it
//! silently, and a typo such as `driver.memroy` must not vanish. The
//! operator's `failureRetries`, `retryInterval` and `suspend` are refused
//! the same way: Weft owns retries and the lifecycle.
//!
//! In `driver` and `executor`, `cores`, `instances` (and the executor
//! counts of `dynamicAllocation`) must be whole numbers of at least 1
//! (fractions of a core go in `coreRequest`, e.g. `"500m"`); quantities
//! (`coreLimit`, `coreRequest`, `memory`, `memoryOverhead`, `memoryLimit`)
//! and label values may be given as numbers; `env` may be a Kubernetes list
//! or a `{NAME: value}` map. The driver's `serviceAccount` defaults to the
//! plugin config's. Both get the host's labels on top of their own, so
//! their Pods can be traced to the task.
//!
//! # Inputs
//!
//! `{{inputs.<name>}}` in `arguments` is replaced by the input's text
//! (strings as they are, anything else as JSON). Then, per `inputsAs`:
//!
//! - `arguments` (the default): every input is appended to `arguments` as
//!   `--<name>=<value>`, in the order of the names;
//! - `conf`: every input becomes the Spark property
//!   `spark.weft.input.<name>` in `sparkConf` (read it with
//!   `spark.conf.get("spark.weft.input.n")`), replacing an entry of the
//!   config with the same key;
//! - `none`: only the `{{inputs.<name>}}` substitutions.
//!
//! # The SparkApplication
//!
//! Named `ctx.resource_name` (deterministic per attempt, so a re-run finds
//! the same application), in the workflow's namespace, with the host's
//! labels. [`build_application`] is public so the host's tests can check
//! what it builds against the operator's CRD schema.
//!
//! # Phases
//!
//! | `status.applicationState.state`  | phase             | reason                   |
//! |----------------------------------|-------------------|--------------------------|
//! | absent, `""`, `NEW`              | queued            |                          |
//! | `SUBMITTED`                      | initializing      |                          |
//! | `RUNNING`                        | running           |                          |
//! | `SUCCEEDING`                     | running           | `SparkSucceeding`        |
//! | `FAILING`                        | running           | `SparkFailing`           |
//! | `COMPLETED`                      | success           |                          |
//! | `FAILED`                         | retryable-failure | `SparkFailed`            |
//! | `SUBMISSION_FAILED`              | retryable-failure | `SparkSubmissionFailed`  |
//! | `PENDING_RERUN`, `INVALIDATING`, `RESUMING` | queued | the state in CamelCase  |
//! | `SUSPENDING`, `SUSPENDED`        | waiting-for-resources | `SparkSuspended`     |
//! | `UNKNOWN`                        | running           | `DriverStateUnknown`     |
//! | any other state                  | running           | `UnrecognisedState`      |
//! | deleted before it finished       | retryable-failure | `System:ApplicationDeleted` |
//!
//! Why these:
//!
//! - `FAILED` is the user's job failing (an exception, an OOM-killed driver,
//!   a failed executor budget): a retryable failure, so the node's retries
//!   apply, as for a Pod that exits non-zero.
//! - `SUBMISSION_FAILED` is retryable too (Flyte's spark plugin does the
//!   same). Its usual causes are a ResourceQuota that refused the driver
//!   Pod, an API server hiccup or a missing service account; the first two
//!   pass, and the plugin cannot tell them apart from the operator's text.
//!   Spec errors that are certain are refused earlier, by build-resource
//!   and by the API server's schema check on create. Also, with
//!   `restartPolicy: Never` the operator moves a `SUBMISSION_FAILED`
//!   application to `FAILED` at its next reconcile: mapping the two states
//!   differently would make the outcome depend on which one the host saw.
//! - `UNKNOWN` is reported while the driver Pod's state is briefly unknown
//!   (a node that stopped reporting): the operator resolves it, so the task
//!   keeps running rather than failing on a blip.
//! - `FAILING`/`SUCCEEDING` are the operator's last steps before
//!   `FAILED`/`COMPLETED`: still running, the verdict comes next.
//!
//! `status.applicationState.errorMessage` is carried into the message of
//! every phase that has one. Never an error: any object, however partial,
//! gets a phase.
//!
//! # Outputs and links
//!
//! A `COMPLETED` application's outputs are `applicationId`
//! (`status.sparkApplicationId`), `executionAttempts`, `submissionAttempts`
//! and `driverPod`, those the operator reported. Links: `Driver logs` from
//! the plugin config's `driverLogLinkTemplate` once the driver Pod is
//! known (`status.driverInfo.podName`), and `Spark UI` from
//! `uiLinkTemplate` while the operator reports the UI's address
//! (`status.driverInfo.webUIIngressAddress`, else `webUIAddress`). A
//! template whose placeholder has no value yet gives no link.

mod build;
mod phase;

pub use build::build_application;
pub use phase::application_phase;
use serde_json::Value;
use weft_plugin_sdk::{
    AbortBehaviour, PhaseInfo, PluginError, TaskContext, TaskPlugin, TaskProperties,
};

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

/// The kind's API version.
pub const API_VERSION: &str = "sparkoperator.k8s.io/v1beta2";
/// The kind.
pub const KIND: &str = "SparkApplication";

/// The plugin.
pub struct Spark;

impl TaskPlugin for Spark {
    fn properties() -> TaskProperties {
        TaskProperties {
            // Deleting the SparkApplication makes the operator's owner
            // references take the driver, and the driver's the executors:
            // an aborted workflow's cluster capacity comes back.
            abort: AbortBehaviour::Delete,
            // A finished application keeps its status (the error message,
            // the application id) and its driver Pod keeps the logs, for
            // the user; the Workflow's owner reference removes it with the
            // workflow, and `timeToLiveSeconds` can remove it sooner.
            delete_on_finish: false,
        }
    }

    fn build_resource(ctx: TaskContext) -> Result<Value, PluginError> {
        build_application(&ctx)
    }

    fn get_task_phase(ctx: TaskContext, observed: Value) -> Result<PhaseInfo, PluginError> {
        Ok(application_phase(&ctx, &observed))
    }
}

weft_plugin_sdk::export_task_plugin!(Spark);

#[cfg(test)]
mod tests;
