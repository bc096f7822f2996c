//! Kubernetes Events, as every part of the binary records them: the
//! controller on Workflows, the admin API and `weft`'s actions on what a
//! user did, the hot loader on plugin ConfigMaps.
//!
//! A module of its own (not the controller's) so that these parts are
//! peers: none of them imports another to say something to `kubectl get
//! events`.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};

use crate::metrics::Metrics;

/// The component named in every Event (and the field manager of what the
/// controller writes).
pub const COMPONENT: &str = "weft-controller";

static INSTANCE: OnceLock<String> = OnceLock::new();

/// Names this process in the Events it records (`reportingInstance`, the
/// pod name in a cluster), so `kubectl get events` tells replicas and
/// shards apart. Set once, at start.
pub fn set_instance(identity: &str) {
    let _ = INSTANCE.set(identity.to_string());
}

/// Which Kubernetes Events the controller records on Workflows. Every
/// Event is an API write, as costly as a status patch, so a healthy
/// workflow's Normal Events (its success, its exit handler starting) are
/// opt-in; what an operator must hear about (failures, retries, refusals,
/// what users asked for) is always recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WorkflowEvents {
    /// Warnings and user actions only.
    #[default]
    Warnings,
    /// Also a Workflow's success and its exit handler starting.
    All,
}

/// Records a core/v1 Event about any object (a Workflow, a plugin
/// ConfigMap). Events are best effort: a failure is logged, never returned.
pub async fn record_event<K: Resource<DynamicType = ()>>(
    client: &Client,
    metrics: &Metrics,
    obj: &K,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let name = obj.meta().name.clone().unwrap_or_default();
    let ev = CoreEvent {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns),
            ..Default::default()
        },
        involved_object: obj.object_ref(&()),
        reason: Some(reason.into()),
        message: Some(message.chars().take(1024).collect()),
        type_: Some(kind.into()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: INSTANCE.get().cloned(),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ev).await {
        Ok(_) => metrics.api_write("event"),
        Err(e) => tracing::debug!("cannot record event: {e}"),
    }
}
