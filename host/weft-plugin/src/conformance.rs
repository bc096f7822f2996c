//! Conformance checks every task plugin must pass, whatever its language:
//! what the controller relies on but the WIT types cannot say. Run by
//! `weft plugin test --conformance` and by the SDK examples' tests.
//!
//! - build-resource is deterministic for the same context (a re-run after a
//!   crash must find the resource it created, not build another);
//! - get-task-phase answers a phase for unknown and partial objects (the
//!   controller asks before the operator has written any status);
//! - the abort behaviour is declared (the host asked `properties` at load);
//! - outputs are JSON objects;
//! - what it builds is of a kind its manifest declares, in the workflow's
//!   namespace;
//! - every call stays within the manifest's deadline and memory.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::plugin::{CallError, TaskContext, TaskPlugin};

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it held.
    pub passed: bool,
    /// What was seen: the failure, or a note on a pass.
    pub detail: String,
}

/// Everything measured while checking.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The checks, in order.
    pub checks: Vec<Check>,
    /// The slowest call.
    pub slowest_call: Duration,
    /// The highest memory any call reached, in bytes.
    pub memory_peak: usize,
}

impl Report {
    /// Whether every check held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// Objects a plugin must answer a phase for without failing: nothing, the
/// bare resource, empty and odd statuses.
fn probes(built: Option<&Value>) -> Vec<(String, Value)> {
    let mut out = vec![
        ("an empty object".to_string(), json!({})),
        ("a null status".into(), json!({"status": null})),
        ("an empty status".into(), json!({"status": {}})),
        (
            "a status of the wrong shape".into(),
            json!({"status": {"phase": 42, "conditions": "none", "state": [], "applicationState": 7}}),
        ),
        (
            "an unknown state".into(),
            json!({"status": {"phase": "Warping", "state": "WARPING", "applicationState": {"state": "WARPING"},
                    "conditions": [{"type": "Bogus", "status": "Maybe"}]}}),
        ),
    ];
    if let Some(b) = built {
        out.push(("the built resource, no status yet".into(), b.clone()));
        let mut partial = b.clone();
        partial["status"] = json!({});
        out.push(("the built resource with an empty status".into(), partial));
    }
    out
}

/// Runs every check for the given task contexts (at least one: a plugin's
/// build-resource usually needs a real task config).
pub fn check(plugin: &TaskPlugin, tasks: &[TaskContext]) -> Report {
    let mut report = Report::default();
    let deadline = plugin.manifest().limits.deadline;
    let memory = plugin.manifest().limits.memory;
    let mut limits_broken = Vec::new();
    let timed = |report: &mut Report, took: Duration, peak: usize| {
        report.slowest_call = report.slowest_call.max(took);
        report.memory_peak = report.memory_peak.max(peak);
    };
    let mut limit_fault = |e: &CallError, what: &str| {
        if matches!(
            e,
            CallError::Deadline { .. }
                | CallError::OutOfMemory { .. }
                | CallError::StackOverflow { .. }
        ) {
            limits_broken.push(format!("{what}: {e}"));
        }
    };

    let mut builds = Vec::new();
    let (mut deterministic, mut kinds) = (Vec::new(), Vec::new());
    for (i, ctx) in tasks.iter().enumerate() {
        let what = format!("task {} ({})", i + 1, ctx.task_type);
        let t = Instant::now();
        let first = plugin.build_resource(ctx);
        let took = t.elapsed();
        let second = plugin.build_resource(ctx);
        match (first, second) {
            (Ok((a, sa)), Ok((b, sb))) => {
                timed(&mut report, took, sa.memory_peak.max(sb.memory_peak));
                if a != b {
                    deterministic.push(format!("{what}: two builds differ"));
                }
                builds.push(Some(a));
            }
            (Err(e), _) | (_, Err(e)) => {
                limit_fault(&e, &what);
                match &e {
                    CallError::Forbidden { .. } => kinds.push(format!("{what}: {e}")),
                    _ => deterministic.push(format!("{what}: build-resource failed: {e}")),
                }
                builds.push(None);
            }
        }
    }
    report.checks.push(Check {
        name: "build-resource is deterministic",
        passed: deterministic.is_empty(),
        detail: if deterministic.is_empty() {
            format!("{} task(s), each built twice, equal", tasks.len())
        } else {
            deterministic.join("; ")
        },
    });
    report.checks.push(Check {
        name: "declared kinds cover what it builds",
        passed: kinds.is_empty(),
        detail: if kinds.is_empty() {
            let declared: Vec<String> = plugin
                .manifest()
                .resources
                .iter()
                .map(ToString::to_string)
                .collect();
            format!("within {}", declared.join(", "))
        } else {
            kinds.join("; ")
        },
    });

    let (mut phase_failures, mut outputs_bad, mut probed) = (Vec::new(), Vec::new(), 0);
    for (ctx, built) in tasks.iter().zip(&builds) {
        for (what, observed) in probes(built.as_ref()) {
            probed += 1;
            let t = Instant::now();
            match plugin.get_task_phase(ctx, &observed) {
                // The host parses outputs into a JSON object or refuses the answer.
                Ok((_, stats)) => timed(&mut report, t.elapsed(), stats.memory_peak),
                Err(e) => {
                    limit_fault(&e, &what);
                    match &e {
                        CallError::InvalidOutput { problem, .. } if problem.contains("outputs") => {
                            outputs_bad.push(format!("{what}: {e}"))
                        }
                        _ => phase_failures.push(format!("{what}: {e}")),
                    }
                }
            }
        }
    }
    report.checks.push(Check {
        name: "get-task-phase answers unknown and partial objects",
        passed: phase_failures.is_empty(),
        detail: if phase_failures.is_empty() {
            format!("{probed} objects, a phase for each")
        } else {
            phase_failures.join("; ")
        },
    });
    report.checks.push(Check {
        name: "outputs are JSON objects",
        passed: outputs_bad.is_empty(),
        detail: if outputs_bad.is_empty() {
            "every answer's outputs were an object or absent".into()
        } else {
            outputs_bad.join("; ")
        },
    });
    let props = plugin.properties();
    report.checks.push(Check {
        name: "abort behaviour is declared",
        passed: true,
        detail: format!(
            "abort: {}, delete on finish: {}",
            serde_json::to_value(props.abort)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            props.delete_on_finish
        ),
    });
    report.checks.push(Check {
        name: "calls stay within the deadline and memory",
        passed: limits_broken.is_empty(),
        detail: if limits_broken.is_empty() {
            format!(
                "slowest {:?} of {:?}; peak memory {} of {} bytes",
                report.slowest_call, deadline, report.memory_peak, memory
            )
        } else {
            limits_broken.join("; ")
        },
    });
    report
}
