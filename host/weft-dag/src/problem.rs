//! What is wrong with a spec: one [`Problem`] each, collected so a user
//! sees them all. A leaf: compilation, inputs and templates all report
//! through it.

use std::fmt;

/// One thing wrong with a workflow spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The node it concerns, if any.
    pub node: Option<String>,
    /// The field, e.g. `dependsOn` or `retries.backoff`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(n) => write!(f, "node {n}: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// Joins problems into one message, one per line.
pub fn describe(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Problems found so far: every pass adds to them, so a user sees them all.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Adds one.
    pub fn add(&mut self, node: Option<&str>, field: &str, message: impl Into<String>) {
        self.0.push(Problem {
            node: node.map(str::to_string),
            field: field.to_string(),
            message: message.into(),
        });
    }
}

/// Why an input is named `true` or `false`: almost always a YAML 1.1
/// reader (kubectl's) that read a key such as `n`, `y`, `no` or `off` as a
/// boolean. Refused rather than run with the wrong name.
pub(crate) fn yaml11_boolean(name: &str) -> String {
    format!(
        "input named {name:?}: kubectl's YAML reader (YAML 1.1) turns keys such as n, y, yes, no, on and off into {name}; quote the name ('n') or choose another"
    )
}
