//! Weft's admission webhook, the role of Flyte propeller's: a Workflow is
//! checked when it is submitted, by the same validator the controller runs
//! (every problem at once, with node ids and cycle paths), instead of being
//! accepted and failing afterwards in its status. This module is the
//! decision, on AdmissionReview v1 objects (kube's admission types);
//! [`server`] serves it over HTTPS with its own certificates.

pub mod certs;
pub use crate::pod_secrets;
pub mod server;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use weft_plugin::Registry;

use crate::api::{Workflow, WorkflowTemplate};

/// The validating configuration an install registers.
pub const VALIDATING: &str = "weft-validating";
const VALIDATING_KIND: &str = "ValidatingWebhookConfiguration";
const MUTATING_KIND: &str = "MutatingWebhookConfiguration";

/// The API of one kind of webhook configuration, untyped: only caBundles
/// and whole configurations are written through it.
fn configuration_api(client: &Client, kind: &str) -> Api<kube::api::DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk))
}

/// The webhook's flags, shared by `weft controller` and `weft webhook`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// Serve the admission webhook (HTTPS) on this port: Workflows are
    /// checked at submission by the controller's own validator
    /// (`POST /validate`), task pods get their secrets (`POST /mutate-pods`).
    #[arg(long, value_name = "PORT")]
    pub webhook_port: Option<u16>,
    /// A directory with the operator's `tls.crt`/`tls.key` (e.g. from
    /// cert-manager), re-read when they change. Without them, the
    /// certificate is managed in a Secret (below) and also written here.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The Secret (in the Lease namespace) holding the managed CA and
    /// certificate, shared by every replica.
    #[arg(long, default_value = "weft-webhook-certs")]
    pub webhook_cert_secret: String,
    /// How long a managed certificate is valid; it is renewed in the last
    /// third of that time.
    #[arg(long, default_value = "8760h", value_parser = humantime::parse_duration)]
    pub webhook_cert_validity: Duration,
    /// Webhook configurations whose caBundle is kept on the managed CA:
    /// `validating/NAME` or `mutating/NAME` (a bare NAME is looked up as
    /// either, which costs a denied read where RBAC names the objects).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "validating/weft-validating,mutating/weft-pod-secrets"
    )]
    pub webhook_configurations: Vec<String>,
    /// The names the managed certificate is for (default: the Service
    /// weft-webhook in the Lease namespace, and localhost).
    #[arg(long, value_delimiter = ',')]
    pub webhook_names: Vec<String>,
    /// Admit Workflows whose task types no plugin serves yet (plugins may be
    /// hot-loaded later), with a warning.
    #[arg(long)]
    pub allow_unknown_task_types: bool,
}

impl WebhookArgs {
    /// Starts the webhook when a port is set: certificates (managed in the
    /// Secret, renewed, caBundles patched; or the operator's files), then
    /// the HTTPS server.
    pub async fn start(
        &self,
        client: &Client,
        registry: Arc<Registry>,
        namespace: &str,
    ) -> anyhow::Result<Option<SocketAddr>> {
        let Some(port) = self.webhook_port else {
            return Ok(None);
        };
        let files = match &self.webhook_cert_dir {
            Some(dir) => certs::from_files(dir).await?,
            None => None,
        };
        let resolver = match files {
            Some(r) => r,
            None => {
                let names = match self.webhook_names.is_empty() {
                    true => vec![
                        format!("weft-webhook.{namespace}.svc"),
                        format!("weft-webhook.{namespace}.svc.cluster.local"),
                        "localhost".into(),
                    ],
                    false => self.webhook_names.clone(),
                };
                let managed = certs::Managed {
                    client: client.clone(),
                    namespace: namespace.into(),
                    secret: self.webhook_cert_secret.clone(),
                    names,
                    validity: self.webhook_cert_validity,
                    configurations: self.webhook_configurations.clone(),
                    write_dir: self.webhook_cert_dir.clone(),
                };
                let (issued, resolver) = managed.start().await?;
                tokio::spawn(managed.keep_fresh(issued, resolver.clone()));
                resolver
            }
        };
        let validator = Arc::new(
            Validator::new(registry, self.allow_unknown_task_types).with_client(client.clone()),
        );
        let addr = SocketAddr::from(([0, 0, 0, 0], port));
        Ok(Some(server::serve(addr, resolver, validator).await?))
    }
}

/// The two webhook configurations, calling the webhook as `client_config`
/// gives it for a path (a `service` in a cluster install, a `url` for the
/// dev cluster). Workflows are validated on create and on update; task
/// pods marked for secrets are mutated on create, and refused when the
/// webhook is down rather than run without them.
pub fn configurations(client_config: impl Fn(&str) -> Value) -> [Value; 2] {
    let common = |path: &str| {
        json!({
            "clientConfig": client_config(path),
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        })
    };
    let mut workflows = common(server::VALIDATE);
    workflows["name"] = "workflows.validate.weft.dev".into();
    workflows["rules"] = json!([{"apiGroups": ["weft.dev"], "apiVersions": ["*"],
        "operations": ["CREATE", "UPDATE"], "resources": ["workflows", "workflowtemplates"],
        "scope": "Namespaced"}]);
    let mut pods = common(server::MUTATE_PODS);
    pods["name"] = "pod-secrets.weft.dev".into();
    pods["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]);
    pods["objectSelector"] = json!({"matchLabels": {pod_secrets::LABEL: "true"}});
    pods["reinvocationPolicy"] = "Never".into();
    let meta = |name: &str| json!({"name": name, "labels": {"app.kubernetes.io/part-of": "weft"}});
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": VALIDATING_KIND,
               "metadata": meta(VALIDATING), "webhooks": [workflows]}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": MUTATING_KIND,
               "metadata": meta(pod_secrets::CONFIGURATION), "webhooks": [pods]}),
    ]
}

/// `weft dev` and `weft run`: the webhook on a loopback port with a managed
/// certificate, registered with the dev cluster by URL, so a new user's
/// first Workflows meet the same admission as a cluster install's.
pub async fn serve_dev(
    client: &Client,
    registry: Arc<Registry>,
    allow_unknown_task_types: bool,
) -> anyhow::Result<SocketAddr> {
    const NS: &str = "weft-system";
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NS).await?.is_none() {
        let ns = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
        namespaces.create(&Default::default(), &ns).await?;
    }
    let managed = certs::Managed {
        client: client.clone(),
        namespace: NS.into(),
        secret: "weft-webhook-certs".into(),
        names: vec!["127.0.0.1".into()],
        validity: Duration::from_secs(365 * 86400),
        configurations: Vec::new(),
        write_dir: None,
    };
    let (issued, resolver) = managed.start().await?;
    let validator =
        Arc::new(Validator::new(registry, allow_unknown_task_types).with_client(client.clone()));
    let addr = server::serve(([127, 0, 0, 1], 0).into(), resolver.clone(), validator).await?;
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(&issued.ca_cert);
    let port = addr.port();
    for config in configurations(
        |path| json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca}),
    ) {
        let name = config["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let api = configuration_api(client, config["kind"].as_str().unwrap_or_default());
        api.patch(
            &name,
            &PatchParams::apply("weft-dev").force(),
            &Patch::Apply(&config),
        )
        .await
        .with_context(|| format!("registering {name} with the dev cluster"))?;
    }
    tokio::spawn(managed.keep_fresh(issued, resolver));
    Ok(addr)
}

/// Decides on Workflows and WorkflowTemplates.
pub struct Validator {
    registry: Arc<Registry>,
    /// Admit task types no plugin serves yet (plugins may be hot-loaded
    /// later), with a warning instead of a refusal.
    allow_unknown_task_types: bool,
    /// Reads the templates a Workflow launches (no client: a launch is
    /// admitted unchecked and the controller checks it when it starts).
    client: Option<Client>,
}

impl Validator {
    /// A validator that knows the task types `registry` serves or is loading.
    pub fn new(registry: Arc<Registry>, allow_unknown_task_types: bool) -> Self {
        Validator {
            registry,
            allow_unknown_task_types,
            client: None,
        }
    }

    /// Checks template launches against the templates `client` reads.
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The answer to one AdmissionReview.
    pub async fn review(
        &self,
        review: AdmissionReview<DynamicObject>,
    ) -> AdmissionReview<DynamicObject> {
        let req: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(r) => r,
            Err(e) => return AdmissionResponse::invalid(e.to_string()).into_review(),
        };
        let mut resp = AdmissionResponse::from(&req);
        match self.check(&req).await {
            Ok(warnings) => {
                if !warnings.is_empty() {
                    resp.warnings = Some(warnings);
                }
                resp
            }
            Err(why) => resp.deny(why),
        }
        .into_review()
    }

    /// Ok with warnings, or why the object is refused.
    async fn check(&self, req: &AdmissionRequest<DynamicObject>) -> Result<Vec<String>, String> {
        if matches!(req.operation, Operation::Delete | Operation::Connect) {
            return Ok(Vec::new());
        }
        let Some(object) = &req.object else {
            return Ok(Vec::new());
        };
        // The controller's own updates (finalizers, labels) leave the spec
        // as it was admitted, or as it was before the webhook was installed:
        // they are never refused for it.
        if let Some(old) = &req.old_object
            && old.data.get("spec") == object.data.get("spec")
        {
            return Ok(Vec::new());
        }
        let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
        let snapshot = self.registry.snapshot();
        let served: HashSet<&str> = snapshot.task_types().collect();
        let known = |t: &str| {
            served.contains(t)
                || self.registry.loading(t).is_some()
                || self.allow_unknown_task_types
        };
        let spec = match req.kind.kind.as_str() {
            "WorkflowTemplate" => {
                let t: WorkflowTemplate = decode(value)?;
                let name = kube::ResourceExt::name_any(&t);
                let problems = weft_dag::template::validate(&name, &t.spec.spec, &known);
                refuse("workflow template", &problems)?;
                if let Some(client) = &self.client {
                    let ns = req.namespace.clone().unwrap_or_default();
                    let own = &t.spec.spec.workflow;
                    crate::templates::check_recursion(client, &ns, Some(&name), own)
                        .await
                        .map_err(|why| format!("invalid workflow template:\n{why}"))?;
                }
                t.spec.spec.workflow
            }
            _ => {
                let wf: Workflow = decode(value)?;
                let Some(spec) = self.launched(&wf).await? else {
                    return Ok(Vec::new());
                };
                if let Err(problems) = weft_dag::compile(&spec, &known) {
                    refuse("workflow spec", &problems)?;
                }
                spec
            }
        };
        Ok(spec
            .nodes
            .iter()
            .filter_map(|n| n.task.as_ref())
            .map(|t| t.task_type.as_str())
            .filter(|t| !served.contains(t))
            .map(|t| format!("no plugin serves task type {t:?} yet: the workflow waits for one"))
            .collect())
    }

    /// The spec a Workflow runs: its own, or its template's with its inputs
    /// bound; `None` when it launches a template and no client can read it.
    async fn launched(&self, wf: &Workflow) -> Result<Option<weft_dag::WorkflowSpec>, String> {
        if wf.spec.spec.workflow_template_ref.is_none() {
            return Ok(Some(wf.spec.spec.clone()));
        }
        let Some(client) = &self.client else {
            return Ok(None);
        };
        crate::templates::spec_to_run(client, wf)
            .await
            .map(Some)
            .map_err(|why| format!("invalid workflow spec:\n{why}"))
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

/// Err with every problem, one per line, when there are any.
fn refuse(what: &str, problems: &[weft_dag::Problem]) -> Result<(), String> {
    match problems.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "invalid {what}:\n{}",
            weft_dag::compile::describe(problems)
        )),
    }
}

#[cfg(test)]
mod tests;
