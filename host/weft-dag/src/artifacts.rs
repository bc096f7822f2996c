//! Task artifacts in the round: what a declaration may say, and an input
//! artifact's `from` resolved to the object it names. The bytes are the
//! controller's and the pod's business (`host/weft/src/store/`); here
//! artifacts are only references.

use std::collections::HashSet;

use serde_json::Value;

use crate::expr::{self, Scope};
use crate::spec::TaskSpec;
pub use crate::spec::artifacts::{
    ArtifactGc, ArtifactGcStrategy, ArtifactRef, ArtifactSource, InputArtifact, OutputArtifact,
    OutputParameter, ResolvedInput, TaskInputs, TaskOutputs,
};

/// The output name artifacts are reported under (`outputs.artifacts`).
pub const OUTPUTS_KEY: &str = "artifacts";

/// The directory the pod's side of the data plane owns in every container
/// of a task with artifacts; declared paths may not be under it.
pub const RESERVED_DIR: &str = "/weft/io";

/// What is wrong with a task's artifact and parameter declarations, as
/// `(field under the task, why)`.
pub fn problems(t: &TaskSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut paths = HashSet::new();
    let mut names = HashSet::new();
    for (i, a) in t.inputs.artifacts.iter().enumerate() {
        let at = format!("inputs.artifacts[{i}]");
        declared(&at, &a.name, &a.path, &mut names, &mut paths, &mut out);
        match (&a.from, &a.url) {
            (Some(_), Some(_)) | (None, None) => {
                out.push((at, "give exactly one of `from` and `url`".into()))
            }
            (Some(f), None) if !is_expression(f) => out.push((
                format!("{at}.from"),
                format!(
                    "{f:?} is not a ${{...}} expression (e.g. ${{nodes.x.outputs.artifacts.y}})"
                ),
            )),
            (None, Some(u)) if !(u.starts_with("https://") || u.starts_with("http://")) => {
                out.push((format!("{at}.url"), format!("{u:?} is not an http(s) URL")))
            }
            _ => {}
        }
    }
    let mut names = HashSet::new();
    for (i, a) in t.outputs.artifacts.iter().enumerate() {
        let at = format!("outputs.artifacts[{i}]");
        declared(&at, &a.name, &a.path, &mut names, &mut paths, &mut out);
    }
    let mut names = HashSet::new();
    for (i, p) in t.outputs.parameters.iter().enumerate() {
        let at = format!("outputs.parameters[{i}]");
        if p.name == OUTPUTS_KEY {
            out.push((
                format!("{at}.name"),
                format!("{OUTPUTS_KEY:?} is where output artifacts go; pick another name"),
            ));
            continue;
        }
        declared(&at, &p.name, &p.path, &mut names, &mut paths, &mut out);
    }
    out
}

fn is_expression(s: &str) -> bool {
    let s = s.trim();
    s.starts_with("${") && s.ends_with('}')
}

/// A name (unique among its kind) and an absolute path (unique in the task).
fn declared(
    at: &str,
    name: &str,
    path: &str,
    names: &mut HashSet<String>,
    paths: &mut HashSet<String>,
    out: &mut Vec<(String, String)>,
) {
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        out.push((
            format!("{at}.name"),
            format!("{name:?} is not a name (1 to 63 letters, digits, '-' and '_')"),
        ));
    } else if !names.insert(name.to_string()) {
        out.push((format!("{at}.name"), format!("{name:?} is declared twice")));
    }
    if let Some(why) = path_problem(path) {
        out.push((format!("{at}.path"), why));
    } else if !paths.insert(path.trim_end_matches('/').to_string()) {
        out.push((format!("{at}.path"), format!("{path:?} is used twice")));
    }
}

fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!("{path:?} is not an absolute path"));
    }
    if path.split('/').any(|c| c == "..") {
        return Some(format!("{path:?} has a '..' component"));
    }
    if path == "/" || path.trim_end_matches('/').is_empty() {
        return Some("the root directory cannot be an artifact".into());
    }
    if path == RESERVED_DIR || path.starts_with(&format!("{RESERVED_DIR}/")) {
        return Some(format!("{path:?} is under {RESERVED_DIR}, which Weft uses"));
    }
    None
}

/// The `from` expressions of a task's input artifacts, for the checks
/// every expression gets (declared inputs, dependencies).
pub fn expressions(t: &TaskSpec) -> impl Iterator<Item = String> + '_ {
    t.inputs
        .artifacts
        .iter()
        .filter_map(|a| a.from.as_deref())
        .flat_map(|f| expr::template_exprs(&Value::String(f.into())).unwrap_or_default())
}

/// The task's input artifacts with each `from` resolved in `scope`; the
/// error names the artifact and says what the expression gave instead.
pub fn resolve(t: &TaskSpec, scope: &Scope) -> Result<Vec<ResolvedInput>, String> {
    t.inputs
        .artifacts
        .iter()
        .map(|a| {
            let source = match (&a.from, &a.url) {
                (_, Some(u)) => ArtifactSource::Url(u.clone()),
                (Some(f), None) => ArtifactSource::Stored(stored(&a.name, f, scope)?),
                (None, None) => return Err(format!("input artifact {}: no source", a.name)),
            };
            Ok(ResolvedInput {
                name: a.name.clone(),
                path: a.path.clone(),
                source,
            })
        })
        .collect()
}

fn stored(name: &str, from: &str, scope: &Scope) -> Result<ArtifactRef, String> {
    let v = expr::resolve(&Value::String(from.into()), scope)
        .map_err(|e| format!("input artifact {name}: {from}: {e}"))?;
    serde_json::from_value::<ArtifactRef>(v.clone()).map_err(|_| {
        let mut shown = v.to_string();
        if shown.len() > 120 {
            shown = format!("{}...", &shown[..shown.floor_char_boundary(117)]);
        }
        format!(
            "input artifact {name}: {from} gives {shown}, not an artifact ({{key, digest, size, kind}})"
        )
    })
}

#[cfg(test)]
mod tests;
