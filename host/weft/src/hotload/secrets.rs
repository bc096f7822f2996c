//! Plugin configuration from Secrets (see [`crate::secrets`]): resolved
//! when a version loads, and again when a Secret it names changes. A
//! plugin whose required Secret is missing is rejected like any bad
//! version and loaded once the Secret appears; a serving plugin whose
//! Secret changes is re-published with the new values (same digest, so
//! pins are unaffected). Events and logs name Secrets, never values.

use std::collections::BTreeMap;

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, ResourceExt, runtime::watcher};
use weft_plugin::Plugin;

use super::{HotLoader, Rejection};
use crate::secrets::{self, SecretError};

/// The resourceVersion of each Secret a version was configured from
/// (None: it was missing).
pub(super) type SecretVersions = BTreeMap<String, Option<String>>;

impl HotLoader {
    /// The namespace whose Secrets plugins from the plugin directory read:
    /// the first plugin namespace (`default` when the loader watches all).
    pub(super) fn home_namespace(&self) -> String {
        self.config
            .namespaces
            .first()
            .cloned()
            .unwrap_or_else(|| "default".to_string())
    }

    /// `plugin` with its manifest config's Secret references resolved from
    /// `namespace`; also which Secret versions it read.
    pub(super) async fn configure(
        &self,
        plugin: &Plugin,
        namespace: &str,
    ) -> Result<(Plugin, SecretVersions), SecretError> {
        let config = &plugin.manifest().config;
        if secrets::refs(config)?.is_empty() {
            return Ok((plugin.clone(), SecretVersions::new()));
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let (fetched, versions) = secrets::fetch(&api, namespace, config).await?;
        let resolved = secrets::resolve(config, namespace, &fetched)?;
        Ok((plugin.with_config(resolved), versions))
    }

    /// Plugins from the plugin directory that name Secrets: configured once
    /// at start, like hot-loaded ones (their Secrets are followed too).
    pub(super) async fn configure_dir_plugins(&self) {
        let ns = self.home_namespace();
        let sourced: Vec<String> = self
            .sources()
            .values()
            .filter_map(|s| s.plugin.clone())
            .collect();
        let snap = self.registry.snapshot();
        for (name, plugin) in snap.plugins() {
            if sourced.contains(name) || secrets::secret_names(&plugin.manifest().config).is_empty()
            {
                continue;
            }
            match self.configure(plugin, &ns).await {
                Ok((p, versions)) => {
                    self.registry.publish(p);
                    self.dir_secrets().insert(name.clone(), versions);
                    tracing::info!(plugin = %name, namespace = %ns, "plugin configured from Secrets");
                }
                Err(e) => {
                    // It keeps its unresolved config: calls that need the
                    // values fail in the plugin, and the Secret's arrival
                    // configures it.
                    self.dir_secrets()
                        .insert(name.clone(), SecretVersions::new());
                    tracing::warn!(plugin = %name, "plugin configuration: {e}");
                }
            }
        }
    }

    fn dir_secrets(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SecretVersions>> {
        self.dir_secrets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows Secrets in the plugin namespaces (only names and
    /// resourceVersions are kept).
    pub(super) fn watch_secrets(
        &self,
    ) -> BoxStream<'static, Result<watcher::Event<Secret>, watcher::Error>> {
        use kube::runtime::WatchStreamExt as _;
        let cfg = watcher::Config::default();
        if self.config.namespaces.is_empty() {
            watcher::watcher(Api::<Secret>::all(self.client.clone()), cfg)
                .default_backoff()
                .boxed()
        } else {
            futures::stream::select_all(self.config.namespaces.iter().map(|ns| {
                watcher::watcher(
                    Api::<Secret>::namespaced(self.client.clone(), ns),
                    cfg.clone(),
                )
                .default_backoff()
                .boxed()
            }))
            .boxed()
        }
    }

    /// One Secret event: plugins configured from another version of it are
    /// configured again (rejected ones are loaded again).
    pub(super) async fn secret_event(&self, ev: Result<watcher::Event<Secret>, watcher::Error>) {
        let (secret, gone) = match ev {
            Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => (s, false),
            Ok(watcher::Event::Delete(s)) => (s, true),
            Ok(_) => return,
            Err(e) => {
                tracing::warn!("Secret watch: {e}");
                return;
            }
        };
        let ns = secret.namespace().unwrap_or_default();
        let name = secret.name_any();
        let now = (!gone).then(|| secret.resource_version()).flatten();
        let stale = |v: &SecretVersions| v.get(&name).is_some_and(|seen| *seen != now);
        let keys: Vec<_> = self
            .sources()
            .iter()
            .filter(|(k, s)| k.0 == ns && stale(&s.secrets))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.secret_changed(&key, &name).await;
        }
        if ns == self.home_namespace() {
            let dir: Vec<String> = self
                .dir_secrets()
                .iter()
                .filter(|(_, v)| stale(v) || v.is_empty())
                .map(|(p, _)| p.clone())
                .collect();
            for plugin in dir {
                self.reconfigure_dir_plugin(&plugin, &ns).await;
            }
        }
    }

    /// A Secret that `key`'s plugin names changed.
    async fn secret_changed(&self, key: &(String, String), secret: &str) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.0);
        let Ok(cm) = api.get(&key.1).await else {
            return;
        };
        let serving = {
            let sources = self.sources();
            sources
                .get(key)
                .filter(|s| s.error.is_none())
                .and_then(|s| s.plugin.clone())
        };
        let current = serving.and_then(|p| self.registry.snapshot().plugins().get(&p).cloned());
        let Some(current) = current else {
            // Rejected (e.g. for this very Secret) or never loaded: load again.
            if let Some(s) = self.sources().get_mut(key) {
                s.fingerprint = None;
            }
            return self.apply(cm).await;
        };
        let name = current.manifest().name.clone();
        match self.configure(&current, &key.0).await {
            Ok((plugin, versions)) => {
                self.registry.publish(plugin);
                if let Some(s) = self.sources().get_mut(key) {
                    s.secrets = versions;
                }
                let message = format!(
                    "plugin {name} configured again: Secret {}/{secret} changed",
                    key.0
                );
                tracing::info!(configmap = %format!("{}/{}", key.0, key.1), plugin = %name, "{message}");
                self.publish_event(&cm, "Normal", "PluginReconfigured", &message)
                    .await;
            }
            Err(e) => {
                // The values it has keep serving; say what is wrong.
                if let Some(s) = self.sources().get_mut(key) {
                    s.secrets.insert(secret.to_string(), None);
                }
                let message = format!(
                    "plugin {name} keeps its previous configuration: {}",
                    Rejection::Secret(e)
                );
                tracing::warn!(configmap = %format!("{}/{}", key.0, key.1), plugin = %name, "{message}");
                self.publish_event(&cm, "Warning", "PluginConfigError", &message)
                    .await;
            }
        }
    }

    async fn reconfigure_dir_plugin(&self, plugin: &str, ns: &str) {
        let Some(current) = self.registry.snapshot().plugins().get(plugin).cloned() else {
            return;
        };
        match self.configure(&current, ns).await {
            Ok((p, versions)) => {
                self.registry.publish(p);
                self.dir_secrets().insert(plugin.to_string(), versions);
                tracing::info!(
                    plugin,
                    namespace = ns,
                    "plugin configured again from Secrets"
                );
            }
            Err(e) => tracing::warn!(plugin, "plugin configuration: {e}"),
        }
    }
}
