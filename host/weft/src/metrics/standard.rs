//! The metrics every controller-runtime controller and every client-go
//! client exposes, under their exact names and labels (no `weft_`
//! prefix), so that community dashboards and alerts written for kubebuilder
//! operators work on Weft unchanged. Weft's own metrics (flytepropeller's
//! vocabulary) stay beside them in [`crate::metrics`].
//!
//! kube-runtime keeps its queue to itself, so the work-queue figures are
//! kept by [`crate::controller::workqueue::WorkQueue`] from what enters it (watch
//! events, children waking their Workflow, resyncs, requeues) and what
//! leaves it (a reconcile starting).

use std::time::Duration;

use prometheus_client::metrics::{
    counter::Counter,
    family::Family,
    gauge::Gauge,
    histogram::{Histogram, exponential_buckets},
};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type Timings = Family<Labels, Histogram, fn() -> Histogram>;

/// The controller label of the Workflow controller.
pub const WORKFLOW_CONTROLLER: &str = "workflow";
/// The controller label of the CronWorkflow controller.
pub const CRON_CONTROLLER: &str = "cronworkflow";

/// controller-runtime's reconcile-time buckets (5 ms to 60 s and beyond).
fn reconcile_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// client-go's work-queue buckets: 10 ns to 1,000 s by tens.
fn queue_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// client-go's request-latency buckets.
fn request_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// controller-runtime's and client-go's metric families.
pub struct StandardMetrics {
    reconcile_total: Family<Labels, Counter>,
    reconcile_errors: Family<Labels, Counter>,
    reconcile_time: Timings,
    max_concurrent: Family<Labels, Gauge>,
    active_workers: Family<Labels, Gauge>,
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    queue_duration: Timings,
    work_duration: Timings,
    retries: Family<Labels, Counter>,
    rest_requests: Family<Labels, Counter>,
    rest_duration: Timings,
    rate_limiter_duration: Timings,
}

impl Default for StandardMetrics {
    fn default() -> Self {
        StandardMetrics {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_buckets),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_buckets),
            work_duration: Family::new_with_constructor(queue_buckets),
            retries: Family::default(),
            rest_requests: Family::default(),
            rest_duration: Family::new_with_constructor(request_buckets),
            rate_limiter_duration: Family::new_with_constructor(request_buckets),
        }
    }
}

fn controller(name: &str) -> Labels {
    vec![("controller".into(), name.into())]
}

/// The work queue's labels: client-go names a queue `name`, and
/// controller-runtime adds the controller.
fn queue(name: &str) -> Labels {
    vec![
        ("controller".into(), name.into()),
        ("name".into(), name.into()),
    ]
}

impl StandardMetrics {
    /// Registers every family on `root` (the unprefixed registry).
    pub fn register(&self, root: &mut Registry) {
        let r = root;
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller (0: no limit)",
            self.max_concurrent.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        r.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work_duration.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        r.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.rest_requests.clone(),
        );
        r.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, broken down by verb and host",
            self.rest_duration.clone(),
        );
        r.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds, broken down by verb and host",
            self.rate_limiter_duration.clone(),
        );
    }

    /// Controller `name` starts with `--concurrent-reconciles` `n`: its
    /// series exist from now on at zero, as controller-runtime creates
    /// them, so a dashboard's rate() has a start and an alert on errors
    /// has a series before the first one.
    pub fn controller_started(&self, name: &str, n: u16) {
        let c = controller(name);
        self.max_concurrent.get_or_create(&c).set(i64::from(n));
        drop(self.active_workers.get_or_create(&c));
        drop(self.reconcile_errors.get_or_create(&c));
        drop(self.reconcile_time.get_or_create(&c));
        for result in ["success", "error", "requeue_after"] {
            let mut labels = c.clone();
            labels.push(("result".into(), result.into()));
            drop(self.reconcile_total.get_or_create(&labels));
        }
    }

    /// Queue `name`'s series exist from now on at zero. Only for a queue
    /// Weft follows (the Workflow controller's, see `workqueue.rs`): the
    /// CronWorkflow controller's queue is kube-runtime's own, unseen, so
    /// it has no series rather than zeros that would look like an idle
    /// queue.
    pub fn queue_started(&self, name: &str) {
        let q = queue(name);
        drop(self.depth.get_or_create(&q));
        drop(self.adds.get_or_create(&q));
        drop(self.retries.get_or_create(&q));
        drop(self.queue_duration.get_or_create(&q));
        drop(self.work_duration.get_or_create(&q));
    }

    /// A reconcile of controller `name` started.
    pub fn worker_started(&self, name: &str) {
        self.active_workers.get_or_create(&controller(name)).inc();
    }

    /// A reconcile of controller `name` finished: `result` is
    /// controller-runtime's `success`, `error`, `requeue_after`.
    pub fn worker_finished(&self, name: &str, result: &str, took: Duration) {
        self.active_workers.get_or_create(&controller(name)).dec();
        let mut labels = controller(name);
        labels.push(("result".into(), result.into()));
        self.reconcile_total.get_or_create(&labels).inc();
        if result == "error" {
            self.reconcile_errors.get_or_create(&controller(name)).inc();
        }
        let secs = took.as_secs_f64();
        self.reconcile_time
            .get_or_create(&controller(name))
            .observe(secs);
        self.work_duration.get_or_create(&queue(name)).observe(secs);
    }

    /// An item entered queue `name` (not one already waiting there).
    pub fn queue_add(&self, name: &str) {
        self.adds.get_or_create(&queue(name)).inc();
    }

    /// A failed item of queue `name` was put back with a delay.
    pub fn queue_retry(&self, name: &str) {
        self.retries.get_or_create(&queue(name)).inc();
    }

    /// An item of queue `name` waited `waited` before a worker took it.
    pub fn queue_taken(&self, name: &str, waited: Duration) {
        self.queue_duration
            .get_or_create(&queue(name))
            .observe(waited.as_secs_f64());
    }

    /// How many items of queue `name` are ready and not yet taken.
    pub fn set_queue_depth(&self, name: &str, n: usize) {
        self.depth
            .get_or_create(&queue(name))
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// An API request finished: `code` is the HTTP status (`<error>` when
    /// none came back), `method` the HTTP method, `host` the API server's.
    pub fn rest_request(&self, code: &str, method: &str, host: &str, took: Duration) {
        let labels = vec![
            ("code".into(), code.into()),
            ("method".into(), method.into()),
            ("host".into(), host.into()),
        ];
        self.rest_requests.get_or_create(&labels).inc();
        self.rest_duration
            .get_or_create(&verb_host(method, host))
            .observe(took.as_secs_f64());
    }

    /// A request waited `waited` in the client-side rate limiter.
    pub fn rate_limited(&self, method: &str, host: &str, waited: Duration) {
        self.rate_limiter_duration
            .get_or_create(&verb_host(method, host))
            .observe(waited.as_secs_f64());
    }
}

fn verb_host(method: &str, host: &str) -> Labels {
    vec![("verb".into(), method.into()), ("host".into(), host.into())]
}
