//! A task's child that is not in the watch cache: refused before (the
//! node fails), gone mid-task (the platform's failure, retried), waiting
//! for a quota (not before its back-off), or to be created now (secrets
//! marked and the data plane added first).

use serde_json::Value;
use weft_dag::schedule::{TaskObservation, TaskRequest};
use weft_dag::status::ResourceRef;
use weft_plugin::{TaskContext, TaskPlugin};

use super::{Apply, PluginExecutor};
use crate::controller::observe::plugin_ref;
use crate::controller::quota;
use crate::pod_secrets;

impl PluginExecutor {
    /// The observation of an attempt whose child `r` (cache key `key`)
    /// is not in the cache; `desired` is the plugin's build when this
    /// round already asked for it.
    pub(super) fn missing_child(
        &mut self,
        req: &TaskRequest<'_>,
        plugin: &TaskPlugin,
        ctx: &TaskContext,
        r: ResourceRef,
        desired: Option<Value>,
        key: &str,
    ) -> TaskObservation {
        if let Some(why) = self.children.take_denied(key) {
            // The API server refused to create it (the plugin's Role
            // does not grant the kind): asking again changes nothing.
            let mut obs = TaskObservation::failed(false, true, "System:Forbidden", &why);
            obs.resource = Some(r);
            obs.plugin = Some(plugin_ref(plugin));
            return obs;
        }
        if self.children.was_seen(key) {
            // It existed and is gone before it finished: deleted by
            // someone else, or its node went away. The platform's
            // failure, retried on the system budget (Flyte does the same).
            self.children.forget(key);
            let mut obs = TaskObservation::failed(
                true,
                true,
                "System:ResourceDeleted",
                &format!("{} {} was deleted before it finished", r.kind, r.name),
            );
            obs.resource = Some(r);
            obs.plugin = Some(plugin_ref(plugin));
            return obs;
        }
        if self.children.kind(&r.api_version, &r.kind).is_none() {
            self.unwatched.push((r.api_version.clone(), r.kind.clone()));
        }
        let wait = self.children.waits.get(key);
        if let Some(w) = wait
            .as_ref()
            .filter(|w| w.until > std::time::Instant::now())
        {
            // Refused for a quota: not before its back-off.
            self.wake_at = Some(self.wake_at.map_or(w.until, |t| t.min(w.until)));
            return quota::observation(w, r, plugin_ref(plugin));
        }
        // Missing from the cache: create it (or, right after creating
        // it, apply the same object again: a no-op).
        let mut desired = match desired {
            Some(d) => d,
            None => match self.build(plugin, ctx) {
                Ok(v) => v,
                Err(obs) => return *obs,
            },
        };
        if let Err(why) = pod_secrets::mark(&mut desired, &req.task.secrets) {
            let mut obs = TaskObservation::failed(false, false, "SecretsNotMountable", &why);
            obs.plugin = Some(plugin_ref(plugin));
            return obs;
        }
        let logs = self.archives_logs();
        if req.task.has_io() || logs {
            let prepared = self.with_attempt(req, |io, at| {
                io.prepare(&mut desired, at, req.task, req.artifacts, logs)
            });
            if let Err(p) = prepared {
                let mut obs = TaskObservation::failed(p.system, p.system, p.reason, &p.message);
                obs.plugin = Some(plugin_ref(plugin));
                return obs;
            }
        }
        self.applies.push(Apply {
            plugin: plugin.name().to_string(),
            object: desired,
        });
        if let Some(w) = &wait {
            return quota::observation(w, r, plugin_ref(plugin));
        }
        let mut obs = TaskObservation::in_progress("submitted");
        obs.resource = Some(r);
        obs.plugin = Some(plugin_ref(plugin));
        obs
    }
}
