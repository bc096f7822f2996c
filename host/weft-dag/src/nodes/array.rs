//! Array nodes: one task mapped over a list (Flyte's map task, Argo's
//! `withParam`), with their own parallelism and success threshold.

use serde_json::{Map, Value};

use crate::compiled::{CheckContext, CompiledNode, Kind};
use crate::expr::{self, Scope};
use crate::nodes::{Handler, task};
use crate::problem::Problems;
use crate::round::{Executor, LockState, NodeCx, Round, TaskObservation, TaskRequest, TaskState};

use crate::spec::{ArraySpec, NodeSpec};
use crate::status::{ItemStatus, NodePhase, NodeStatus, parse_timestamp, timestamp_millis};

/// The array node handler.
pub struct Array;

impl Handler for Array {
    fn start<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            scope,
            ..
        } = cx;
        start_array(r, spec, n, st, scope);
    }

    fn drive<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            scope,
            ..
        } = cx;
        drive_array(r, spec, n, st, scope);
    }

    /// Stops every running item and closes the open ones.
    fn abort<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            ..
        } = cx;
        let Some(array) = &spec.array else { return };
        let empty = Map::new();
        for (idx, item) in st.items.iter_mut().enumerate() {
            if item.phase == NodePhase::Running && item.attempts > 0 {
                r.exec.abort(&TaskRequest {
                    node_id: &n.id,
                    item: Some(idx),
                    attempt: item.attempts - 1,
                    task: &array.task,
                    inputs: &empty,
                    artifacts: &[],
                    plugin: st.plugin.as_ref(),
                    resource: None,
                });
            }
            if !item.phase.is_terminal() {
                item.phase = NodePhase::Aborted;
            }
        }
    }
}

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

pub(crate) fn start_array<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    let array = spec.array.as_ref().expect("an array node has an array");
    let over = match expr::resolve(&array.over, scope) {
        Ok(Value::Array(items)) => items,
        Ok(other) => {
            return r.fail(
                &n.id,
                st,
                "InputError",
                format!("array.over gave {other}, not a list"),
            );
        }
        Err(e) => return r.fail(&n.id, st, "InputError", format!("array.over: {e}")),
    };
    // A retried workflow's reset items keep their attempt counts, so
    // their next attempts get new child names.
    let before = std::mem::take(&mut st.items);
    st.items = (0..over.len())
        .map(|i| ItemStatus {
            attempts: before.get(i).map_or(0, |b| b.attempts),
            ..Default::default()
        })
        .collect();
    st.outputs = Some(Map::from_iter([("items".to_string(), Value::Array(over))]));
    drive_array(r, spec, n, st, scope);
}

pub(crate) fn required(array: &ArraySpec, total: usize) -> usize {
    match (array.min_successes, array.min_success_ratio) {
        (Some(m), _) => (m as usize).min(total),
        (None, Some(r)) => ((r * total as f64).ceil() as usize).min(total),
        (None, None) => total,
    }
}

pub(crate) fn drive_array<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    let array = spec.array.as_ref().expect("an array node has an array");
    let now = r.input.now;
    let over: Vec<Value> = st
        .outputs
        .as_ref()
        .and_then(|o| o.get("items"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = st.items.len();
    let limit = array.parallelism.map_or(usize::MAX, |p| p as usize);
    let mut running = st
        .items
        .iter()
        .filter(|i| i.phase == NodePhase::Running)
        .count();
    let plugin = st.plugin.clone();
    let mut pinned = None;
    let pools = r.exec.pools(&array.task);
    let mut waiting: Option<(usize, String)> = None;
    for idx in 0..total {
        let item = &mut st.items[idx];
        let start = match item.phase {
            NodePhase::Pending => running < limit,
            NodePhase::Retrying => match parse_timestamp(item.retry_at.as_deref()) {
                Some(at) if at > now => {
                    r.out.wake(at);
                    false
                }
                _ => running < limit,
            },
            NodePhase::Running => false,
            _ => continue,
        };
        if !start && item.phase != NodePhase::Running {
            continue;
        }
        // Each item holds a slot of its task type's pool while it runs.
        if start && !pools.is_empty() {
            let claim = crate::schedule::item_claim(&n.id, idx);
            if let LockState::Waiting { message, .. } = r.exec.acquire(&claim, &pools) {
                let (count, _) = waiting.get_or_insert((0, message));
                *count += 1;
                continue;
            }
        }
        let mut item_scope = scope.clone();
        item_scope.item = over.get(idx).cloned();
        item_scope.index = Some(idx);
        let mut inputs = match r.resolve_inputs(spec, &item_scope) {
            Ok(i) => i,
            Err(e) => {
                item.phase = NodePhase::Failed;
                item.message = Some(format!("inputs: {e}"));
                continue;
            }
        };
        inputs
            .entry("item")
            .or_insert_with(|| over.get(idx).cloned().unwrap_or(Value::Null));
        inputs.entry("index").or_insert_with(|| idx.into());
        let artifacts = match crate::artifacts::resolve(&array.task, &item_scope) {
            Ok(a) => a,
            Err(e) => {
                item.phase = NodePhase::Failed;
                item.message = Some(e);
                continue;
            }
        };
        if start {
            item.attempts += 1;
            item.phase = NodePhase::Running;
            item.attempt_started_at = Some(timestamp_millis(now));
            item.retry_at = None;
            running += 1;
        }
        let req = TaskRequest {
            node_id: &n.id,
            item: Some(idx),
            attempt: item.attempts - 1,
            task: &array.task,
            inputs: &inputs,
            artifacts: &artifacts,
            plugin: plugin.as_ref(),
            resource: None,
        };
        let timed_out = match (
            n.timeout,
            parse_timestamp(item.attempt_started_at.as_deref()),
        ) {
            (Some(t), Some(s)) if now >= s + t => {
                r.exec.abort(&req);
                Some(format!(
                    "attempt {} exceeded its timeout of {}",
                    item.attempts,
                    humantime::format_duration(t)
                ))
            }
            (Some(t), Some(s)) => {
                r.out.wake(s + t);
                None
            }
            _ => None,
        };
        let obs = match timed_out {
            Some(m) => TaskObservation::failed(true, false, "TimedOut", &m),
            None => r.exec.task(&req),
        };
        if obs.plugin.is_some() {
            pinned = obs.plugin.clone();
        }
        match obs.state {
            TaskState::InProgress => {}
            TaskState::Succeeded => {
                running -= 1;
                item.phase = NodePhase::Succeeded;
                item.outputs = obs.outputs;
                item.message = None;
            }
            TaskState::Failed { retryable, system } => {
                running -= 1;
                item.message = obs.message;
                let (mut u, mut s) = (item.user_failures, item.system_failures);
                let next = r.count_failure(n.retries, &mut u, &mut s, retryable, system);
                item.user_failures = u;
                item.system_failures = s;
                match next {
                    Some(delay) => {
                        item.phase = NodePhase::Retrying;
                        item.retry_at = Some(timestamp_millis(now + delay));
                        r.out.wake(now + delay);
                    }
                    None => item.phase = NodePhase::Failed,
                }
            }
        }
    }
    if pinned.is_some() && st.plugin.is_none() {
        st.plugin = pinned;
    }
    note_waiting(st, waiting);
    let succeeded = st
        .items
        .iter()
        .filter(|i| i.phase == NodePhase::Succeeded)
        .count();
    let open = st.items.iter().filter(|i| !i.phase.is_terminal()).count();
    let needed = required(array, total);
    st.task_phase = Some(format!("{succeeded}/{total} items succeeded"));
    if succeeded >= needed && open == 0 || succeeded + open < needed {
        if open > 0 {
            // Cannot reach the minimum any more: stop what still runs.
            let keep = st.phase;
            st.phase = NodePhase::Running;
            let scope = Scope::default();
            crate::nodes::abort(NodeCx {
                round: r,
                spec,
                node: n,
                status: st,
                scope: &scope,
            });
            st.phase = keep;
        }
        r.running = r.running.saturating_sub(1);
        let results: Vec<Value> = st
            .items
            .iter()
            .map(|i| i.outputs.clone().map_or(Value::Null, Value::Object))
            .collect();
        if succeeded >= needed {
            st.outputs = Some(Map::from_iter([(
                "results".to_string(),
                Value::Array(results),
            )]));
            r.transition(
                &n.id,
                st,
                NodePhase::Succeeded,
                Some(format!("{succeeded} of {total} items succeeded")),
            );
        } else {
            let msg = format!("{succeeded} of {total} items succeeded, {needed} needed");
            st.reason = Some("MinSuccessesNotMet".into());
            r.transition(&n.id, st, NodePhase::Failed, Some(msg.clone()));
            r.node_failed(&n.id, &msg);
        }
    }
}

/// What a running array says while items wait for their pool's slots
/// (`3 items waiting for pool/pod, ...`), cleared once none waits.
fn note_waiting(st: &mut NodeStatus, waiting: Option<(usize, String)>) {
    const MARK: &str = " waiting for pool/";
    let ours = st.message.as_deref().is_some_and(|m| m.contains(MARK));
    match waiting {
        Some((count, message)) => {
            let what = if count == 1 { "item" } else { "items" };
            st.message = Some(format!("{count} {what} {message}"));
        }
        None if ours => st.message = None,
        None => {}
    }
}
