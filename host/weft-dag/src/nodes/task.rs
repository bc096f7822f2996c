//! Task nodes: one task, run through the plugin that serves its type,
//! attempt after attempt on the two retry budgets.

use std::collections::HashSet;

use crate::compiled::{CheckContext, CompiledNode};
use crate::expr::Scope;
use crate::nodes::Handler;
use crate::problem::Problems;
use crate::round::{
    CacheRequest, Executor, NodeCx, Round, TaskObservation, TaskRequest, TaskState,
};
use crate::spec::{HeaderMount, MountAs, NodeSpec, SecretRef, TaskSpec};
use crate::status::{NodePhase, NodeStatus};

/// The task node handler.
pub struct Task;

impl Handler for Task {
    fn start<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            scope,
            ..
        } = cx;
        if !served_from_cache(r, spec, n, st, scope) {
            start_attempt(r, spec, n, st, scope);
        }
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
        drive_task(r, spec, n, st, scope);
    }

    fn abort<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            ..
        } = cx;
        let (Some(task), true) = (
            &spec.task,
            st.phase == NodePhase::Running && st.attempts > 0,
        ) else {
            return;
        };
        let empty = serde_json::Map::new();
        r.exec.abort(&TaskRequest {
            node_id: &n.id,
            item: None,
            attempt: st.attempts - 1,
            task,
            inputs: &empty,
            artifacts: &[],
            plugin: st.plugin.as_ref(),
            resource: st.resource.as_ref(),
        });
    }
}

pub(crate) fn start_attempt<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    r.begin_attempt(n, st);
    drive_task(r, spec, n, st, scope);
}

pub(crate) fn drive_task<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    let task = spec.task.as_ref().expect("a task node has a task");
    run_task(r, task, spec, n, st, scope, |r, n, st, obs| {
        if let (Some(cache), TaskState::Succeeded) = (&spec.cache, obs.state) {
            let plugin = obs.plugin.as_ref().or(st.plugin.as_ref());
            remember(r, spec, cache, plugin, scope, &obs);
        }
        r.apply(n, st, obs)
    });
}

/// A cached node whose result is in the cache: Succeeded with the
/// cached outputs, and nothing runs (no child is created).
pub(crate) fn served_from_cache<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) -> bool {
    let (Some(cache), Some(task)) = (&spec.cache, &spec.task) else {
        return false;
    };
    // Inputs that do not resolve fail in the attempt, with the reason.
    let (Ok(inputs), Ok(artifacts)) = (
        r.resolve_inputs(spec, scope),
        crate::artifacts::resolve(task, scope),
    ) else {
        return false;
    };
    let req = CacheRequest {
        node_id: &n.id,
        task,
        inputs: &inputs,
        artifacts: &artifacts,
        cache,
        plugin: None,
        now: r.input.now,
    };
    let Some(hit) = r.exec.cache_lookup(&req) else {
        return false;
    };
    match hit.outputs_ref {
        Some(r) => st.outputs_ref = Some(r),
        None => st.outputs = Some(hit.outputs),
    }
    st.cached = true;
    st.cached_from = Some(hit.workflow.clone());
    r.running = r.running.saturating_sub(1);
    let why = format!(
        "cached: the outputs of node {} of workflow {} ({})",
        hit.node, hit.workflow, hit.created_at
    );
    r.transition(&n.id, st, NodePhase::Succeeded, Some(why));
    true
}

/// Stores a successful cached task's outputs (failures never are).
fn remember<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    cache: &crate::cache::CacheSpec,
    plugin: Option<&crate::status::PluginRef>,
    scope: &Scope,
    obs: &TaskObservation,
) {
    let (Some(task), Ok(inputs)) = (&spec.task, r.resolve_inputs(spec, scope)) else {
        return;
    };
    let Ok(artifacts) = crate::artifacts::resolve(task, scope) else {
        return;
    };
    let empty = serde_json::Map::new();
    let req = CacheRequest {
        node_id: &spec.id,
        task,
        inputs: &inputs,
        artifacts: &artifacts,
        cache,
        plugin,
        now: r.input.now,
    };
    r.exec.cache_store(
        &req,
        obs.outputs.as_ref().unwrap_or(&empty),
        obs.outputs_ref.as_ref(),
    );
}

/// Observes (or starts) the current attempt of `task`, handing the
/// observation to `then`: a task node applies it, a dynamic node reads
/// the nodes its task generated.
pub(crate) fn run_task<E: Executor>(
    r: &mut Round<'_, E>,
    task: &TaskSpec,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
    then: impl FnOnce(&mut Round<'_, E>, &CompiledNode, &mut NodeStatus, TaskObservation),
) {
    let inputs = match r.resolve_inputs(spec, scope) {
        Ok(i) => i,
        Err(e) => return r.fail(&n.id, st, "InputError", format!("inputs: {e}")),
    };
    let artifacts = match crate::artifacts::resolve(task, scope) {
        Ok(a) => a,
        Err(e) => return r.fail(&n.id, st, "InputError", e),
    };
    let req = TaskRequest {
        node_id: &n.id,
        item: None,
        attempt: st.attempts.saturating_sub(1),
        task,
        inputs: &inputs,
        artifacts: &artifacts,
        plugin: st.plugin.as_ref(),
        resource: st.resource.as_ref(),
    };
    let obs = match r.timed_out(n, st) {
        Some(failed) => {
            r.exec.abort(&req);
            failed
        }
        None => r.exec.task(&req),
    };
    then(r, n, st, obs);
}

/// Checks a task (of a task node or an array node's items); `at` is its
/// field path (`task` or `array.task`).
pub fn check_task(n: &NodeSpec, t: &TaskSpec, at: &str, cx: &CheckContext<'_>, p: &mut Problems) {
    let id = Some(n.id.as_str());
    for (i, why) in secret_problems(&t.secrets) {
        p.add(id, &format!("{at}.secrets[{i}]"), why);
    }
    for (field, why) in crate::artifacts::problems(t) {
        p.add(id, &format!("{at}.{field}"), why);
    }
    let field = format!("{at}.type");
    if t.task_type.is_empty() {
        p.add(id, &field, "is empty");
    } else if !(cx.known_task_type)(&t.task_type) {
        p.add(
            id,
            &field,
            format!("no plugin serves task type {:?}", t.task_type),
        );
    }
}

/// What is wrong with a task's secrets, by index: Secret names are DNS
/// subdomains, keys what a Secret's data allows, variables C identifiers,
/// headers HTTP header names, and no variable, file or header is given
/// twice.
pub(crate) fn secret_problems(secrets: &[SecretRef]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut targets = HashSet::new();
    for (i, s) in secrets.iter().enumerate() {
        let subdomain = !s.name.is_empty()
            && s.name.len() <= 253
            && s.name.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !subdomain {
            out.push((i, format!("name {:?} is not a Secret name (a DNS subdomain: lower-case letters, digits, '-' and '.')", s.name)));
        }
        let key_ok = !s.key.is_empty()
            && s.key.len() <= 253
            && s.key != "."
            && s.key != ".."
            && s.key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
        if !key_ok {
            out.push((
                i,
                format!(
                    "key {:?} is not a Secret key (letters, digits, '-', '_' and '.')",
                    s.key
                ),
            ));
        }
        let target = match s.mount_as {
            MountAs::Env => {
                let var = s.env_var();
                let ident = var
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ident {
                    out.push((i, format!("envName {var:?} is not a variable name (letters, digits and '_', not starting with a digit)")));
                }
                format!("environment variable {var}")
            }
            MountAs::File => {
                if s.env_name.is_some() {
                    out.push((i, "envName is for mountAs: env; a file secret is at /etc/weft/secrets/NAME/KEY".into()));
                }
                format!("file {}", s.file_path())
            }
            MountAs::Header => {
                if s.env_name.is_some() {
                    out.push((i, "envName is for mountAs: env".into()));
                }
                match &s.header {
                    None => {
                        out.push((
                            i,
                            "mountAs: header needs header: {name, prefix?, hosts?}".into(),
                        ));
                        format!("header of secret {}", i)
                    }
                    Some(h) => {
                        out.extend(header_problems(h).into_iter().map(|p| (i, p)));
                        format!("header {}", h.name.to_ascii_lowercase())
                    }
                }
            }
        };
        if s.header.is_some() && s.mount_as != MountAs::Header {
            out.push((
                i,
                "header is for mountAs: header (a web-API task's request header)".into(),
            ));
        }
        if !targets.insert(target.clone()) {
            out.push((i, format!("the {target} is given twice")));
        }
    }
    out
}

/// What is wrong with a secret's request header: its name is an HTTP
/// token, and each host a name, an address or a `*.suffix` pattern.
fn header_problems(h: &HeaderMount) -> Vec<String> {
    let mut out = Vec::new();
    let token = !h.name.is_empty()
        && h.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
    if !token {
        out.push(format!(
            "header.name {:?} is not an HTTP header name",
            h.name
        ));
    }
    if h.prefix.chars().any(char::is_control) {
        out.push("header.prefix has a control character".into());
    }
    for (j, host) in h.hosts.iter().enumerate() {
        let name = host.strip_prefix("*.").unwrap_or(host);
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if !ok {
            out.push(format!(
                "header.hosts[{j}] {host:?} is not a host name, an address or a *.suffix pattern"
            ));
        }
    }
    out
}
