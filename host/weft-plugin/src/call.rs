//! The call skeleton every plugin world shares: what a loaded version
//! carries (`Common`: name, manifest, digest, state, config), a store per
//! call with its memory limit and deadline, the preparer's spares, the
//! mapping of traps, deadlines and memory exhaustion to typed
//! [`CallError`]s, and the per-call [`CallStats`]. The worlds
//! ([`crate::task`], [`crate::middleware`], [`crate::webapi`]) call through it.

use std::{sync::Arc, time::Duration};

use serde_json::{Map, Value};
use wasmtime::{Store, Trap};

use crate::{
    engine::{Digest, PluginEngine},
    host::{HostState, StateStore},
    manifest::{Limits, Manifest},
    prepared::{CallStore, Make, Prepared, Spares},
};

/// Which budget a failure counts against, as in Flyte: a user failure is the
/// task's own fault; a system failure is the platform's (a plugin trap, a
/// timeout, an eviction) and is retried on a separate budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The task failed.
    User,
    /// The platform failed.
    System,
}

/// Why one plugin call failed. Each variant says which plugin, which call, and why.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past the manifest's deadline and was interrupted.
    #[error("plugin {plugin}: {call} exceeded its deadline of {deadline:?} and was stopped")]
    Deadline {
        /// Plugin name.
        plugin: String,
        /// The call, e.g. `build-resource`.
        call: &'static str,
        /// The deadline.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past the manifest's limit.
    #[error("plugin {plugin}: {call} ran out of memory (limit {limit} bytes)")]
    OutOfMemory {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The memory limit.
        limit: u64,
    },
    /// The guest exhausted its stack (unbounded recursion).
    #[error("plugin {plugin}: {call} overflowed its stack (unbounded recursion?)")]
    StackOverflow {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
    },
    /// The guest trapped (a panic, an unreachable, a bad memory access).
    #[error("plugin {plugin}: {call} trapped: {reason}")]
    Trap {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The trap, with the guest's last error log line (its panic message) when there is one.
        reason: String,
    },
    /// No instance could be created (the pool is exhausted, or the guest's start function failed).
    #[error("plugin {plugin}: cannot instantiate for {call}: {reason}")]
    Instantiate {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// Why.
        reason: String,
    },
    /// The guest returned more than the manifest's output limit.
    #[error("plugin {plugin}: {call} returned {size} bytes, over the limit of {limit}")]
    OutputTooLarge {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// Bytes returned.
        size: usize,
        /// The limit.
        limit: u64,
    },
    /// The guest returned something that is not what the contract asks for.
    #[error("plugin {plugin}: {call} returned an invalid result: {problem}")]
    InvalidOutput {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The built resource breaks the plugin's manifest (undeclared kind, another namespace).
    #[error("plugin {plugin}: {call} was denied: {problem}")]
    Forbidden {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// What it tried.
        problem: String,
    },
    /// A web-API plugin's request was refused, too large or too slow: the
    /// host's view, naming the URL, whatever the guest made of it.
    #[error("{message}")]
    Egress {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// `egress_denied`, `response_too_large` or `egress_timeout`.
        label: &'static str,
        /// What happened, naming the plugin and the URL.
        message: String,
        /// Whether a retry may help (a timeout may pass; a denial will not).
        retryable: bool,
    },
    /// The plugin returned an error on purpose (a WIT `plugin-error`).
    #[error("plugin {plugin}: {call} failed: {message}")]
    Plugin {
        /// Plugin name.
        plugin: String,
        /// The call.
        call: &'static str,
        /// The plugin's message.
        message: String,
        /// Whether the plugin says a retry may help.
        retryable: bool,
    },
}

impl CallError {
    /// Which retry budget this failure counts against.
    pub fn kind(&self) -> FailureKind {
        match self {
            CallError::Plugin { .. } => FailureKind::User,
            CallError::Egress { retryable, .. } if !retryable => FailureKind::User,
            _ => FailureKind::System,
        }
    }

    /// Whether a new attempt may succeed. Faults of the sandbox (traps,
    /// deadlines, memory) may be transient; a plugin that breaks its own
    /// contract or manifest will do so again.
    pub fn retryable(&self) -> bool {
        match self {
            CallError::Plugin { retryable, .. } | CallError::Egress { retryable, .. } => *retryable,
            CallError::InvalidOutput { .. }
            | CallError::Forbidden { .. }
            | CallError::OutputTooLarge { .. } => false,
            _ => true,
        }
    }

    /// A short label for metrics (`deadline`, `oom`, `trap`, ...).
    pub fn metric_label(&self) -> &'static str {
        match self {
            CallError::Deadline { .. } => "deadline",
            CallError::OutOfMemory { .. } => "oom",
            CallError::StackOverflow { .. } => "stack_overflow",
            CallError::Trap { .. } => "trap",
            CallError::Instantiate { .. } => "instantiate",
            CallError::OutputTooLarge { .. } => "output_too_large",
            CallError::InvalidOutput { .. } => "invalid_output",
            CallError::Forbidden { .. } => "forbidden",
            CallError::Plugin { .. } => "plugin_error",
            CallError::Egress { label, .. } => label,
        }
    }

    /// Whether the sandbox stopped the guest (trap, deadline, memory, stack):
    /// what a circuit breaker counts.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            CallError::Deadline { .. }
                | CallError::OutOfMemory { .. }
                | CallError::StackOverflow { .. }
                | CallError::Trap { .. }
        )
    }
}

/// What every kind of plugin carries.
#[derive(Clone)]
pub(crate) struct Common {
    pub(crate) name: Arc<str>,
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) digest: Digest,
    pub(crate) size: usize,
    pub(crate) state: Arc<StateStore>,
    /// The plugin config as JSON, serialized once at load instead of per call.
    pub(crate) config_json: String,
    pub(crate) engine: PluginEngine,
    /// A web-API plugin's outbound HTTP (`None`: every request is denied).
    pub(crate) outbound: Option<Arc<crate::outbound::Outbound>>,
}

impl Common {
    pub(crate) fn set_config(&mut self, config: Map<String, Value>) {
        self.config_json = Value::Object(config).to_string();
    }

    /// The manifest's defaults merged with the operator's overrides
    /// (overrides win key by key), Secret references left out of both:
    /// what every world's `set_config_overrides` sets.
    pub(crate) fn set_config_overrides(&mut self, overrides: &Map<String, Value>) {
        let base = self.manifest.config_without_secret_refs();
        let overrides = crate::manifest::without_secret_refs(overrides);
        self.set_config(merged(&base, &overrides));
    }

    pub(crate) fn limits(&self) -> Limits {
        self.manifest.limits
    }

    pub(crate) fn store(&self, call: &'static str) -> Store<HostState> {
        let limits = self.limits();
        let mut data = HostState::new(self.name.clone(), call, limits.memory, self.state.clone());
        data.http.hooks.outbound = self.outbound.clone();
        let mut store = Store::new(&self.engine.inner.engine, data);
        store.limiter(|s| &mut s.limiter);
        self.arm_deadline(&mut store);
        if self.outbound.is_some() {
            self.deadline_leaving_out_network(&mut store);
        } else {
            store.epoch_deadline_trap();
        }
        store
    }

    /// A web-API plugin waits on the network inside its calls: its
    /// deadline counts only the guest's own time. (Each request is bounded
    /// apart by `egress.timeout`.)
    pub(crate) fn deadline_leaving_out_network(&self, store: &mut Store<HostState>) {
        let deadline = self.limits().deadline;
        let tick = self.engine.inner.tick.as_nanos().max(1);
        store.epoch_deadline_callback(move |ctx| {
            let data = ctx.data();
            let waited = data.http.hooks.waited();
            let used = data.started.elapsed().saturating_sub(waited);
            let Some(left) = deadline.checked_sub(used).filter(|l| !l.is_zero()) else {
                return Err(Trap::Interrupt.into());
            };
            let ticks = u64::try_from(left.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
            Ok(wasmtime::UpdateDeadline::Continue(ticks.saturating_add(1)))
        });
    }

    /// Spares of this version, if the engine keeps any.
    pub(crate) fn spares<B: Send + 'static>(&self, make: Make<B>) -> Arc<Spares<B>> {
        let inner = &self.engine.inner;
        Spares::new(inner.preparer.clone(), inner.spares, make)
    }

    /// A fresh instance for one call: a spare prepared ahead of time when
    /// one is ready, else one instantiated now. Either way it was never
    /// called before, and its deadline starts now.
    pub(crate) fn fresh<B: Send + 'static>(
        &self,
        spares: &Arc<Spares<B>>,
        call: &'static str,
        instantiate: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<B>,
    ) -> (CallStore<B>, wasmtime::Result<B>) {
        let (store, bindings) = match spares.take() {
            Some(Prepared {
                mut store,
                bindings,
            }) => {
                store.data_mut().call = call;
                self.arm_deadline(&mut store);
                (store, Ok(bindings))
            }
            None => {
                let mut store = self.store(call);
                let bindings = instantiate(&mut store);
                (store, bindings)
            }
        };
        (CallStore::new(store, spares.clone()), bindings)
    }

    /// Sets the store's epoch deadline to the manifest's deadline from now.
    pub(crate) fn arm_deadline(&self, store: &mut Store<HostState>) {
        store.data_mut().started = std::time::Instant::now();
        let tick = self.engine.inner.tick.as_nanos().max(1);
        let ticks =
            u64::try_from(self.limits().deadline.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX);
        // One extra tick: the deadline is never cut short by a tick that was
        // already half over when the call started.
        store.set_epoch_deadline(ticks.saturating_add(1));
    }

    /// Turns a wasmtime error from instantiating or calling into a typed failure.
    pub(crate) fn classify(
        &self,
        store: &mut Store<HostState>,
        call: &'static str,
        err: wasmtime::Error,
    ) -> CallError {
        let plugin = self.name.to_string();
        let data = store.data_mut();
        data.flush_stdio();
        let limits = self.limits();
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallError::Deadline {
                plugin,
                call,
                deadline: limits.deadline,
            },
            Some(Trap::StackOverflow) => CallError::StackOverflow { plugin, call },
            Some(_) if data.limiter.denied => CallError::OutOfMemory {
                plugin,
                call,
                limit: limits.memory,
            },
            Some(trap) => {
                let reason = match &data.last_error {
                    Some(msg) => format!("{trap}; the plugin's last error: {msg}"),
                    None => trap.to_string(),
                };
                CallError::Trap {
                    plugin,
                    call,
                    reason,
                }
            }
            None if data.limiter.denied => CallError::OutOfMemory {
                plugin,
                call,
                limit: limits.memory,
            },
            None => CallError::Trap {
                plugin,
                call,
                reason: format!("{err:#}"),
            },
        }
    }

    pub(crate) fn check_output(&self, call: &'static str, s: &str) -> Result<(), CallError> {
        let limit = self.limits().output;
        if s.len() as u64 > limit {
            return Err(CallError::OutputTooLarge {
                plugin: self.name.to_string(),
                call,
                size: s.len(),
                limit,
            });
        }
        Ok(())
    }
}

/// How the preparer makes a spare of a version: a store like a call's,
/// instantiated from the version's `InstancePre`.
pub(crate) fn prepare<P, B: 'static>(
    common: &Common,
    pre: &P,
    instantiate: fn(&P, &mut Store<HostState>) -> wasmtime::Result<B>,
) -> Make<B>
where
    P: Clone + Send + Sync + 'static,
{
    let (common, pre) = (common.clone(), pre.clone());
    Box::new(move || {
        let mut store = common.store("prepare");
        let bindings = instantiate(&pre, &mut store)?;
        Ok(Prepared { store, bindings })
    })
}

/// A JSON value as text. `serde_json::to_string` writes into a buffer
/// sized for it; `Value`'s `Display` goes through the formatter a token at
/// a time, which was 12% of the host's share of a pod call in a profile.
pub(crate) fn json(value: &Value) -> String {
    // A `Value` always serialises: its keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}

/// Per-call measurements, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    /// The highest linear memory size the instance reached, in bytes.
    pub memory_peak: usize,
}

/// `base` with `overrides` winning key by key (top level only).
fn merged(base: &Map<String, Value>, overrides: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in overrides {
        out.insert(k.clone(), v.clone());
    }
    out
}
