//! Plugin configuration from Secrets (see [`crate::secrets`]) and the
//! operator's registry-config overrides: resolved when a version loads,
//! and again when a Secret it names changes. A plugin whose required
//! Secret is missing is rejected like any bad version and loaded once the
//! Secret appears; a serving plugin whose Secret changes is re-published
//! with the new values (same digest, so pins are unaffected). Events and
//! logs name Secrets, never values.

use std::collections::BTreeMap;

use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, ResourceExt, runtime::watcher};
use serde_json::{Map, Value};
use weft_plugin::Plugin;

use super::{HotLoader, Rejection};
use crate::secrets::{self, SecretError};

/// The resourceVersion of each Secret (namespace, name) a version was
/// configured from (None: it was missing).
pub(super) type SecretVersions = BTreeMap<(String, String), Option<String>>;

impl HotLoader {
    /// The namespace of the operator's Secrets (registry-config overrides,
    /// plugins from the plugin directory): the first plugin namespace
    /// (`default` when the loader watches all).
    pub(super) fn home_namespace(&self) -> String {
        self.config
            .namespaces
            .first()
            .cloned()
            .unwrap_or_else(|| "default".to_string())
    }

    /// `plugin` with its configuration as the guest gets it: the manifest's
    /// (Secret references read from `namespace`, where the plugin lives)
    /// with the operator's registry-config overrides on top (theirs read
    /// from the home namespace); also which Secret versions it read.
    pub(super) async fn configure(
        &self,
        plugin: &Plugin,
        namespace: &str,
    ) -> Result<(Plugin, SecretVersions), SecretError> {
        let manifest = &plugin.manifest().config;
        let overrides = self.overrides(&plugin.manifest().name);
        if overrides.is_none() && secrets::refs(manifest)?.is_empty() {
            return Ok((plugin.clone(), SecretVersions::new()));
        }
        let mut versions = SecretVersions::new();
        let mut config = self.resolve(manifest, namespace, &mut versions).await?;
        if let Some(o) = overrides {
            let home = self.home_namespace();
            config.extend(self.resolve(o, &home, &mut versions).await?);
        }
        Ok((plugin.with_config(config), versions))
    }

    fn overrides(&self, plugin: &str) -> Option<&Map<String, Value>> {
        self.registry
            .config()
            .plugins
            .get(plugin)
            .map(|p| &p.config)
    }

    async fn resolve(
        &self,
        config: &Map<String, Value>,
        namespace: &str,
        versions: &mut SecretVersions,
    ) -> Result<Map<String, Value>, SecretError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let (fetched, read) = secrets::fetch(&api, namespace, config).await?;
        versions.extend(
            read.into_iter()
                .map(|(n, v)| ((namespace.to_string(), n), v)),
        );
        secrets::resolve(config, namespace, &fetched)
    }

    /// Plugins from the plugin directory that name Secrets (in their
    /// manifest or the operator's overrides): configured once at start,
    /// like hot-loaded ones, and again when those Secrets change.
    pub(super) async fn configure_dir_plugins(&self) {
        let sourced: Vec<String> = self
            .sources()
            .values()
            .filter_map(|s| s.plugin.clone())
            .collect();
        let snap = self.registry.snapshot();
        for name in snap.plugins().keys() {
            let named = |c: &Map<String, Value>| !secrets::secret_names(c).is_empty();
            let manifest = &snap.plugins()[name].manifest().config;
            if sourced.contains(name)
                || !(named(manifest) || self.overrides(name).is_some_and(named))
            {
                continue;
            }
            self.reconfigure_dir_plugin(name).await;
        }
    }

    fn dir_secrets(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SecretVersions>> {
        self.dir_secrets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Configures a plugin from the plugin directory (from the home
    /// namespace's Secrets). On failure it keeps what it has: the keys whose
    /// Secrets are missing stay left out, and any Secret event in the home
    /// namespace tries again.
    async fn reconfigure_dir_plugin(&self, plugin: &str) {
        let Some(current) = self.registry.snapshot().plugins().get(plugin).cloned() else {
            return;
        };
        let ns = self.home_namespace();
        match self.configure(&current, &ns).await {
            Ok((p, versions)) => {
                self.registry.publish(p);
                self.dir_secrets().insert(plugin.to_string(), versions);
                tracing::info!(plugin, namespace = %ns, "plugin configured from Secrets");
            }
            Err(e) => {
                self.dir_secrets()
                    .insert(plugin.to_string(), SecretVersions::new());
                tracing::warn!(plugin, "plugin configuration: {e}");
            }
        }
    }

    /// Follows Secrets in the plugin namespaces (only names and
    /// resourceVersions are kept).
    pub(super) fn watch_secrets(
        &self,
    ) -> BoxStream<'static, Result<watcher::Event<Secret>, watcher::Error>> {
        self.watch_kind(watcher::Config::default())
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
        let id = (secret.namespace().unwrap_or_default(), secret.name_any());
        let now = (!gone).then(|| secret.resource_version()).flatten();
        let stale = |v: &SecretVersions| v.get(&id).is_some_and(|seen| *seen != now);
        let keys: Vec<_> = self
            .sources()
            .iter()
            .filter(|(_, s)| stale(&s.secrets))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.secret_changed(&key, &id).await;
        }
        let dir: Vec<String> = self
            .dir_secrets()
            .iter()
            .filter(|(_, v)| stale(v) || (v.is_empty() && id.0 == self.home_namespace()))
            .map(|(p, _)| p.clone())
            .collect();
        for plugin in dir {
            self.reconfigure_dir_plugin(&plugin).await;
        }
    }

    /// A Secret (`id`: namespace, name) that `key`'s plugin names changed.
    async fn secret_changed(&self, key: &(String, String), id: &(String, String)) {
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
        let (kind, reason, message) = match self.configure(&current, &key.0).await {
            Ok((plugin, versions)) => {
                self.registry.publish(plugin);
                if let Some(s) = self.sources().get_mut(key) {
                    s.secrets = versions;
                }
                let message = format!(
                    "plugin {name} configured again: Secret {}/{} changed",
                    id.0, id.1
                );
                ("Normal", "PluginReconfigured", message)
            }
            Err(e) => {
                // The values it has keep serving; say what is wrong.
                if let Some(s) = self.sources().get_mut(key) {
                    s.secrets.insert(id.clone(), None);
                }
                let message = format!(
                    "plugin {name} keeps its previous configuration: {}",
                    Rejection::Secret(e)
                );
                ("Warning", "PluginConfigError", message)
            }
        };
        tracing::info!(configmap = %format!("{}/{}", key.0, key.1), plugin = %name, "{message}");
        self.publish_event(&cm, kind, reason, &message).await;
    }
}
