//! Web-API task plugins (`webapi-task-plugin`, `weft:plugin@0.2.0`): tasks
//! that run in a remote service (a Ray cluster, BigQuery, an HTTP API)
//! through create / get / delete, as Flyte's agents do, with outbound HTTP
//! held to the plugin's egress ([`crate::outbound`]).
//!
//! Every call gets a fresh instance, as task calls do. After the call, what
//! the host saw of its requests wins over what the guest says: a denied
//! request, an oversized response or a timeout fails the call naming the
//! URL, even if the guest swallowed the error. Secret header values are cut
//! out of everything the guest returns.

use std::{fmt, sync::Arc};

use serde_json::{Map, Value};
use wasmtime::Store;

use crate::{
    bindings::webapi::{
        WebapiTaskPlugin as Bindings, WebapiTaskPluginPre, weft::plugin::types as wit,
    },
    call::{CallError, CallStats, Common, prepare},
    egress::Rule,
    host::HostState,
    manifest::{Manifest, Poll},
    outbound::{Credential, Outbound},
    prepared::{CallStore, Spares},
    task::{Phase, PhaseInfo, TaskContext},
};

/// Largest `resource-meta` a plugin may return: it is kept in the node's
/// status.
pub const MAX_META: usize = 4 << 10;

/// The plugin config keys the host keeps for itself: the guest never sees
/// them.
pub const HOST_KEYS: [&str; 2] = ["credentials", "egress"];

/// A loaded web-API task plugin version.
#[derive(Clone)]
pub struct WebApiPlugin {
    pub(crate) common: Common,
    pub(crate) pre: WebapiTaskPluginPre<HostState>,
    pub(crate) spares: Arc<Spares<Bindings>>,
    /// What is wrong with the host's keys of the plugin config, if anything:
    /// every call fails with it rather than run without credentials.
    config_problem: Option<String>,
    /// Recording or replaying exchanges (`weft plugin test`), if so.
    tape: Option<crate::outbound::Tape>,
}

impl fmt::Debug for WebApiPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.common;
        write!(
            f,
            "WebApiPlugin({}@{} {:?})",
            c.name, c.manifest.version, c.digest
        )
    }
}

/// One `credentials` entry of a web-API plugin's config, once its
/// `value` is resolved from its Secret.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCredential {
    header: String,
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    hosts: Vec<String>,
    /// Missing while its Secret is not read yet.
    #[serde(default)]
    value: Value,
}

/// The operator's narrowing: `egress: {allow: [...]}` in the plugin config.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OperatorEgress {
    allow: Vec<Rule>,
}

impl WebApiPlugin {
    pub(crate) fn new(common: Common, pre: WebapiTaskPluginPre<HostState>) -> Self {
        let config = common.manifest.config_without_secret_refs();
        Self::configured(common, pre, config, None)
    }

    /// This version with `config`; its spares are made with the outbound
    /// HTTP the config's host keys give.
    fn configured(
        mut common: Common,
        pre: WebapiTaskPluginPre<HostState>,
        mut config: Map<String, Value>,
        tape: Option<crate::outbound::Tape>,
    ) -> Self {
        let creds = config.remove("credentials");
        let egress = config.remove("egress");
        common.set_config(config);
        let manifest_rules = &common.manifest.egress.allow;
        let (credentials, operator, problem) = match host_keys(creds, egress, manifest_rules) {
            Ok((c, o)) => (c, o, None),
            Err(p) => (Vec::new(), None, Some(p)),
        };
        let config_problem = problem.map(|p| format!("plugin {}: config {p}", common.name));
        let mut outbound = Outbound::new(
            common.name.clone(),
            common.manifest.egress.clone(),
            operator,
            credentials,
        );
        if let Some(t) = &tape {
            outbound = outbound.with_tape(t.clone());
        }
        common.outbound = Some(Arc::new(outbound));
        let spares = common.spares(prepare(&common, &pre, |p, s| p.instantiate(s)));
        WebApiPlugin {
            common,
            pre,
            spares,
            config_problem,
            tape,
        }
    }

    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.common.manifest
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.common.name
    }

    /// The component digest of this version.
    pub fn digest(&self) -> crate::Digest {
        self.common.digest
    }

    /// How many prepared instances are ready now.
    pub fn spares_ready(&self) -> usize {
        self.spares.ready()
    }

    /// How often the host polls `get`.
    pub fn poll(&self) -> Poll {
        self.common.manifest.poll
    }

    /// Replace the whole plugin configuration (Secret references resolved).
    /// `credentials` and `egress` are the host's: they become request
    /// headers and the operator's allow-list, and the guest never sees them.
    pub fn set_config(&mut self, config: Map<String, Value>) {
        let tape = self.tape.clone();
        *self = Self::configured(self.common.clone(), self.pre.clone(), config, tape);
    }

    /// The same version, its requests recorded on or replayed from `tape`
    /// (`weft plugin test --record / --replay`). The allow-list still applies.
    pub fn set_tape(&mut self, tape: crate::outbound::Tape) {
        if let Some(o) = &self.common.outbound {
            self.common.outbound = Some(Arc::new(Outbound::clone(o).with_tape(tape.clone())));
        }
        self.tape = Some(tape);
        self.spares = self
            .common
            .spares(prepare(&self.common, &self.pre, |p, s| p.instantiate(s)));
    }

    /// A credential a task names (`secrets` with `mountAs: header`), its
    /// value read from the task's Secret by the controller. Checked as the
    /// plugin config's are; `field` names where each part came from, e.g.
    /// `task.secrets[0]`. Sent with that task's calls only
    /// ([`Self::create_with`]).
    pub fn task_credential(
        &self,
        field: &str,
        header: &str,
        prefix: &str,
        hosts: &[String],
        value: &str,
    ) -> Result<Credential, String> {
        let open = self.common.outbound.as_ref().is_some_and(|o| o.open());
        let wanted = Wanted {
            header,
            prefix,
            hosts,
            value,
        };
        let part = |f: &str| match f {
            "value" => format!("{field} (the Secret's value)"),
            f => format!("{field}.header.{}", if f == "header" { "name" } else { f }),
        };
        credential(wanted, open, &part)
    }

    /// Starts the job: `key` is the same on every attempt to create this
    /// task's job (the resource name), so a create repeated after a crash
    /// finds the job instead of starting another.
    pub fn create(&self, ctx: &TaskContext, key: &str) -> Result<(String, CallStats), CallError> {
        self.create_with(ctx, key, &[])
    }

    /// [`Self::create`], also sending the task's own credentials.
    pub fn create_with(
        &self,
        ctx: &TaskContext,
        key: &str,
        creds: &[Credential],
    ) -> Result<(String, CallStats), CallError> {
        const CALL: &str = "create";
        let (meta, stats) = self.call(
            CALL,
            |b, s, c| b.weft_plugin_webapi_task().call_create(s, c, key),
            ctx,
            creds,
        )?;
        if meta.len() > MAX_META {
            return Err(CallError::OutputTooLarge {
                plugin: self.name().into(),
                call: CALL,
                size: meta.len(),
                limit: MAX_META as u64,
            });
        }
        Ok((meta, stats))
    }

    /// Where the job stands.
    pub fn get(&self, ctx: &TaskContext, meta: &str) -> Result<(PhaseInfo, CallStats), CallError> {
        self.get_with(ctx, meta, &[])
    }

    /// [`Self::get`], also sending the task's own credentials.
    pub fn get_with(
        &self,
        ctx: &TaskContext,
        meta: &str,
        creds: &[Credential],
    ) -> Result<(PhaseInfo, CallStats), CallError> {
        const CALL: &str = "get";
        let meta = meta.to_string();
        let (info, stats) = self.call(
            CALL,
            |b, s, c| b.weft_plugin_webapi_task().call_get(s, c, &meta),
            ctx,
            creds,
        )?;
        Ok((self.phase_info(CALL, info)?, stats))
    }

    /// Stops the job (on abort).
    pub fn delete(&self, ctx: &TaskContext, meta: &str) -> Result<CallStats, CallError> {
        self.delete_with(ctx, meta, &[])
    }

    /// [`Self::delete`], also sending the task's own credentials.
    pub fn delete_with(
        &self,
        ctx: &TaskContext,
        meta: &str,
        creds: &[Credential],
    ) -> Result<CallStats, CallError> {
        const CALL: &str = "delete";
        let meta = meta.to_string();
        self.call(
            CALL,
            |b, s, c| b.weft_plugin_webapi_task().call_delete(s, c, &meta),
            ctx,
            creds,
        )
        .map(|((), stats)| stats)
    }

    /// One call on a fresh instance, with the host's view of its requests
    /// and secrets applied to the result.
    fn call<R: Redact>(
        &self,
        call: &'static str,
        f: impl FnOnce(
            &Bindings,
            &mut Store<HostState>,
            &wit::TaskContext,
        ) -> wasmtime::Result<Result<R, wit::PluginError>>,
        ctx: &TaskContext,
        creds: &[Credential],
    ) -> Result<(R, CallStats), CallError> {
        if let Some(p) = &self.config_problem {
            return Err(CallError::Plugin {
                plugin: self.name().into(),
                call,
                message: p.clone(),
                retryable: false,
            });
        }
        let wctx = self.wit_context(ctx);
        let (mut store, instance): (CallStore<Bindings>, _) =
            self.common
                .fresh(&self.spares, call, |s| self.pre.instantiate(s));
        if let (false, Some(out)) = (creds.is_empty(), &self.common.outbound) {
            store.data_mut().http.hooks.outbound = Some(Arc::new(out.with_credentials(creds)));
        }
        let redact = |s: String| self.redact(s, creds);
        let result = instance.and_then(|b| f(&b, &mut store, &wctx));
        let stats = CallStats {
            memory_peak: store.data().limiter.peak,
        };
        store.data_mut().flush_stdio();
        if let Some(e) = self.incident(call, &store) {
            return Err(e);
        }
        let out = match result {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Err(CallError::Plugin {
                    plugin: self.name().into(),
                    call,
                    message: redact(e.message),
                    retryable: e.retryable,
                });
            }
            Err(e) => return Err(self.common.classify(&mut store, call, e)),
        };
        drop(store);
        Ok((out.redact(&redact), stats))
    }

    /// The first thing that went wrong with the call's requests, as the host saw it.
    fn incident(&self, call: &'static str, store: &Store<HostState>) -> Option<CallError> {
        let i = store.data().http.hooks.incidents();
        let plugin = self.name().to_string();
        if let Some(d) = &i.denied {
            return Some(CallError::Egress {
                plugin,
                call,
                label: "egress_denied",
                message: d.to_string(),
                retryable: false,
            });
        }
        if let Some((url, limit)) = &i.too_large {
            return Some(CallError::Egress {
                plugin: plugin.clone(),
                call,
                label: "response_too_large",
                message: format!(
                    "plugin {plugin}: the response of {url} is over the limit of {limit} bytes (egress.maxResponse)"
                ),
                retryable: false,
            });
        }
        if let Some(why) = &i.unrecorded {
            return Some(CallError::Egress {
                plugin: plugin.clone(),
                call,
                label: "unrecorded",
                message: format!("plugin {plugin}: {why} (--replay)"),
                retryable: false,
            });
        }
        i.timed_out.as_ref().map(|(url, t)| CallError::Egress {
            plugin: plugin.clone(),
            call,
            label: "egress_timeout",
            message: format!("plugin {plugin}: {url} did not answer within {t:?} (egress.timeout)"),
            retryable: true,
        })
    }

    /// Cuts secret values out of what the guest returns (a server may echo
    /// a header back), so they never reach a status, an Event or a log.
    fn redact(&self, s: String, task: &[Credential]) -> String {
        let Some(out) = &self.common.outbound else {
            return s;
        };
        let mut s = s;
        let task = task.iter().flat_map(Credential::secrets);
        for secret in out.secrets().chain(task) {
            let Ok(secret) = std::str::from_utf8(secret) else {
                continue;
            };
            if secret.len() >= 4 && s.contains(secret) {
                s = s.replace(secret, "[redacted]");
            }
        }
        s
    }

    fn wit_context(&self, ctx: &TaskContext) -> wit::TaskContext {
        wit::TaskContext {
            workflow: ctx.workflow.clone(),
            namespace: ctx.namespace.clone(),
            node_id: ctx.node_id.clone(),
            attempt: ctx.attempt,
            task_type: ctx.task_type.clone(),
            config: ctx.config.to_string(),
            inputs: ctx.inputs.to_string(),
            resource_name: ctx.resource_name.clone(),
            labels: ctx
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            plugin_config: self.common.config_json.clone(),
        }
    }

    fn phase_info(&self, call: &'static str, info: wit::PhaseInfo) -> Result<PhaseInfo, CallError> {
        let links = info.log_links.into_iter().map(|l| (l.name, l.uri));
        let parts = (info.reason, info.message, info.outputs);
        crate::task::checked_phase_info(&self.common, call, phase(info.phase), parts, links)
    }
}

/// Reads `credentials` and `egress` of a web-API plugin's config.
fn host_keys(
    creds: Option<Value>,
    egress: Option<Value>,
    manifest: &[Rule],
) -> Result<(Vec<Credential>, Option<Vec<Rule>>), String> {
    let operator = operator_rules(egress)?;
    let open = crate::egress::Policy {
        manifest: manifest.to_vec(),
        operator: operator.clone(),
    }
    .open();
    let raw: Vec<RawCredential> = match creds {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v).map_err(|e| format!("credentials: {e}"))?,
    };
    let mut out = Vec::new();
    for (i, c) in raw.into_iter().enumerate() {
        let field = |f: &str| format!("credentials[{i}].{f}");
        let value = match c.value {
            Value::String(s) => s,
            // Not resolved (yet): the Secret is read by the host first.
            _ => return Err(format!("{}: not resolved from its Secret", field("value"))),
        };
        let wanted = Wanted {
            header: &c.header,
            prefix: &c.prefix,
            hosts: &c.hosts,
            value: &value,
        };
        out.push(credential(wanted, open, &field)?);
    }
    Ok((out, operator))
}

/// A credential header as its config or task names it.
struct Wanted<'a> {
    header: &'a str,
    prefix: &'a str,
    hosts: &'a [String],
    value: &'a str,
}

/// Checks a credential: a header name, a header value, hosts that are
/// egress host patterns, and hosts named at all when the egress in force
/// (`open`) allows any host. `field` names where each part came from.
fn credential(
    w: Wanted<'_>,
    open: bool,
    field: &dyn Fn(&str) -> String,
) -> Result<Credential, String> {
    let header = http::HeaderName::from_bytes(w.header.as_bytes())
        .map_err(|_| format!("{}: {:?} is not a header name", field("header"), w.header))?;
    let mut value = http::HeaderValue::from_str(&format!("{}{}", w.prefix, w.value))
        .map_err(|_| format!("{}: not a valid header value", field("value")))?;
    value.set_sensitive(true);
    let anywhere = w.hosts.is_empty() || w.hosts.iter().any(|h| h == "*");
    if anywhere && open {
        return Err(format!(
            "{}: required, since the egress in force allows any host (*): name the hosts this credential is for, or narrow egress.allow",
            field("hosts")
        ));
    }
    for (j, h) in w.hosts.iter().enumerate() {
        let rule = Rule {
            host: h.clone(),
            ports: Vec::new(),
            methods: Vec::new(),
            schemes: Vec::new(),
        };
        rule.validate()
            .map_err(|p| format!("{}: {p}", field(&format!("hosts[{j}]"))))?;
    }
    Ok(Credential {
        hosts: w.hosts.to_vec(),
        header,
        value,
        prefix_len: w.prefix.len(),
    })
}

/// The operator's `egress: {allow: [...]}`, checked.
fn operator_rules(egress: Option<Value>) -> Result<Option<Vec<Rule>>, String> {
    let Some(v) = egress else { return Ok(None) };
    let e: OperatorEgress = serde_json::from_value(v).map_err(|e| format!("egress: {e}"))?;
    for (i, r) in e.allow.iter().enumerate() {
        r.validate()
            .map_err(|p| format!("egress.allow[{i}]: {p}"))?;
    }
    Ok(Some(e.allow))
}

/// Strings a guest returns, with secrets cut out.
trait Redact {
    fn redact(self, f: &dyn Fn(String) -> String) -> Self;
}

impl Redact for () {
    fn redact(self, _: &dyn Fn(String) -> String) -> Self {}
}

impl Redact for String {
    fn redact(self, f: &dyn Fn(String) -> String) -> Self {
        f(self)
    }
}

impl Redact for wit::PhaseInfo {
    fn redact(self, f: &dyn Fn(String) -> String) -> Self {
        wit::PhaseInfo {
            phase: self.phase,
            reason: self.reason.map(f),
            message: self.message.map(f),
            outputs: self.outputs.map(f),
            log_links: self
                .log_links
                .into_iter()
                .map(|l| wit::LogLink {
                    name: l.name,
                    uri: f(l.uri),
                })
                .collect(),
        }
    }
}

fn phase(p: wit::Phase) -> Phase {
    match p {
        wit::Phase::NotReady => Phase::NotReady,
        wit::Phase::Queued => Phase::Queued,
        wit::Phase::WaitingForResources => Phase::WaitingForResources,
        wit::Phase::Initializing => Phase::Initializing,
        wit::Phase::Running => Phase::Running,
        wit::Phase::Success => Phase::Success,
        wit::Phase::RetryableFailure => Phase::RetryableFailure,
        wit::Phase::PermanentFailure => Phase::PermanentFailure,
    }
}

#[cfg(test)]
mod tests;
