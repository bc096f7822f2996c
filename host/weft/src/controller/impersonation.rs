//! A plugin's resources applied as the plugin: with `--impersonate-plugins`
//! the controller creates, patches and deletes the children a plugin built
//! impersonating its own ServiceAccount, `weft-plugin-NAME`, whose Role
//! grants exactly the kinds its manifest declares (`weft plugin rbac`
//! renders it). The host already refuses an undeclared kind before any
//! request; the API server then refuses it a second time, and a plugin's
//! reach is what its Role says, not what the controller may do.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;

/// The ServiceAccount of plugin `plugin`.
pub fn service_account(plugin: &str) -> String {
    format!("weft-plugin-{plugin}")
}

/// Clients impersonating each plugin's ServiceAccount.
pub struct Impersonation {
    config: kube::Config,
    namespace: String,
    clients: Mutex<HashMap<String, Client>>,
    /// The process's client-side rate limit, shared with these clients.
    throttle: crate::kubeclient::Throttle,
}

impl Impersonation {
    /// Impersonates ServiceAccounts of `namespace` on top of `config` (the
    /// controller's own credentials, which need `impersonate` on them).
    pub fn new(
        config: kube::Config,
        namespace: &str,
        throttle: crate::kubeclient::Throttle,
    ) -> Self {
        Impersonation {
            throttle,
            config,
            namespace: namespace.to_string(),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The user the API server sees for `plugin`.
    pub fn user(&self, plugin: &str) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace,
            service_account(plugin)
        )
    }

    /// A client acting as `plugin`'s ServiceAccount (made once per plugin).
    pub fn client(&self, plugin: &str) -> Result<Client, kube::Error> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(plugin) {
            return Ok(c.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(self.user(plugin));
        let client = self.throttle.client(config)?;
        clients.insert(plugin.to_string(), client.clone());
        Ok(client)
    }
}

/// The client a plugin's API requests go out with: its ServiceAccount's
/// with `--impersonate-plugins`, else the controller's own. Children are
/// written with it, and a web-API task's Secrets read with it.
pub struct PluginClients {
    own: Client,
    impersonation: Mutex<Option<std::sync::Arc<Impersonation>>>,
}

impl PluginClients {
    /// The controller's own client for every plugin, until [`Self::set`].
    pub fn new(own: Client) -> Self {
        PluginClients {
            own,
            impersonation: Mutex::new(None),
        }
    }

    /// Acts as each plugin's ServiceAccount from now on.
    pub fn set(&self, i: std::sync::Arc<Impersonation>) {
        *self.impersonation.lock().unwrap_or_else(|e| e.into_inner()) = Some(i);
    }

    /// The client for `plugin` and the user it acts as (None: the
    /// controller itself, also for `""`, the children of no plugin).
    pub fn client(&self, plugin: &str) -> Result<(Client, Option<String>), kube::Error> {
        let i = self
            .impersonation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match i {
            Some(i) if !plugin.is_empty() => Ok((i.client(plugin)?, Some(i.user(plugin)))),
            _ => Ok((self.own.clone(), None)),
        }
    }
}
