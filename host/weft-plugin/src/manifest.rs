//! The plugin manifest: what a plugin says about itself, and what the host
//! holds it to.
//!
//! Every component ships with a manifest (YAML or JSON) next to it. The host
//! trusts none of the component's own claims: the manifest decides which
//! world it must implement, which kinds it may create, and how much time and
//! memory each call gets.

use std::{collections::BTreeMap, fmt, path::Path, time::Duration};

use serde::{Deserialize, Serialize};

/// Problems with a manifest. Each names the field and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The manifest file could not be read.
    #[error("cannot read plugin manifest {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not valid YAML/JSON or does not have the expected shape.
    #[error("plugin manifest {origin} is malformed: {source}")]
    Parse {
        /// Where the manifest came from (a path or a ConfigMap).
        origin: String,
        /// The parser's complaint, with line and column.
        #[source]
        source: serde_yaml::Error,
    },
    /// The manifest parsed but a field has an invalid value.
    #[error("plugin manifest {origin} is invalid: {field}: {problem}")]
    Invalid {
        /// Where the manifest came from.
        origin: String,
        /// The offending field, e.g. `limits.memory`.
        field: std::borrow::Cow<'static, str>,
        /// What is wrong with it.
        problem: String,
    },
}

/// Module result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which WIT world a plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// `weft:plugin/k8s-task-plugin`: builds Kubernetes resources for tasks.
    K8sTaskPlugin,
    /// `weft:plugin/middleware-plugin`: a gRPC request policy hook.
    MiddlewarePlugin,
    /// `weft:plugin/webapi-task-plugin@0.2.0`: runs tasks as jobs of a
    /// web API over allow-listed outbound HTTP (issue 20; served by
    /// [`crate::webapi`]).
    WebapiTaskPlugin,
}

impl World {
    /// The world's name in `wit/plugin/world.wit` (the web-API world's in
    /// `wit/plugin-0.2`).
    pub fn wit_name(self) -> &'static str {
        match self {
            World::K8sTaskPlugin => "k8s-task-plugin",
            World::MiddlewarePlugin => "middleware-plugin",
            World::WebapiTaskPlugin => "webapi-task-plugin",
        }
    }

    /// The export the component must provide for this world.
    pub fn export_name(self) -> &'static str {
        match self {
            World::K8sTaskPlugin => "weft:plugin/k8s-task@0.1.0",
            World::MiddlewarePlugin => "weft:plugin/middleware@0.1.0",
            World::WebapiTaskPlugin => "weft:plugin/webapi-task@0.2.0",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wit_name())
    }
}

/// A Kubernetes kind a task plugin may create.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceKind {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// What a middleware does when it traps or overruns its deadline (Istio's failStrategy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailStrategy {
    /// Answer the call with UNAVAILABLE: safe for auth.
    #[default]
    Closed,
    /// Let the call through as if the middleware were absent: for audit and metrics.
    Open,
}

/// Middleware-only settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MiddlewareSettings {
    /// Whether the plugin receives the request message as JSON.
    #[serde(default)]
    pub request_body: bool,
    /// What happens when the plugin faults.
    #[serde(default)]
    pub fail_strategy: FailStrategy,
    /// Whether the host calls the plugin a second time once the call is
    /// answered, so an audit log can record the outcome. The WIT hook sees
    /// only requests; the host marks this second call with the metadata
    /// `x-weft-phase: outcome`, `x-weft-outcome` (the gRPC code name, e.g.
    /// `OK`, `PERMISSION_DENIED`) and `x-weft-outcome-message`, and ignores
    /// its verdict. It happens off the answer's path, so it adds no latency;
    /// plugins whose request phase rejected a call still get its outcome.
    #[serde(default)]
    pub observe_outcome: bool,
}

/// Per-call limits, as written in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawLimits {
    #[serde(default)]
    deadline: Option<String>,
    #[serde(default)]
    memory: Option<String>,
    #[serde(default)]
    output: Option<String>,
}

/// Per-call limits the host enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one call may take (instantiation included).
    pub deadline: Duration,
    /// Linear memory one instance may grow to, in bytes.
    pub memory: u64,
    /// The largest string a call may return, in bytes.
    pub output: u64,
}

impl Limits {
    /// Defaults for a plugin that states no limits: generous for a JSON-in/JSON-out
    /// plugin, small enough that a runaway guest cannot hurt the host.
    pub const DEFAULT: Limits = Limits {
        deadline: Duration::from_secs(1),
        memory: 64 << 20,
        output: 4 << 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawManifest {
    name: String,
    version: String,
    world: World,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    task_types: Vec<String>,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    resources: Vec<ResourceKind>,
    #[serde(default)]
    limits: Option<RawLimits>,
    #[serde(default)]
    config: Option<serde_json::Value>,
    #[serde(default)]
    middleware: Option<MiddlewareSettings>,
    #[serde(default)]
    egress: Option<crate::egress::RawEgress>,
    #[serde(default)]
    poll: Option<RawPoll>,
}

/// `poll` as written in a manifest.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPoll {
    #[serde(default)]
    initial: Option<String>,
    #[serde(default)]
    max: Option<String>,
}

/// How often the host asks a web-API plugin where a job stands: `initial`
/// after `create`, doubling up to `max` (Flyte's agents poll the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Poll {
    fn default() -> Self {
        Poll {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

/// A parsed and validated plugin manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The plugin's name: a DNS-1123 label, unique in a registry.
    pub name: String,
    /// The plugin's version (semver).
    pub version: String,
    /// The world the component must implement.
    pub world: World,
    /// A one-line description.
    pub description: Option<String>,
    /// Task types a task plugin serves.
    pub task_types: Vec<String>,
    /// Which plugin owns a task type that several claim: the higher
    /// priority wins, then the plugin loaded first (default 0). The
    /// operator's `defaultForTaskTypes` overrides both.
    pub priority: i32,
    /// Kinds a task plugin may create.
    pub resources: Vec<ResourceKind>,
    /// Per-call limits.
    pub limits: Limits,
    /// Default plugin configuration (a JSON object).
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Middleware settings (middleware plugins only).
    pub middleware: MiddlewareSettings,
    /// Outbound HTTP (web-API task plugins only; nothing for the others).
    pub egress: crate::egress::Egress,
    /// Polling of `get` (web-API task plugins only).
    pub poll: Poll,
}

/// `config` with every `{valueFrom: ...}` value left out, so that no guest
/// ever reads a Secret reference instead of a value (the plugin's own
/// default applies until the host resolves it).
pub fn without_secret_refs(
    config: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    fn strip(v: &serde_json::Value) -> Option<serde_json::Value> {
        use serde_json::Value;
        match v {
            Value::Object(m) if m.contains_key("valueFrom") => None,
            Value::Object(m) => Some(Value::Object(
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), strip(v)?)))
                    .collect(),
            )),
            Value::Array(a) => Some(Value::Array(a.iter().filter_map(strip).collect())),
            other => Some(other.clone()),
        }
    }
    config
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), strip(v)?)))
        .collect()
}

impl Manifest {
    /// The configuration a guest sees before the host resolves Secret
    /// references (see [`without_secret_refs`]).
    pub fn config_without_secret_refs(&self) -> serde_json::Map<String, serde_json::Value> {
        without_secret_refs(&self.config)
    }

    /// Read and validate a manifest file.
    pub fn from_path(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and validate manifest text (YAML, or JSON which is YAML too).
    /// `origin` names where it came from, for error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let raw: RawManifest = serde_yaml::from_str(text).map_err(|source| Error::Parse {
            origin: origin.to_string(),
            source,
        })?;
        let invalid = |field: &'static str, problem: String| Error::Invalid {
            origin: origin.to_string(),
            field: field.into(),
            problem,
        };
        if let Err(problem) = check_dns_label(&raw.name) {
            return Err(invalid("name", problem));
        }
        if !is_semver(&raw.version) {
            return Err(invalid(
                "version",
                format!("{:?} is not a semantic version like 1.2.3", raw.version),
            ));
        }
        match raw.world {
            World::K8sTaskPlugin => {
                if raw.task_types.is_empty() {
                    return Err(invalid(
                        "taskTypes",
                        "a k8s-task-plugin must serve at least one task type".into(),
                    ));
                }
                if raw.resources.is_empty() {
                    return Err(invalid(
                        "resources",
                        "a k8s-task-plugin must declare the kinds it creates".into(),
                    ));
                }
                if raw.middleware.is_some() {
                    return Err(invalid(
                        "middleware",
                        "only a middleware-plugin takes middleware settings".into(),
                    ));
                }
            }
            World::MiddlewarePlugin => {
                if !raw.task_types.is_empty() || !raw.resources.is_empty() {
                    return Err(invalid(
                        "taskTypes",
                        "a middleware-plugin serves no task types and creates no resources".into(),
                    ));
                }
            }
            World::WebapiTaskPlugin => {
                if raw.task_types.is_empty() {
                    return Err(invalid(
                        "taskTypes",
                        "a webapi-task-plugin must serve at least one task type".into(),
                    ));
                }
                if !raw.resources.is_empty() || raw.middleware.is_some() {
                    return Err(invalid(
                        "resources",
                        "a webapi-task-plugin creates no Kubernetes resources and takes no middleware settings".into(),
                    ));
                }
            }
        }
        if raw.world != World::WebapiTaskPlugin && (raw.egress.is_some() || raw.poll.is_some()) {
            return Err(invalid(
                "egress",
                format!(
                    "only a webapi-task-plugin makes outbound HTTP (egress, poll); this is a {}",
                    raw.world
                ),
            ));
        }
        let egress = raw
            .egress
            .map(crate::egress::RawEgress::parse)
            .transpose()
            .map_err(|(field, problem)| Error::Invalid {
                origin: origin.to_string(),
                field: field.into(),
                problem,
            })?
            .unwrap_or_default();
        let poll = parse_poll(raw.poll).map_err(|(f, p)| invalid(f, p))?;
        for t in &raw.task_types {
            if let Err(problem) = check_dns_label(t) {
                return Err(invalid("taskTypes", format!("{t:?}: {problem}")));
            }
        }
        for r in &raw.resources {
            if r.api_version.is_empty() || r.kind.is_empty() {
                return Err(invalid(
                    "resources",
                    format!("{r} needs both apiVersion and kind"),
                ));
            }
        }
        let mut limits = Limits::DEFAULT;
        if let Some(l) = raw.limits {
            if let Some(d) = l.deadline {
                limits.deadline = humantime::parse_duration(&d)
                    .map_err(|e| invalid("limits.deadline", format!("{d:?}: {e}")))?;
                if limits.deadline.is_zero() || limits.deadline > Duration::from_secs(600) {
                    return Err(invalid(
                        "limits.deadline",
                        format!("{d:?} must be above zero and at most 10m"),
                    ));
                }
            }
            if let Some(m) = l.memory {
                limits.memory = parse_quantity(&m).map_err(|p| invalid("limits.memory", p))?;
                if limits.memory < 1 << 16 {
                    return Err(invalid(
                        "limits.memory",
                        format!("{m:?} is below one Wasm page (64Ki)"),
                    ));
                }
            }
            if let Some(o) = l.output {
                limits.output = parse_quantity(&o).map_err(|p| invalid("limits.output", p))?;
            }
        }
        let config = match raw.config {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(serde_json::Value::Object(m)) => m,
            Some(other) => {
                return Err(invalid(
                    "config",
                    format!("must be an object, found {}", json_type(&other)),
                ));
            }
        };
        Ok(Manifest {
            name: raw.name,
            version: raw.version,
            world: raw.world,
            description: raw.description,
            task_types: raw.task_types,
            priority: raw.priority,
            resources: raw.resources,
            limits,
            config,
            middleware: raw.middleware.unwrap_or_default(),
            egress,
            poll,
        })
    }

    /// Whether the manifest allows creating this kind.
    pub fn allows(&self, api_version: &str, kind: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.api_version == api_version && r.kind == kind)
    }
}

/// `poll` with its defaults; `max` must not be below `initial`.
fn parse_poll(raw: Option<RawPoll>) -> Result<Poll, (&'static str, String)> {
    let mut poll = Poll::default();
    let Some(raw) = raw else { return Ok(poll) };
    let duration = |field: &'static str, text: &str| {
        humantime::parse_duration(text)
            .ok()
            .filter(|d| !d.is_zero() && *d <= Duration::from_secs(3600))
            .ok_or((
                field,
                format!("{text:?} must be a duration above zero and at most 1h"),
            ))
    };
    if let Some(i) = raw.initial {
        poll.initial = duration("poll.initial", &i)?;
    }
    if let Some(m) = raw.max {
        poll.max = duration("poll.max", &m)?;
    }
    if poll.max < poll.initial {
        return Err(("poll.max", format!("{:?} is below poll.initial", poll.max)));
    }
    Ok(poll)
}

/// Checks a Kubernetes DNS-1123 label (RFC 1123): lower-case alphanumerics
/// and '-', starting and ending alphanumeric, at most 63 characters.
pub fn check_dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 63 {
        return Err(format!("{s:?} is longer than 63 characters"));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !s.chars().all(ok_char) || s.starts_with('-') || s.ends_with('-') {
        return Err(format!(
            "{s:?} must consist of lower-case letters, digits and '-', and start and end with a letter or digit"
        ));
    }
    Ok(())
}

fn is_semver(s: &str) -> bool {
    let core = s.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Parses a Kubernetes-style byte quantity (kept here by its old path).
pub use crate::quantity::parse_quantity;

/// Labels carried through to every resource; kept sorted for deterministic output.
pub type Labels = BTreeMap<String, String>;

#[cfg(test)]
mod tests;
