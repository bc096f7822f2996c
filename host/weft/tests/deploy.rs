//! `deploy/`: every overlay renders with `kubectl kustomize`, every document
//! is a kind we mean to ship (read into its k8s-openapi type, with no field
//! the type does not know), the controller's Deployment is locked down and
//! its arguments and admin config parse as `weft` parses them, the webhook
//! configurations are the ones `weft` registers, and the embedded dev
//! cluster accepts each overlay with server-side apply.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use clap::Parser;
use common::{grant_set, kubectl, kustomize, root};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const NAMESPACE: &str = "weft-system";
const CONTROLLER: &str = "weft-controller";
/// The admission webhook's Service, and the Secret the controller keeps its
/// certificate in.
const WEBHOOK_SERVICE: &str = "weft-webhook";
const WEBHOOK_SECRET: &str = "weft-webhook-certs";

/// The overlays and the replicas each asks for.
const OVERLAYS: &[(&str, i32)] = &[("dev", 1), ("production", 2)];

/// One overlay's documents, by kind.
#[derive(Default)]
struct Rendered {
    overlay: String,
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    pdbs: Vec<PodDisruptionBudget>,
    config_maps: Vec<ConfigMap>,
    crds: Vec<CustomResourceDefinition>,
    /// Validating and mutating webhook configurations, as rendered (each
    /// also read into its type), to compare with what `weft` registers.
    webhook_configurations: Vec<Value>,
}

fn render(overlay: &str) -> Rendered {
    parse(overlay, &kustomize(&format!("deploy/overlays/{overlay}")))
}

fn parse(overlay: &str, yaml: &str) -> Rendered {
    let mut r = Rendered {
        overlay: overlay.to_string(),
        ..Default::default()
    };
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{overlay}: bad YAML: {e}"));
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default();
        let what = format!(
            "{overlay}: {kind} {}",
            value["metadata"]["name"].as_str().unwrap_or("<no name>")
        );
        match kind {
            "Namespace" => r.namespaces.push(typed(&what, &value)),
            "ServiceAccount" => r.service_accounts.push(typed(&what, &value)),
            "ClusterRole" => r.cluster_roles.push(typed(&what, &value)),
            "ClusterRoleBinding" => r.cluster_role_bindings.push(typed(&what, &value)),
            "Role" => r.roles.push(typed(&what, &value)),
            "RoleBinding" => r.role_bindings.push(typed(&what, &value)),
            "Deployment" => r.deployments.push(typed(&what, &value)),
            "Service" => r.services.push(typed(&what, &value)),
            "PodDisruptionBudget" => r.pdbs.push(typed(&what, &value)),
            "ConfigMap" => r.config_maps.push(typed(&what, &value)),
            "CustomResourceDefinition" => r.crds.push(typed(&what, &value)),
            "ValidatingWebhookConfiguration" => {
                typed::<ValidatingWebhookConfiguration>(&what, &value);
                r.webhook_configurations.push(value.clone());
            }
            "MutatingWebhookConfiguration" => {
                typed::<MutatingWebhookConfiguration>(&what, &value);
                r.webhook_configurations.push(value.clone());
            }
            _ => panic!(
                "{what}: a kind this test does not know; add it here once the dev cluster serves it"
            ),
        }
    }
    r
}

/// The document as its k8s-openapi type (which also checks `apiVersion`),
/// refusing fields the type drops: a misspelt or misplaced field.
fn typed<T: DeserializeOwned + serde::Serialize>(what: &str, value: &Value) -> T {
    let t: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&t).expect("serializes");
    let mut unknown = Vec::new();
    dropped_fields(value, &back, "", &mut unknown);
    assert!(
        unknown.is_empty(),
        "{what}: fields its type does not have: {unknown:?}"
    );
    t
}

/// The object keys of `original` that are missing from `typed` (a
/// round-trip through the type). Only keys are compared: scalars may
/// change form (`0` and `0.0`).
fn dropped_fields(original: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                let p = format!("{path}.{k}");
                match t.get(k) {
                    Some(tv) => dropped_fields(v, tv, &p, out),
                    None if v.is_null() => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            if o.len() != t.len() {
                out.push(format!("{path}[] ({} items, {} after)", o.len(), t.len()));
            }
            for (i, (v, tv)) in o.iter().zip(t).enumerate() {
                dropped_fields(v, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

impl Rendered {
    fn deployment(&self) -> &Deployment {
        let [d] = &self.deployments[..] else {
            panic!("{}: expected one Deployment", self.overlay);
        };
        assert_eq!(d.metadata.name.as_deref(), Some(CONTROLLER));
        assert_eq!(d.metadata.namespace.as_deref(), Some(NAMESPACE));
        d
    }

    fn pod(&self) -> &PodSpec {
        let spec = self.deployment().spec.as_ref().expect("spec");
        spec.template.spec.as_ref().expect("pod spec")
    }

    fn container(&self) -> &Container {
        let [c] = &self.pod().containers[..] else {
            panic!("{}: expected one container", self.overlay);
        };
        c
    }

    fn config_map(&self, name: &str) -> &ConfigMap {
        self.config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{}: no ConfigMap {name}", self.overlay))
    }

    /// The controller's ClusterRole's rules.
    fn cluster_rules(&self) -> &[PolicyRule] {
        let cr = self
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(CONTROLLER))
            .unwrap_or_else(|| panic!("{}: no ClusterRole {CONTROLLER}", self.overlay));
        cr.rules.as_deref().unwrap_or_default()
    }

    /// Every other ClusterRole: the plugins' (weft-plugin-NAME), by name.
    fn plugin_roles(&self) -> BTreeMap<String, Vec<PolicyRule>> {
        let roles: BTreeMap<String, Vec<PolicyRule>> = self
            .cluster_roles
            .iter()
            .filter(|r| r.metadata.name.as_deref() != Some(CONTROLLER))
            .map(|r| {
                let name = r.metadata.name.clone().unwrap_or_default();
                assert!(
                    name.starts_with("weft-plugin-"),
                    "{}: ClusterRole {name}",
                    self.overlay
                );
                (name, r.rules.clone().unwrap_or_default())
            })
            .collect();
        // Each bound to its own ServiceAccount in weft-system, and only to it.
        for name in roles.keys() {
            let crb = self
                .cluster_role_bindings
                .iter()
                .find(|b| b.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{}: no binding of {name}", self.overlay));
            assert_eq!(crb.role_ref.name, *name);
            assert!(
                matches!(crb.subjects.as_deref(), Some([s]) if s.kind == "ServiceAccount"
                    && s.name == *name && s.namespace.as_deref() == Some(NAMESPACE)),
                "{}: {:?}",
                self.overlay,
                crb.subjects
            );
        }
        roles
    }

    /// The mount at `path` and its volume.
    fn mount(&self, path: &str) -> &k8s_openapi::api::core::v1::Volume {
        let m = self
            .container()
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("{}: nothing mounted at {path}", self.overlay));
        self.pod()
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == m.name)
            .unwrap_or_else(|| panic!("{}: no volume {}", self.overlay, m.name))
    }

    /// The one webhook configuration of `kind`.
    fn webhook_configuration(&self, kind: &str) -> &Value {
        let found: Vec<&Value> = self
            .webhook_configurations
            .iter()
            .filter(|c| c["kind"] == kind)
            .collect();
        let [c] = found[..] else {
            panic!("{}: expected one {kind}, got {}", self.overlay, found.len());
        };
        c
    }

    /// The admission webhook's Service `weft-webhook` sends 443 (`https`)
    /// to the container port named `webhook` of every controller pod, each
    /// of which declares it as 9443 and serves the webhook there
    /// (`--webhook-port`), with the certificate it manages in the Secret
    /// the Role lets it write, for that Service's name, and its CA written
    /// into the two configurations deploy/ ships.
    fn check_webhook_service(&self) {
        let what = &self.overlay;
        let svc = self
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(WEBHOOK_SERVICE))
            .unwrap_or_else(|| panic!("{what}: no Service {WEBHOOK_SERVICE}"));
        assert_eq!(svc.metadata.namespace.as_deref(), Some(NAMESPACE), "{what}");
        let spec = svc.spec.as_ref().expect("service spec");
        let ports: Vec<(Option<&str>, i32, Option<IntOrString>)> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.as_deref(), p.port, p.target_port.clone()))
            .collect();
        assert_eq!(
            ports,
            [(
                Some("https"),
                443,
                Some(IntOrString::String("webhook".to_string()))
            )],
            "{what}"
        );
        let selector = spec.selector.as_ref().expect("selector");
        assert!(!self.deployments.is_empty(), "{what}");
        for d in &self.deployments {
            let template = &d.spec.as_ref().expect("spec").template;
            let labels = template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
                .expect("pod labels");
            assert!(
                selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
                "{what}: {selector:?} does not select {labels:?}"
            );
            let pod = template.spec.as_ref().expect("pod spec");
            let [c] = &pod.containers[..] else {
                panic!("{what}: expected one container");
            };
            let declared = c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some("webhook"))
                .map(|p| p.container_port);
            assert_eq!(declared, Some(9443), "{what}: container port webhook");
            let args = c.args.as_ref().expect("args");
            let cli = weft::cli::Cli::try_parse_from(
                std::iter::once("weft").chain(args.iter().map(String::as_str)),
            )
            .unwrap_or_else(|e| panic!("{what}: weft rejects {args:?}: {e}"));
            let weft::cli::Command::Controller(a) = cli.command else {
                panic!("{what}: {args:?} is not `weft controller`");
            };
            let w = &a.webhook;
            assert_eq!(
                w.webhook_port.map(i32::from),
                declared,
                "{what}: --webhook-port"
            );
            assert!(
                w.webhook_cert_dir.is_none(),
                "{what}: a managed certificate"
            );
            assert_eq!(w.webhook_cert_secret, WEBHOOK_SECRET, "{what}");
            // The default names: weft-webhook.<POD_NAMESPACE>.svc (and
            // .svc.cluster.local), the Service above.
            assert!(w.webhook_names.is_empty(), "{what}: {:?}", w.webhook_names);
            // Each named with its kind, so only that kind is read.
            assert_eq!(
                w.webhook_configurations,
                [
                    format!("validating/{}", weft::webhook::VALIDATING),
                    format!("mutating/{}", weft::webhook::pod_secrets::CONFIGURATION)
                ],
                "{what}"
            );
        }
    }
}

/// The rules granting `verb` on `group/resource` (any name unless restricted).
fn grants<'a>(
    rules: &'a [PolicyRule],
    group: &str,
    resource: &str,
    verb: &str,
) -> Vec<&'a PolicyRule> {
    rules
        .iter()
        .filter(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
        .collect()
}

/// The grants limited to named objects: (apiGroup, resource, verb, names).
fn named_grants(rules: &[PolicyRule]) -> BTreeSet<(String, String, String, Vec<String>)> {
    let mut out = BTreeSet::new();
    for r in rules {
        let Some(names) = &r.resource_names else {
            continue;
        };
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone(), names.clone()));
                }
            }
        }
    }
    out
}

/// What `weft` registers as its webhook configurations when it is called
/// through the Service weft-webhook in weft-system.
fn registered_webhook_configurations() -> [Value; 2] {
    weft::webhook::configurations(
        |path| serde_json::json!({"service": {"namespace": "weft-system", "name": "weft-webhook", "path": path, "port": 443}}),
    )
}

fn is_controller_account(subjects: &Option<Vec<Subject>>) -> bool {
    matches!(subjects.as_deref(), Some([s]) if s.kind == "ServiceAccount"
        && s.name == CONTROLLER
        && s.namespace.as_deref() == Some(NAMESPACE))
}

#[test]
fn every_overlay_renders_known_kinds_in_weft_system() {
    for (overlay, _) in OVERLAYS {
        let r = render(overlay);
        assert_eq!(r.namespaces.len(), 1, "{overlay}");
        assert_eq!(r.namespaces[0].metadata.name.as_deref(), Some(NAMESPACE));
        let namespaced = r
            .service_accounts
            .iter()
            .map(|o| &o.metadata)
            .chain(r.roles.iter().map(|o| &o.metadata))
            .chain(r.role_bindings.iter().map(|o| &o.metadata))
            .chain(r.deployments.iter().map(|o| &o.metadata))
            .chain(r.services.iter().map(|o| &o.metadata))
            .chain(r.pdbs.iter().map(|o| &o.metadata))
            .chain(r.config_maps.iter().map(|o| &o.metadata));
        for meta in namespaced {
            assert_eq!(
                meta.namespace.as_deref(),
                Some(NAMESPACE),
                "{overlay}: {:?}",
                meta.name
            );
        }
        // The controller's ServiceAccount, and one per plugin (the pod
        // plugin's in the base), which no Pod mounts.
        let names: Vec<&str> = r
            .service_accounts
            .iter()
            .filter_map(|a| a.metadata.name.as_deref())
            .collect();
        assert_eq!(names, [CONTROLLER, "weft-plugin-pod"], "{overlay}");
        assert_eq!(
            r.service_accounts[1].automount_service_account_token,
            Some(false)
        );
        // The CRDs, as kustomize passed them on, are still the ones the types generate.
        assert_eq!(crd_specs(&r.crds), generated_crd_specs(), "{overlay}");
        // The webhook configurations are cluster-scoped.
        assert_eq!(r.webhook_configurations.len(), 2, "{overlay}");
        for c in &r.webhook_configurations {
            assert!(c["metadata"]["namespace"].is_null(), "{overlay}: {c}");
        }
    }
}

#[test]
fn the_controller_is_locked_down_and_probed() {
    for (overlay, replicas) in OVERLAYS {
        let r = render(overlay);
        let d = r.deployment();
        let spec = d.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(*replicas), "{overlay}");
        let pod = r.pod();
        assert_eq!(pod.service_account_name.as_deref(), Some(CONTROLLER));
        let c = r.container();
        assert!(
            c.image
                .as_deref()
                .is_some_and(|i| i.starts_with("ghcr.io/weft-dev/weft:")),
            "{overlay}: {:?}",
            c.image
        );

        // Non-root, read-only, nothing to escalate with.
        let sc = c.security_context.as_ref().expect("securityContext");
        assert_eq!(sc.run_as_non_root, Some(true), "{overlay}");
        assert_eq!(sc.run_as_user, Some(65532), "{overlay}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{overlay}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{overlay}");
        let dropped = sc.capabilities.as_ref().and_then(|c| c.drop.clone());
        assert_eq!(dropped, Some(vec!["ALL".to_string()]), "{overlay}");
        assert!(sc.capabilities.as_ref().unwrap().add.is_none(), "{overlay}");
        let seccomp = sc.seccomp_profile.as_ref().map(|s| s.type_.as_str());
        assert_eq!(seccomp, Some("RuntimeDefault"), "{overlay}");
        assert_ne!(sc.privileged, Some(true), "{overlay}");
        let psc = pod.security_context.as_ref().expect("pod securityContext");
        assert_eq!(psc.run_as_non_root, Some(true), "{overlay}");
        assert_ne!(pod.host_network, Some(true), "{overlay}");

        // Requests and limits for CPU and memory.
        let res = c.resources.as_ref().expect("resources");
        for (which, m) in [("requests", &res.requests), ("limits", &res.limits)] {
            let m = m
                .as_ref()
                .unwrap_or_else(|| panic!("{overlay}: no {which}"));
            assert!(
                m.contains_key("cpu") && m.contains_key("memory"),
                "{overlay}: {which} {m:?}"
            );
        }

        // The arguments parse as `weft controller`'s, and say what the
        // manifests around them assume.
        let args = c.args.as_ref().expect("args");
        let cli = weft::cli::Cli::try_parse_from(
            std::iter::once("weft").chain(args.iter().map(String::as_str)),
        )
        .unwrap_or_else(|e| panic!("{overlay}: weft rejects {args:?}: {e}"));
        let weft::cli::Command::Controller(a) = cli.command else {
            panic!("{overlay}: {args:?} is not `weft controller`");
        };
        check_operating_settings(overlay, &a, pod);
        assert_eq!(a.plugins, std::path::Path::new("/var/lib/weft/plugins"));
        assert_eq!(
            a.cache_dir.as_deref(),
            Some(std::path::Path::new("/var/cache/weft"))
        );
        assert_eq!(
            a.admin.admin_config.as_deref(),
            Some(std::path::Path::new("/etc/weft/admin.yaml"))
        );
        assert_eq!(a.plugin_namespace, vec![NAMESPACE.to_string()], "{overlay}");
        assert!(!a.no_hotload && !a.no_admin, "{overlay}");
        // Only dev installs the CRD (and only dev's RBAC allows it).
        assert_eq!(a.install_crd, *overlay == "dev", "{overlay}");

        // Ports, and probes on the metrics port.
        let port = |name: &str| {
            c.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{overlay}: no port {name}"))
                .container_port
        };
        assert_eq!(port("metrics"), i32::from(a.metrics_addr.port()));
        assert_eq!(port("metrics"), 8080);
        assert_eq!(port("grpc"), 8081);
        for (probe, path) in [
            (&c.liveness_probe, "/healthz"),
            (&c.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .as_ref()
                .and_then(|p| p.http_get.as_ref())
                .unwrap_or_else(|| panic!("{overlay}: no httpGet probe for {path}"));
            assert_eq!(get.path.as_deref(), Some(path), "{overlay}");
            let p = match &get.port {
                IntOrString::Int(p) => *p,
                IntOrString::String(name) => port(name.as_str()),
            };
            assert_eq!(p, 8080, "{overlay}: {path}");
        }

        // The pod's name and namespace from the downward API.
        for (var, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
        ] {
            let e = c
                .env
                .iter()
                .flatten()
                .find(|e| e.name == var)
                .unwrap_or_else(|| panic!("{overlay}: no {var}"));
            let f = e.value_from.as_ref().and_then(|v| v.field_ref.as_ref());
            assert_eq!(f.map(|f| f.field_path.as_str()), Some(field), "{overlay}");
        }

        // The writable cache on an emptyDir; the admin config from its
        // ConfigMap, valid for weft.
        assert!(r.mount("/var/cache/weft").empty_dir.is_some(), "{overlay}");
        let cm = r.mount("/etc/weft/admin.yaml").config_map.as_ref();
        assert_eq!(cm.map(|c| c.name.as_str()), Some("weft-admin"), "{overlay}");
        let text = r
            .config_map("weft-admin")
            .data
            .as_ref()
            .and_then(|d| d.get("admin.yaml"))
            .expect("weft-admin has admin.yaml");
        let admin: weft::admin::AdminConfig = serde_yaml::from_str(text)
            .unwrap_or_else(|e| panic!("{overlay}: weft rejects the admin config: {e}"));
        assert_eq!(admin.listen.to_string(), "0.0.0.0:8081");
        assert_eq!(
            admin.middleware.as_deref(),
            Some(&["request-id", "auth-token", "rate-limit", "audit"].map(String::from)[..])
        );
        assert!(admin.authorization.is_some(), "{overlay}");
        match *overlay {
            "production" => {
                let tls = admin.tls.as_ref().expect("production serves TLS");
                assert!(tls.cert.starts_with("/etc/weft/tls"), "{tls:?}");
                assert!(tls.key.starts_with("/etc/weft/tls"), "{tls:?}");
                let secret = r.mount("/etc/weft/tls").secret.as_ref();
                assert_eq!(
                    secret.and_then(|s| s.secret_name.as_deref()),
                    Some("weft-admin-tls")
                );
                let anti = pod
                    .affinity
                    .as_ref()
                    .and_then(|a| a.pod_anti_affinity.as_ref());
                assert!(anti.is_some(), "production spreads replicas across nodes");
            }
            _ => assert!(admin.tls.is_none(), "{overlay}"),
        }
    }
}

#[test]
fn the_service_and_the_disruption_budget_select_the_controller() {
    for (overlay, _) in OVERLAYS {
        let r = render(overlay);
        let labels = r
            .deployment()
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.clone())
            .expect("pod labels");
        // weft (the admin API and metrics) and weft-webhook.
        let mut names: Vec<&str> = r
            .services
            .iter()
            .filter_map(|s| s.metadata.name.as_deref())
            .collect();
        names.sort();
        assert_eq!(names, ["weft", WEBHOOK_SERVICE], "{overlay}");
        let svc = r
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some("weft"))
            .unwrap();
        let spec = svc.spec.as_ref().expect("service spec");
        let selector = spec.selector.as_ref().expect("selector");
        assert!(
            selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "{overlay}: {selector:?} does not select {labels:?}"
        );
        let mut ports: Vec<(Option<&str>, i32)> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.as_deref(), p.port))
            .collect();
        ports.sort();
        assert_eq!(
            ports,
            [(Some("grpc"), 8081), (Some("metrics"), 8080)],
            "{overlay}"
        );
        // The webhook's: the same pods, its container port.
        r.check_webhook_service();
        let webhook = r
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(WEBHOOK_SERVICE))
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.selector.as_ref());
        assert_eq!(webhook, spec.selector.as_ref(), "{overlay}");

        match *overlay {
            // One replica: a budget of one would block every node drain.
            "dev" => assert!(r.pdbs.is_empty(), "{overlay}"),
            _ => {
                let [pdb] = &r.pdbs[..] else {
                    panic!("{overlay}: expected one PodDisruptionBudget");
                };
                let spec = pdb.spec.as_ref().expect("pdb spec");
                assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
                let m = spec
                    .selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .expect("matchLabels");
                assert!(m.iter().all(|(k, v)| labels.get(k) == Some(v)), "{m:?}");
            }
        }
    }
}

#[test]
fn rbac_is_least_privilege() {
    for (overlay, _) in OVERLAYS {
        let r = render(overlay);
        let rules = r.cluster_rules();
        for rule in rules {
            let wild = |v: &Option<Vec<String>>| v.iter().flatten().any(|x| x == "*");
            assert!(
                !wild(&rule.api_groups)
                    && !wild(&rule.resources)
                    && !rule.verbs.iter().any(|v| v == "*"),
                "{overlay}: wildcard in {rule:?}"
            );
            assert!(rule.non_resource_urls.is_none(), "{overlay}: {rule:?}");
        }
        // What the controller and the admin API do cluster-wide (that it
        // is all they do: tests/operations.rs, from the audit log).
        for verb in ["get", "list", "watch", "create", "patch"] {
            assert!(
                !grants(rules, "weft.dev", "workflows", verb).is_empty(),
                "{overlay}: workflows {verb}"
            );
        }
        assert!(
            !grants(rules, "weft.dev", "workflows/status", "patch").is_empty(),
            "{overlay}: status patch"
        );
        // The pod plugin's Pods: watched by the controller, written only
        // as the plugin (weft-plugin-pod, --impersonate-plugins).
        for verb in ["list", "watch"] {
            assert!(
                !grants(rules, "", "pods", verb).is_empty(),
                "{overlay}: pods {verb}"
            );
        }
        for verb in ["create", "patch", "update", "delete"] {
            assert!(
                grants(rules, "", "pods", verb).is_empty(),
                "{overlay}: pods {verb}"
            );
        }
        let plugins = r.plugin_roles();
        assert_eq!(
            grant_set(&plugins["weft-plugin-pod"]),
            ["create", "patch", "delete"]
                .map(|v| (String::new(), "pods".to_string(), v.to_string()))
                .into(),
            "{overlay}"
        );
        assert!(
            !grants(rules, "", "events", "create").is_empty(),
            "{overlay}"
        );
        // Nothing it does not need, cluster-wide: no Secrets, no plugin
        // ConfigMaps outside weft-system, no leases. The one exception is
        // by name: each namespace's own artifact repository ConfigMap.
        for (group, resource) in [
            ("", "secrets"),
            ("", "configmaps"),
            ("coordination.k8s.io", "leases"),
        ] {
            for verb in [
                "get", "list", "watch", "create", "patch", "update", "delete",
            ] {
                let unnamed: Vec<_> = grants(rules, group, resource, verb)
                    .into_iter()
                    .filter(|r| r.resource_names.as_ref().is_none_or(|n| n.is_empty()))
                    .collect();
                assert!(
                    unnamed.is_empty(),
                    "{overlay}: cluster-wide {verb} on {resource}"
                );
            }
        }
        let repository = named_grants(rules)
            .into_iter()
            .filter(|(_, resource, _, _)| resource == "configmaps")
            .collect::<Vec<_>>();
        assert_eq!(
            repository,
            [(
                String::new(),
                "configmaps".to_string(),
                "get".to_string(),
                vec!["weft-artifact-repository".to_string()]
            )],
            "{overlay}: only get on the artifact repository ConfigMap, by name"
        );
        // CRDs: only dev (--install-crd), and only the Workflow CRD.
        let crd = grants(
            rules,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "patch",
        );
        match *overlay {
            "dev" => {
                assert_eq!(crd.len(), 1, "{overlay}");
                // --install-crd applies all four of Weft's CRDs.
                let names: Vec<String> = weft::api::crds()
                    .into_iter()
                    .map(|(_, c)| c.metadata.name.unwrap_or_default())
                    .collect();
                assert_eq!(crd[0].resource_names.as_deref(), Some(&names[..]));
            }
            _ => assert!(
                rules.iter().all(|r| !r
                    .api_groups
                    .iter()
                    .flatten()
                    .any(|g| g == "apiextensions.k8s.io")),
                "{overlay}: production must not touch CRDs"
            ),
        }
        // The admission webhook's two configurations: get and update (their
        // caBundle), each by its name only; nothing else on
        // admissionregistration.k8s.io (no create, list, watch, patch or
        // delete, no other configuration).
        let mut webhook_rules: Vec<(&str, &str)> = Vec::new();
        for rule in rules.iter().filter(|r| {
            r.api_groups
                .iter()
                .flatten()
                .any(|g| g == "admissionregistration.k8s.io")
        }) {
            assert_eq!(
                rule.api_groups.as_deref(),
                Some(&["admissionregistration.k8s.io".to_string()][..]),
                "{overlay}: {rule:?}"
            );
            let [resource] = rule.resources.as_deref().unwrap_or_default() else {
                panic!("{overlay}: one resource per rule, by name: {rule:?}");
            };
            let name = match resource.as_str() {
                "validatingwebhookconfigurations" => weft::webhook::VALIDATING,
                "mutatingwebhookconfigurations" => weft::webhook::pod_secrets::CONFIGURATION,
                other => panic!("{overlay}: admissionregistration.k8s.io/{other}"),
            };
            assert_eq!(
                rule.resource_names.as_deref(),
                Some(&[name.to_string()][..]),
                "{overlay}: {rule:?}"
            );
            assert_eq!(rule.verbs, ["get", "update"], "{overlay}: {rule:?}");
            webhook_rules.push((resource.as_str(), name));
        }
        webhook_rules.sort();
        assert_eq!(
            webhook_rules,
            [
                ("mutatingwebhookconfigurations", "weft-pod-secrets"),
                ("validatingwebhookconfigurations", "weft-validating"),
            ],
            "{overlay}"
        );

        // weft-system only: plugin ConfigMaps (and their status annotations), leases.
        let [role] = &r.roles[..] else {
            panic!("{overlay}: expected one Role");
        };
        let role_rules = role.rules.as_deref().unwrap_or_default();
        for verb in ["get", "list", "watch", "patch"] {
            assert!(
                !grants(role_rules, "", "configmaps", verb).is_empty(),
                "{overlay}: configmaps {verb}"
            );
        }
        assert!(!grants(role_rules, "coordination.k8s.io", "leases", "update").is_empty());
        // It may act as the plugins' ServiceAccounts, which live here.
        assert!(!grants(role_rules, "", "serviceaccounts", "impersonate").is_empty());
        assert!(
            grants(rules, "", "serviceaccounts", "impersonate").is_empty(),
            "{overlay}: cluster-wide impersonation"
        );
        let args = r.container().args.clone().unwrap_or_default();
        assert!(
            args.iter().any(|a| a == "--impersonate-plugins"),
            "{overlay}: {args:?}"
        );
        // Secrets plugins' configuration names: read and followed. The only
        // writes are the webhook's certificate: create (which no name can
        // limit, so it is a rule of its own) and update of
        // weft-webhook-certs alone; no patch or delete, no update of any
        // other Secret.
        for verb in ["get", "list", "watch", "create", "update"] {
            assert!(
                !grants(role_rules, "", "secrets", verb).is_empty(),
                "{overlay}: secrets {verb}"
            );
        }
        for verb in ["patch", "delete", "deletecollection"] {
            assert!(
                grants(role_rules, "", "secrets", verb).is_empty(),
                "{overlay}: secrets {verb}"
            );
        }
        for rule in grants(role_rules, "", "secrets", "update") {
            assert_eq!(
                rule.resource_names.as_deref(),
                Some(&[WEBHOOK_SECRET.to_string()][..]),
                "{overlay}: update on Secrets other than the webhook's: {rule:?}"
            );
        }
        for rule in grants(role_rules, "", "secrets", "create") {
            assert_eq!(rule.verbs, ["create"], "{overlay}: {rule:?}");
            assert_eq!(
                rule.resources.as_deref(),
                Some(&["secrets".to_string()][..]),
                "{overlay}: {rule:?}"
            );
        }
        // Reads are the plugins' (every Secret here); everything else here
        // that is limited to names is the webhook's Secret.
        assert_eq!(
            named_grants(role_rules),
            [(
                String::new(),
                "secrets".to_string(),
                "update".to_string(),
                vec![WEBHOOK_SECRET.to_string()]
            )]
            .into(),
            "{overlay}"
        );

        // Bound to the controller's account, and only to it.
        let crb = r
            .cluster_role_bindings
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(CONTROLLER))
            .expect("the controller's ClusterRoleBinding");
        assert_eq!(
            (crb.role_ref.kind.as_str(), crb.role_ref.name.as_str()),
            ("ClusterRole", CONTROLLER)
        );
        assert!(
            is_controller_account(&crb.subjects),
            "{overlay}: {:?}",
            crb.subjects
        );
        let [rb] = &r.role_bindings[..] else {
            panic!("{overlay}: expected one RoleBinding");
        };
        assert_eq!(
            (rb.role_ref.kind.as_str(), rb.role_ref.name.as_str()),
            ("Role", CONTROLLER)
        );
        assert!(
            is_controller_account(&rb.subjects),
            "{overlay}: {:?}",
            rb.subjects
        );
    }
}

/// The webhook configurations deploy/ ships are exactly the ones `weft`
/// registers (`weft::webhook::configurations`), called through the Service
/// weft-webhook in weft-system, and carry no caBundle: the controller
/// writes it from the CA it manages.
#[test]
fn the_webhook_configurations_are_the_ones_weft_registers() {
    let want = registered_webhook_configurations();
    for (overlay, _) in OVERLAYS {
        let r = render(overlay);
        assert_eq!(r.webhook_configurations.len(), want.len(), "{overlay}");
        for want in &want {
            let kind = want["kind"].as_str().unwrap();
            let got = r.webhook_configuration(kind);
            assert_eq!(got, want, "{overlay}: {kind}");
            for hook in got["webhooks"].as_array().unwrap() {
                assert!(
                    hook["clientConfig"].get("caBundle").is_none(),
                    "{overlay}: {kind}: the controller writes the caBundle"
                );
            }
        }
    }
}

/// The optional Components add rules for the kinds the spark and
/// k8s-resource plugins declare, and nothing else.
#[test]
fn components_grant_the_plugin_kinds() {
    let target = root().join("target");
    std::fs::create_dir_all(&target).unwrap();
    // kustomize takes only relative paths; a directory two levels under the
    // repository root reaches deploy/ as ../../deploy.
    let dir = tempfile::tempdir_in(&target).unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources: [../../deploy/overlays/production]\n\
         components: [../../deploy/components/spark, ../../deploy/components/k8s-resource]\n",
    )
    .unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let with = parse(
        "production+components",
        &String::from_utf8(out.stdout).unwrap(),
    );
    let without = render("production");
    let (base, added) = with.cluster_rules().split_at(without.cluster_rules().len());
    assert_eq!(
        base,
        without.cluster_rules(),
        "the components only add rules"
    );
    let plugins = with.plugin_roles();
    for (plugin, group, resource) in [
        ("spark", "sparkoperator.k8s.io", "sparkapplications"),
        ("k8s-resource", "batch", "jobs"),
        ("k8s-resource", "kubeflow.org", "pytorchjobs"),
        ("k8s-resource", "kubeflow.org", "tfjobs"),
        ("k8s-resource", "ray.io", "rayjobs"),
        ("k8s-resource", "ray.io", "rayclusters"),
        ("k8s-resource", "tekton.dev", "pipelineruns"),
        ("k8s-resource", "tekton.dev", "taskruns"),
    ] {
        // Children are watched by the controller in every namespace...
        for verb in ["list", "watch"] {
            assert!(
                !grants(added, group, resource, verb).is_empty(),
                "{group}/{resource} {verb}"
            );
        }
        // ...and written (server-side apply) and deleted (aborts) as the
        // plugin that declares them, only.
        let own = &plugins[&format!("weft-plugin-{plugin}")];
        for verb in ["create", "patch", "delete"] {
            assert!(
                grants(added, group, resource, verb).is_empty(),
                "controller {group}/{resource} {verb}"
            );
            assert!(
                !grants(own, group, resource, verb).is_empty(),
                "{plugin} {group}/{resource} {verb}"
            );
        }
    }
    assert_eq!(
        added
            .iter()
            .map(|r| r.resources.iter().flatten().count())
            .sum::<usize>(),
        8,
        "{added:?}"
    );
}

/// deploy/'s plugin ServiceAccounts and ClusterRoles are what `weft plugin
/// rbac` renders from the manifests today (deploy/plugins/render-rbac.sh).
#[test]
fn plugin_roles_are_rendered_from_their_manifests() {
    for (plugin, file) in [
        ("pod", "deploy/base/plugin-pod-rbac.yaml"),
        ("spark", "deploy/components/spark/plugin-rbac.yaml"),
        (
            "k8s-resource",
            "deploy/components/k8s-resource/plugin-rbac.yaml",
        ),
    ] {
        let manifest = root().join(format!("plugins/{plugin}/weft-plugin.yaml"));
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "plugin",
                "rbac",
                manifest.to_str().unwrap(),
                "-n",
                NAMESPACE,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let committed = std::fs::read_to_string(root().join(file)).unwrap();
        assert_eq!(
            committed,
            String::from_utf8(out.stdout).unwrap(),
            "{file} is stale: run deploy/plugins/render-rbac.sh"
        );
    }
}

/// deploy/'s rendered plugin RBAC files, as one YAML stream.
fn committed_plugin_rbac() -> String {
    [
        "deploy/base/plugin-pod-rbac.yaml",
        "deploy/components/spark/plugin-rbac.yaml",
        "deploy/components/k8s-resource/plugin-rbac.yaml",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
    .collect::<Vec<_>>()
    .join("---\n")
}

/// `kubectl apply --server-side` of a rendered install; it must succeed.
async fn apply_server_side(kubeconfig: &std::path::Path, yaml: &str, what: &str) {
    let out = kubectl(
        kubeconfig,
        &["apply", "--server-side", "-f", "-"],
        Some(yaml),
    )
    .await;
    assert!(
        out.status.success(),
        "{what}: kubectl apply --server-side: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_cluster_accepts_every_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = weft::dev::start(dir.path()).await.expect("dev cluster");
    let kubeconfig = dir.path().join("kubeconfig");
    let rendered: Vec<String> = OVERLAYS
        .iter()
        .map(|(o, _)| kustomize(&format!("deploy/overlays/{o}")))
        .collect();
    for ((overlay, replicas), yaml) in OVERLAYS.iter().zip(&rendered) {
        apply_server_side(&kubeconfig, yaml, overlay).await;
        let out = kubectl(
            &kubeconfig,
            &[
                "get",
                "deployment",
                CONTROLLER,
                "-n",
                NAMESPACE,
                "-o",
                "json",
            ],
            None,
        )
        .await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stored: Deployment = serde_json::from_slice(&out.stdout).unwrap();
        let spec = stored.spec.expect("spec");
        assert_eq!(spec.replicas, Some(*replicas), "{overlay}");
        let pod = spec.template.spec.expect("pod spec");
        let c = &pod.containers[0];
        assert_eq!(
            c.args
                .as_ref()
                .unwrap()
                .iter()
                .any(|a| a == "--install-crd"),
            *overlay == "dev",
            "{overlay}: {:?}",
            c.args
        );
    }
    cluster.shutdown().await;
}

/// The Helm chart's examples (deploy/helm/examples) and the replicas per
/// Deployment each asks for.
const HELM_EXAMPLES: &[(&str, i32)] = &[("dev", 1), ("production", 2), ("sharded", 2)];

fn helm(example: &str) -> String {
    common::helm_template(example)
}

#[test]
fn the_helm_chart_installs_what_the_overlays_install() {
    let kustomized = render("production");
    let overlay_cluster: Vec<PolicyRule> = kustomized.cluster_rules().to_vec();
    let overlay_role: Vec<PolicyRule> = kustomized
        .roles
        .iter()
        .flat_map(|r| r.rules.clone().unwrap_or_default())
        .collect();
    let webhooks = registered_webhook_configurations();
    for (example, replicas) in HELM_EXAMPLES {
        let r = parse(&format!("helm {example}"), &helm(example));
        // The CRDs the chart ships are the ones the types generate.
        assert_eq!(crd_specs(&r.crds), generated_crd_specs(), "{example}");
        // The same least-privilege RBAC as the kustomize base.
        assert_eq!(
            grant_set(r.cluster_rules()),
            grant_set(&overlay_cluster),
            "{example}: ClusterRole"
        );
        let role: Vec<PolicyRule> = r
            .roles
            .iter()
            .flat_map(|x| x.rules.clone().unwrap_or_default())
            .collect();
        let mut want = grant_set(&overlay_role);
        if *example == "dev" {
            // No leader election with one replica: no Lease rule.
            want.retain(|(_, res, _)| res != "leases");
        }
        assert_eq!(grant_set(&role), want, "{example}: Role");
        // ...limited to the same names where a rule is (the webhook's
        // Secret and configurations).
        assert_eq!(
            named_grants(r.cluster_rules()),
            named_grants(&overlay_cluster),
            "{example}: ClusterRole resourceNames"
        );
        assert_eq!(
            named_grants(&role),
            named_grants(&overlay_role),
            "{example}: Role resourceNames"
        );
        // The plugins' ClusterRoles grant what `weft plugin rbac` renders
        // from their manifests (as deploy/base and the Components do).
        let plugins = r.plugin_roles();
        assert!(plugins.contains_key("weft-plugin-pod"), "{example}");
        let committed = parse("committed plugin RBAC", &committed_plugin_rbac()).plugin_roles();
        for (name, rules) in &plugins {
            assert_eq!(
                grant_set(rules),
                grant_set(&committed[name]),
                "{example}: {name}"
            );
        }
        let shards = if *example == "sharded" { 2 } else { 1 };
        assert_eq!(r.deployments.len(), shards, "{example}");
        let mut seen_shards = Vec::new();
        for d in &r.deployments {
            let spec = d.spec.as_ref().unwrap();
            assert_eq!(spec.replicas, Some(*replicas), "{example}");
            let pod = spec.template.spec.as_ref().unwrap();
            assert_eq!(pod.service_account_name.as_deref(), Some(CONTROLLER));
            let c = &pod.containers[0];
            let sc = c.security_context.as_ref().expect("securityContext");
            assert_eq!(sc.run_as_user, Some(65532), "{example}");
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{example}");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{example}");
            let res = c.resources.as_ref().expect("resources");
            assert!(res.requests.is_some() && res.limits.is_some(), "{example}");
            let args = c.args.as_ref().expect("args");
            let cli = weft::cli::Cli::try_parse_from(
                std::iter::once("weft").chain(args.iter().map(String::as_str)),
            )
            .unwrap_or_else(|e| panic!("{example}: weft rejects {args:?}: {e}"));
            let weft::cli::Command::Controller(a) = cli.command else {
                panic!("{example}: {args:?} is not `weft controller`");
            };
            assert_eq!(a.plugin_namespace, vec![NAMESPACE.to_string()]);
            check_operating_settings(example, &a, pod);
            // Several replicas elect a leader; one needs no lease.
            assert_eq!(a.election.leader_elect, *replicas > 1, "{example}");
            a.leader().unwrap_or_else(|e| panic!("{example}: {e}"));
            if let Some(s) = a.shard().unwrap() {
                assert_eq!(s.count, 2, "{example}");
                seen_shards.push(s.index);
            }
        }
        seen_shards.sort();
        let want: Vec<u32> = if shards > 1 { vec![0, 1] } else { vec![] };
        assert_eq!(seen_shards, want, "{example}: one Deployment per shard");
        // A disruption budget per Deployment that has replicas to spare.
        let budgets = if *replicas > 1 { shards } else { 0 };
        assert_eq!(r.pdbs.len(), budgets, "{example}");
        // The admission webhook: its Service reaches every shard's pods on
        // their webhook port, and the configurations are the overlay's
        // (and weft's) webhooks under the same names; the chart adds its
        // own labels.
        r.check_webhook_service();
        for want in &webhooks {
            let kind = want["kind"].as_str().unwrap();
            let got = r.webhook_configuration(kind);
            assert_eq!(got["apiVersion"], want["apiVersion"], "{example}: {kind}");
            assert_eq!(
                got["metadata"]["name"], want["metadata"]["name"],
                "{example}: {kind}"
            );
            assert_eq!(got["webhooks"], want["webhooks"], "{example}: {kind}");
            for (k, v) in want["metadata"]["labels"].as_object().unwrap() {
                assert_eq!(
                    &got["metadata"]["labels"][k], v,
                    "{example}: {kind}: label {k}"
                );
            }
        }
    }
}

/// The operating knobs deploy/ sets: client-go's rate limit, and a pod
/// grace period above the controller's own, so that a SIGTERM's drain
/// (running reconciles, the Lease's release) ends before the SIGKILL.
fn check_operating_settings(what: &str, a: &weft::cli::controller::ControllerArgs, pod: &PodSpec) {
    assert_eq!(a.kube_api_qps, 100.0, "{what}");
    assert_eq!(a.kube_api_burst, 200, "{what}");
    assert_eq!(
        a.sync_period,
        std::time::Duration::from_secs(36_000),
        "{what}"
    );
    let grace = pod
        .termination_grace_period_seconds
        .unwrap_or_else(|| panic!("{what}: no terminationGracePeriodSeconds"));
    assert!(
        u64::try_from(grace).unwrap() >= a.graceful_shutdown_timeout.as_secs() + 10,
        "{what}: terminationGracePeriodSeconds {grace} vs --graceful-shutdown-timeout {:?}",
        a.graceful_shutdown_timeout
    );
}

#[test]
fn the_helm_chart_refuses_bad_values_by_name() {
    let out = Command::new("python3")
        .arg(root().join("deploy/helm/template.py"))
        .arg(root().join("deploy/helm/weft"))
        .args(["--set", "replicas=-1"])
        .output()
        .expect("python3");
    assert!(!out.status.success(), "replicas=-1 was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replicas"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_cluster_accepts_the_helm_chart() {
    for (example, _) in HELM_EXAMPLES {
        let dir = tempfile::tempdir().unwrap();
        let cluster = weft::dev::start(dir.path()).await.expect("dev cluster");
        let kubeconfig = dir.path().join("kubeconfig");
        apply_server_side(&kubeconfig, &helm(example), example).await;
        let out = kubectl(
            &kubeconfig,
            &["get", "deployments", "-n", NAMESPACE, "-o", "name"],
            None,
        )
        .await;
        let names = String::from_utf8_lossy(&out.stdout).to_string();
        let want = if *example == "sharded" { 2 } else { 1 };
        assert_eq!(names.lines().count(), want, "{example}: {names}");
        cluster.shutdown().await;
    }
}

type CrdSpec = k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;

/// CRD specs by name.
fn crd_specs(crds: &[CustomResourceDefinition]) -> BTreeMap<String, CrdSpec> {
    crds.iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c.spec.clone()))
        .collect()
}

/// Weft's CRDs as the Rust types generate them, by name.
fn generated_crd_specs() -> BTreeMap<String, CrdSpec> {
    let crds: Vec<_> = weft::api::crds().into_iter().map(|(_, c)| c).collect();
    crd_specs(&crds)
}
