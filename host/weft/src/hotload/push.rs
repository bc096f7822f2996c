//! `weft plugin push`: a plugin written as ConfigMaps (parts first, then
//! the head that names them) with server-side apply.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;
use weft_plugin::{Manifest, Pinning};

use super::package::{self};

/// The field manager of `weft plugin push`.
pub const PUSH_MANAGER: &str = "weft-plugin-push";

/// Creates or updates the ConfigMap(s) of a plugin (server-side apply):
/// the parts first, then the head, so a head never references a missing
/// part; then the parts are made owned by the head (deleting it deletes
/// them) and parts of earlier pushes are deleted. What `weft plugin push` does.
pub async fn push(
    client: &Client,
    namespace: &str,
    name: &str,
    component: &[u8],
    manifest: &str,
    pinning: Pinning,
) -> anyhow::Result<package::Packed> {
    push_with(client, namespace, name, component, manifest, pinning, None).await
}

/// [`push`] as a shadow or canary of the serving version (`rollout`), or
/// plainly (`None`: it serves once loaded, promoting any candidate).
pub async fn push_with(
    client: &Client,
    namespace: &str,
    name: &str,
    component: &[u8],
    manifest: &str,
    pinning: Pinning,
    rollout: Option<weft_plugin::rollout::RolloutMode>,
) -> anyhow::Result<package::Packed> {
    use anyhow::Context as _;
    let parsed = Manifest::parse(manifest, "--manifest")?;
    let mut packed = package::pack(name, &parsed.name, component, manifest, pinning);
    if let Some(mode) = rollout {
        packed
            .head
            .data
            .get_or_insert_default()
            .extend(package::HeadRollout::data(mode));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let apply = PatchParams::apply(PUSH_MANAGER).force();
    for part in &packed.parts {
        let part_name = part.name_any();
        api.patch(&part_name, &apply, &Patch::Apply(part))
            .await
            .with_context(|| format!("writing configmap {namespace}/{part_name}"))?;
    }
    let head = api
        .patch(name, &apply, &Patch::Apply(&packed.head))
        .await
        .with_context(|| format!("writing configmap {namespace}/{name}"))?;
    let owner = package::owned_by(&head);
    let current: BTreeSet<String> = packed.parts.iter().map(|p| p.name_any()).collect();
    for part in api
        .list(&ListParams::default().labels(&format!("{}={name}", package::LABEL_PART)))
        .await?
    {
        let part_name = part.name_any();
        if current.contains(&part_name) {
            let patch = json!({"metadata": {"ownerReferences": [owner]}});
            api.patch(&part_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("owning configmap {namespace}/{part_name}"))?;
        } else {
            let _ = api.delete(&part_name, &Default::default()).await;
        }
    }
    Ok(packed)
}
