//! Array nodes: one task mapped over a list (Flyte's map task, Argo's
//! `withParam`), with their own parallelism and success threshold.

use serde_json::Value;

use crate::compile::{CheckContext, Kind, Problems};
use crate::expr;
use crate::nodes::task;
use crate::spec::{ArraySpec, NodeSpec};

/// The list, the limits and the item task.
pub fn check(n: &NodeSpec, a: &ArraySpec, cx: &CheckContext<'_>, p: &mut Problems) -> Kind {
    let id = Some(n.id.as_str());
    task::check_task(n, &a.task, "array.task", cx, p);
    match &a.over {
        Value::Array(_) => {}
        Value::String(s) if s.trim().starts_with("${") && s.trim().ends_with('}') => {}
        other => p.add(
            id,
            "array.over",
            format!("must be a list or a ${{...}} expression giving one, found {other}"),
        ),
    }
    if a.parallelism == Some(0) {
        p.add(
            id,
            "array.parallelism",
            "must be at least 1 (omit it for no limit)",
        );
    }
    if a.min_successes.is_some() && a.min_success_ratio.is_some() {
        p.add(id, "array", "set minSuccesses or minSuccessRatio, not both");
    }
    if let Some(r) = a.min_success_ratio
        && !(0.0..=1.0).contains(&r)
    {
        p.add(
            id,
            "array.minSuccessRatio",
            format!("{r} is not between 0 and 1"),
        );
    }
    if let Err(es) = expr::template_exprs(&a.over) {
        es.into_iter().for_each(|e| p.add(id, "array.over", e));
    }
    Kind::Array
}

/// `array.over`'s expressions.
pub fn expressions(a: &ArraySpec) -> Vec<(&'static str, String)> {
    expr::template_exprs(&a.over)
        .map(|es| es.into_iter().map(|e| ("array.over", e)).collect())
        .unwrap_or_default()
}
