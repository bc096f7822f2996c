//! Outbound HTTP a plugin may make: denied unless allowed (issue 20).
//!
//! A web-API task plugin declares in its manifest which hosts, ports and
//! methods it calls (`egress.allow`); the operator may narrow that in the
//! plugin's settings (a request must then match both lists). Anything else
//! is refused before a connection is opened, with an error that names the
//! plugin, the method and the URL.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A web-API plugin's outbound HTTP, as its manifest's `egress` states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// Where it may go (`egress.allow`); empty allows nothing.
    pub allow: Vec<Rule>,
    /// How long one request may take, connection to last byte.
    pub timeout: Duration,
    /// The largest response body the host reads, in bytes.
    pub max_response: u64,
    /// How many requests of this plugin may be open at once.
    pub concurrency: u32,
}

impl Default for Egress {
    fn default() -> Self {
        Egress {
            allow: Vec::new(),
            timeout: Duration::from_secs(30),
            max_response: 1 << 20,
            concurrency: 4,
        }
    }
}

/// `egress` as written in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawEgress {
    #[serde(default)]
    allow: Vec<Rule>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    max_response: Option<String>,
    #[serde(default)]
    concurrency: Option<u32>,
}

impl RawEgress {
    /// Validates it; an error names the field (`egress.allow[1]`, ...).
    pub fn parse(self) -> Result<Egress, (String, String)> {
        let mut e = Egress::default();
        for (i, rule) in self.allow.iter().enumerate() {
            rule.validate()
                .map_err(|p| (format!("egress.allow[{i}]"), p))?;
        }
        e.allow = self.allow;
        if let Some(t) = self.timeout {
            e.timeout = humantime::parse_duration(&t)
                .ok()
                .filter(|d| !d.is_zero() && *d <= Duration::from_secs(600))
                .ok_or_else(|| {
                    let p = format!("{t:?} must be a duration above zero and at most 10m");
                    ("egress.timeout".to_string(), p)
                })?;
        }
        if let Some(m) = self.max_response {
            e.max_response = crate::quantity::parse_quantity(&m)
                .map_err(|p| ("egress.maxResponse".to_string(), p))?;
        }
        if let Some(c) = self.concurrency {
            if c == 0 {
                return Err(("egress.concurrency".into(), "must be at least 1".into()));
            }
            e.concurrency = c;
        }
        Ok(e)
    }
}

/// One allowed destination, as written in a manifest or by an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// A host name or address: exact (`api.example.com`, `127.0.0.1`), a
    /// subdomain wildcard (`*.example.com`, which does not match
    /// `example.com` itself), or `*` for any host.
    pub host: String,
    /// Allowed ports, each a number or a `"lo-hi"` range (a generic
    /// plugin such as `ray-job` allows `"1-65535"` and the operator
    /// narrows); empty means the scheme's default port only.
    #[serde(default)]
    pub ports: Vec<Ports>,
    /// Allowed methods, upper case; empty means GET only.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Allowed schemes; empty means https only.
    #[serde(default)]
    pub schemes: Vec<String>,
}

/// A port or an inclusive range of ports, written `8265` or `"1024-65535"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPorts", into = "RawPorts")]
pub struct Ports {
    /// The first port.
    pub lo: u16,
    /// The last port.
    pub hi: u16,
}

impl Ports {
    /// One port.
    pub fn one(p: u16) -> Self {
        Ports { lo: p, hi: p }
    }

    fn contains(self, p: u16) -> bool {
        (self.lo..=self.hi).contains(&p)
    }
}

/// How ports are written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum RawPorts {
    One(u16),
    Range(String),
}

impl TryFrom<RawPorts> for Ports {
    type Error = String;

    fn try_from(raw: RawPorts) -> Result<Self, String> {
        let (lo, hi) = match &raw {
            RawPorts::One(p) => (*p, *p),
            RawPorts::Range(s) => {
                let bad = || format!("ports {s:?} must be a port or a range \"lo-hi\"");
                let (lo, hi) = s.split_once('-').unwrap_or((s, s));
                let n = |t: &str| t.trim().parse::<u16>().map_err(|_| bad());
                (n(lo)?, n(hi)?)
            }
        };
        if lo == 0 || hi < lo {
            return Err(format!(
                "ports {lo}-{hi}: ports run from 1 to 65535, low to high"
            ));
        }
        Ok(Ports { lo, hi })
    }
}

impl From<Ports> for RawPorts {
    fn from(p: Ports) -> Self {
        if p.lo == p.hi {
            RawPorts::One(p.lo)
        } else {
            RawPorts::Range(format!("{}-{}", p.lo, p.hi))
        }
    }
}

impl fmt::Display for Ports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// A request the policy judges.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The host, lower case, without the port.
    pub host: &'a str,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
}

impl Rule {
    /// Checks the rule's own fields; the problem names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let h = &self.host;
        let body = h.strip_prefix("*.").unwrap_or(h);
        if h.is_empty() || (h != "*" && (body.is_empty() || body.contains(['*', '/', ':', ' ']))) {
            return Err(format!(
                "host {h:?} must be a name, an address, *.domain or *"
            ));
        }
        if let Some(m) = self.methods.iter().find(|m| !is_method(m)) {
            return Err(format!("method {m:?} is not an upper-case HTTP method"));
        }
        if let Some(s) = self
            .schemes
            .iter()
            .find(|s| !matches!(s.as_str(), "http" | "https"))
        {
            return Err(format!("scheme {s:?} must be http or https"));
        }
        if let Some(p) = self.ports.iter().find(|p| p.lo == 0 || p.hi < p.lo) {
            return Err(format!("ports {p} must run from 1 to 65535, low to high"));
        }
        Ok(())
    }

    fn matches(&self, r: &Request<'_>) -> bool {
        let scheme = if self.schemes.is_empty() {
            r.scheme == "https"
        } else {
            self.schemes.iter().any(|s| s == r.scheme)
        };
        let port = if self.ports.is_empty() {
            Some(r.port) == default_port(r.scheme)
        } else {
            self.ports.iter().any(|p| p.contains(r.port))
        };
        let method = if self.methods.is_empty() {
            r.method == "GET"
        } else {
            self.methods.iter().any(|m| m == r.method)
        };
        scheme && port && method && host_matches(&self.host, r.host)
    }
}

fn is_method(m: &str) -> bool {
    !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase())
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

pub(crate) fn host_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        _ if pattern == "*" => true,
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => host == pattern,
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin {plugin} may not {method} {url}: {why}")]
pub struct Denied {
    /// The plugin that asked.
    pub plugin: String,
    /// The method it asked for.
    pub method: String,
    /// The URL it asked for.
    pub url: String,
    /// Which list refused it.
    pub why: String,
}

/// The lists that decide a plugin's requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The manifest's `egress.allow`: empty allows nothing.
    pub manifest: Vec<Rule>,
    /// The operator's narrowing; `None` leaves the manifest's list as is.
    pub operator: Option<Vec<Rule>>,
}

impl Policy {
    /// Whether the rules in force (the operator's when given) let the
    /// plugin reach any host: where a credential without `hosts` would go
    /// is then wherever a workflow's config points the plugin.
    pub fn open(&self) -> bool {
        self.operator
            .as_deref()
            .unwrap_or(&self.manifest)
            .iter()
            .any(|r| r.host == "*")
    }

    /// Allows the request or says which list refused it.
    pub fn check(&self, plugin: &str, url: &str, r: &Request<'_>) -> Result<(), Denied> {
        let denied = |why: &str| Denied {
            plugin: plugin.into(),
            method: r.method.into(),
            url: url.into(),
            why: why.into(),
        };
        if !self.manifest.iter().any(|rule| rule.matches(r)) {
            return Err(denied(if self.manifest.is_empty() {
                "its manifest allows no outbound HTTP (egress.allow)"
            } else {
                "not in its manifest's egress.allow"
            }));
        }
        match &self.operator {
            Some(rules) if !rules.iter().any(|rule| rule.matches(r)) => {
                Err(denied("not in the operator's egress.allow for this plugin"))
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[String], d: &str| {
            if v.is_empty() {
                d.to_string()
            } else {
                v.join(",")
            }
        };
        let ports: Vec<String> = self.ports.iter().map(Ports::to_string).collect();
        write!(
            f,
            "{} {}://{}:{}",
            list(&self.methods, "GET"),
            list(&self.schemes, "https"),
            self.host,
            list(&ports, "default")
        )
    }
}

#[cfg(test)]
mod tests;
