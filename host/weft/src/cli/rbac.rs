//! `weft plugin rbac`: the ServiceAccount, ClusterRole and binding that a
//! plugin's resources are written with under `weft controller
//! --impersonate-plugins`, rendered from its manifest: exactly the kinds it
//! declares, with the verbs the controller uses on children (create and
//! patch for server-side apply, delete for aborts and retries). deploy/
//! renders the first-party plugins' with it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject},
};
use kube::api::{ApiResource, GroupVersionKind, ObjectMeta};
use weft_plugin::Manifest;

use crate::controller::impersonation::service_account;

/// Verbs a plugin's ServiceAccount needs on each kind it declares.
pub const VERBS: [&str; 3] = ["create", "patch", "delete"];

/// Arguments of `weft plugin rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The plugin's manifest (weft-plugin.yaml).
    pub manifest: PathBuf,
    /// The namespace of its ServiceAccount (the controller's
    /// --plugin-service-account-namespace).
    #[arg(short, long, default_value = "weft-system")]
    pub namespace: String,
}

/// Run `weft plugin rbac`.
pub fn rbac(args: RbacArgs) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::from_path(&args.manifest)?;
    super::out(&render(&manifest, &args.namespace)?)?;
    Ok(ExitCode::SUCCESS)
}

/// The YAML documents for `manifest`'s plugin (none for a plugin that
/// declares no kinds, e.g. a middleware).
pub fn render(manifest: &Manifest, namespace: &str) -> anyhow::Result<String> {
    if manifest.resources.is_empty() {
        return Ok(format!(
            "# plugin {}: declares no kinds, needs no ServiceAccount\n",
            manifest.name
        ));
    }
    let name = service_account(&manifest.name);
    let labels = BTreeMap::from([("weft.dev/plugin".to_string(), manifest.name.clone())]);
    let meta = |ns: Option<&str>| ObjectMeta {
        name: Some(name.clone()),
        namespace: ns.map(str::to_string),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let sa = ServiceAccount {
        metadata: meta(Some(namespace)),
        automount_service_account_token: Some(false),
        ..Default::default()
    };
    let role = ClusterRole {
        metadata: meta(None),
        rules: Some(rules(manifest)),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: meta(None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.clone(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    let docs = [
        yaml("ServiceAccount", "v1", &sa)?,
        yaml("ClusterRole", "rbac.authorization.k8s.io/v1", &role)?,
        yaml(
            "ClusterRoleBinding",
            "rbac.authorization.k8s.io/v1",
            &binding,
        )?,
    ];
    Ok(format!(
        "# Plugin {}: `weft plugin rbac` renders this from its manifest's resources.\n# weft controller --impersonate-plugins writes its resources as this ServiceAccount.\n{}",
        manifest.name,
        docs.join("---\n")
    ))
}

/// One rule per API group: the plural of every declared kind of it.
fn rules(manifest: &Manifest) -> Vec<PolicyRule> {
    let mut by_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &manifest.resources {
        let (group, version) = match r.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", r.api_version.as_str()),
        };
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &r.kind));
        let plurals = by_group.entry(group.to_string()).or_default();
        if !plurals.contains(&ar.plural) {
            plurals.push(ar.plural);
        }
    }
    by_group
        .into_iter()
        .map(|(group, resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
            verbs: VERBS.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        })
        .collect()
}

fn yaml<T: serde::Serialize>(kind: &str, api_version: &str, obj: &T) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(obj)?;
    v["apiVersion"] = api_version.into();
    v["kind"] = kind.into();
    // apiVersion and kind first, as kubectl prints them.
    let mut out = serde_json::Map::new();
    out.insert("apiVersion".into(), v["apiVersion"].take());
    out.insert("kind".into(), v["kind"].take());
    for (k, val) in v.as_object_mut().into_iter().flatten() {
        if !val.is_null() {
            out.insert(k.clone(), val.take());
        }
    }
    Ok(serde_yaml::to_string(&out)?)
}
