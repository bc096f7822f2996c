//! A namespace's own artifact repository (Argo's per-namespace
//! `artifact-repositories` ConfigMap): the ConfigMap
//! `weft-artifact-repository`, labelled `weft.dev/artifact-repository:
//! "true"`, holds under `repository` the same YAML as
//! `--artifact-repository`; its S3 Secrets are read in that namespace.
//!
//! The namespace consents as it does for web-API task secrets: it grants
//! the controller `get` on that ConfigMap and those Secrets (a Role and a
//! RoleBinding of its own). Without the ConfigMap, or without the grant,
//! the controller's repository is used. A ConfigMap that is there but
//! wrong fails the tasks that need it, naming it and the problem.
//!
//! Each namespace's answer is kept [`TTL`]: a changed ConfigMap applies
//! to attempts started after that, and a reconcile costs no API call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use crate::pod_io::PodIo;
use crate::store::{ArtifactRepository, Store};

/// The ConfigMap's name.
pub const CONFIGMAP: &str = "weft-artifact-repository";
/// The label that marks it as meant for Weft.
pub const LABEL: &str = "weft.dev/artifact-repository";
/// Its data key.
pub const KEY: &str = "repository";
/// How long a namespace's answer is kept.
pub const TTL: Duration = Duration::from_secs(30);

/// The data plane a namespace's workflows use, or why it cannot be had.
pub type Found = Result<Option<Arc<PodIo>>, String>;

/// The controller's repository and the namespaces' own.
pub struct Repositories {
    client: Client,
    cached: Mutex<HashMap<String, (Instant, Found)>>,
}

impl Repositories {
    /// Repositories read through `client`.
    pub fn new(client: Client) -> Repositories {
        Repositories {
            client,
            cached: Mutex::new(HashMap::new()),
        }
    }

    /// The data plane of `namespace`: its ConfigMap's repository (with
    /// `default`'s settings: binary, image, limits), else `default`.
    pub async fn for_namespace(&self, namespace: &str, default: Option<Arc<PodIo>>) -> Found {
        let Some(default) = default else {
            return Ok(None);
        };
        if let Some((at, found)) = self.lock().get(namespace)
            && at.elapsed() < TTL
        {
            return found.clone();
        }
        let found = self.read(namespace, &default).await;
        let found = found.map(|own| Some(own.unwrap_or(default)));
        self.lock()
            .insert(namespace.to_string(), (Instant::now(), found.clone()));
        found
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Found)>> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The namespace's own repository; none without the ConfigMap, the
    /// label or the grant to read it.
    async fn read(&self, ns: &str, default: &PodIo) -> Result<Option<Arc<PodIo>>, String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let cm = match api.get_opt(CONFIGMAP).await {
            Ok(Some(cm)) => cm,
            Ok(None) => return Ok(None),
            Err(kube::Error::Api(e)) if e.code == 403 => return Ok(None),
            Err(e) => return Err(format!("ConfigMap {ns}/{CONFIGMAP}: {e}")),
        };
        let labelled = cm.metadata.labels.as_ref().and_then(|l| l.get(LABEL));
        if labelled.map(String::as_str) != Some("true") {
            return Ok(None);
        }
        let what = format!("ConfigMap {ns}/{CONFIGMAP}");
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(KEY))
            .ok_or_else(|| format!("artifact repository {what}: no key {KEY:?}"))?;
        let repo = ArtifactRepository::parse(&what, text).map_err(|e| e.to_string())?;
        let named = repo
            .s3
            .as_ref()
            .is_some_and(|s| s.access_key_secret.is_some());
        if !named {
            // Never the controller's own credentials (its environment's)
            // for a bucket a namespace chose.
            return Err(format!(
                "artifact repository {what}: a namespace's repository is S3 with accessKeySecret and secretKeySecret in its namespace"
            ));
        }
        let creds = crate::store::credentials(&self.client, ns, &repo)
            .await
            .map_err(|e| e.to_string())?;
        let store = Store::open(&repo, creds.as_ref()).map_err(|e| e.to_string())?;
        Ok(Some(Arc::new(default.with_store(store))))
    }
}
