//! `weft webhook`: the admission webhook alone, for installs that run it
//! apart from the controller (its own Deployment, scaled on its own).
//!
//! It knows the task types the controller will serve without compiling a
//! plugin: those of the plugin directory, plus those the manifests of the
//! hot-loadable plugin ConfigMaps claim, kept current by a watch. A task
//! type being hot-loaded counts as known, as it does for the controller's
//! own validator.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube::{Api, Client};
use weft_plugin::Registry;

use crate::hotload::package::{Head, LABEL_PLUGIN};
use crate::runtime;

/// Arguments of `weft webhook`.
#[derive(Debug, Args)]
pub struct WebhookCommand {
    /// Plugin directory (components with their manifests).
    #[arg(long, default_value = "/var/lib/weft/plugins", env = "WEFT_PLUGINS")]
    pub plugins: PathBuf,
    /// Precompiled plugin cache.
    #[arg(long, env = "WEFT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Namespaces whose plugin ConfigMaps count (default: all).
    #[arg(long, env = "WEFT_PLUGIN_NAMESPACES", value_delimiter = ',')]
    pub plugin_namespace: Vec<String>,
    /// The webhook's own namespace (its certificate Secret's).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// The webhook (`--webhook-port` defaults to 9443 here).
    #[command(flatten)]
    pub webhook: crate::webhook::WebhookArgs,
}

/// Run `weft webhook` until SIGTERM or Ctrl-C.
pub fn webhook(mut args: WebhookCommand) -> anyhow::Result<ExitCode> {
    args.webhook.webhook_port.get_or_insert(9443);
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = Client::try_default().await?;
        let (_engine, registry) = runtime::load_plugins(&args.plugins, args.cache_dir.as_deref())?;
        let namespaces = match args.plugin_namespace.is_empty() {
            true => vec![None],
            false => args.plugin_namespace.iter().cloned().map(Some).collect(),
        };
        for ns in namespaces {
            tokio::spawn(claimed_task_types(client.clone(), ns, registry.clone()));
        }
        let addr = args
            .webhook
            .start(&client, registry, &args.namespace)
            .await?;
        tracing::info!(?addr, "weft webhook running");
        super::dev::shutdown_signal().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Marks the task types plugin ConfigMaps claim as loading, for as long
/// as the ConfigMap exists.
async fn claimed_task_types(client: Client, ns: Option<String>, registry: Arc<Registry>) {
    let api: Api<ConfigMap> = match &ns {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let config = watcher::Config::default().labels(LABEL_PLUGIN);
    let mut claims = HashMap::new();
    // What a re-list saw: claims it did not see were deleted meanwhile.
    let mut listed = std::collections::HashSet::new();
    let mut events = std::pin::pin!(watcher(api, config));
    while let Some(event) = events.next().await {
        let key = |cm: &ConfigMap| {
            let m = &cm.metadata;
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or(""),
                m.name.as_deref().unwrap_or("")
            )
        };
        match event {
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitDone) => claims.retain(|k, _| listed.contains(k)),
            Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                listed.insert(key(&cm));
                let claim = Head::parse(&cm).ok().and_then(|head| {
                    weft_plugin::manifest::Manifest::parse(&head.manifest, &key(&cm)).ok()
                });
                match claim {
                    Some(m) => {
                        let guard = registry.begin_loading(&m.name, &m.task_types);
                        claims.insert(key(&cm), guard);
                    }
                    None => {
                        claims.remove(&key(&cm));
                    }
                }
            }
            Ok(watcher::Event::Delete(cm)) => {
                claims.remove(&key(&cm));
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching plugin ConfigMaps");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}
