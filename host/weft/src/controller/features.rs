//! `--feature-gates`, as Kubernetes components take them: `Name=true,
//! Other=false`, each gate alpha (off by default) or beta (on by
//! default). An unknown gate or a value other than true/false stops the
//! start, naming it.

use std::collections::BTreeMap;
use std::fmt;

/// A gate's maturity and default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Off unless asked for; may change or go away.
    Alpha,
    /// On unless turned off.
    Beta,
}

/// The gates this controller knows: name, stage, what it does.
pub const GATES: &[(&str, Stage, &str)] = &[
    (
        "IgnoreStatusUpdates",
        Stage::Beta,
        "a Workflow event whose only change is the status (the controller's own writes) does not trigger a reconcile (controller-runtime's GenerationChangedPredicate, keeping annotation, label, finalizer and deletion changes)",
    ),
    (
        "CoalesceStatusWrites",
        Stage::Beta,
        "a round's status waits up to --status-hold (2 s) to be written with the next change when its changes are minor (a running task's sub-phase or message) or it only started nodes or saw them succeed",
    ),
];

/// The gates' values: the defaults, overridden by the flag.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    set: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// Parses `Name=true,Other=false` (spaces allowed, empty is none).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut set = BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected Name=true or Name=false"))?;
            let name = name.trim();
            if !GATES.iter().any(|(n, _, _)| *n == name) {
                let known: Vec<&str> = GATES.iter().map(|(n, _, _)| *n).collect();
                return Err(format!(
                    "unknown feature gate {name:?} (known: {})",
                    known.join(", ")
                ));
            }
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                v => return Err(format!("{name}={v}: a gate is true or false")),
            };
            set.insert(name.to_string(), on);
        }
        Ok(FeatureGates { set })
    }

    /// Whether gate `name` is on.
    pub fn enabled(&self, name: &str) -> bool {
        match self.set.get(name) {
            Some(on) => *on,
            None => GATES
                .iter()
                .any(|(n, stage, _)| *n == name && *stage == Stage::Beta),
        }
    }
}

impl fmt::Display for FeatureGates {
    /// Every gate with its effective value, as the flag takes them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = GATES
            .iter()
            .map(|(n, _, _)| format!("{n}={}", self.enabled(n)))
            .collect();
        f.write_str(&all.join(","))
    }
}

#[cfg(test)]
mod tests;
