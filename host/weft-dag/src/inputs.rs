//! Workflow inputs: what a workflow declares, the values a launch binds to
//! them, and the type checks between the two (Flyte's workflow interface
//! and launch plan inputs, Argo's `arguments.parameters`).
//!
//! An input is declared as `{type, default, required, description}`, or
//! given as a bare value, which declares an input of that value's type with
//! that default (so `inputs: {who: world}` keeps working). A workflow runs
//! with each input's launch value, else its default; a required input
//! without either, a value of the wrong type, a value for an input that is
//! not declared and a value for a template's fixed input are refused, each
//! naming the input.

use serde_json::{Map, Value};

use crate::problem::Problem;

pub use crate::spec::inputs::{InputDecl, InputSpec, InputType, Inputs};

fn problem(name: &str, message: String) -> Problem {
    Problem {
        node: None,
        field: format!("inputs.{name}"),
        message,
    }
}

/// Describes a value for messages: its type and, when short, itself.
fn describe(v: &Value) -> String {
    let ty = InputType::of(v).map_or("null".to_string(), |t| t.to_string());
    let text = v.to_string();
    match text.len() <= 40 {
        true => format!("{ty} {text}"),
        false => ty,
    }
}

/// What is wrong with the declarations themselves: defaults of the wrong
/// type, `required` with a default, names a YAML 1.1 reader made up.
pub fn check(decls: &Inputs) -> Vec<Problem> {
    let mut out = Vec::new();
    for (name, spec) in decls {
        if name == "true" || name == "false" {
            out.push(problem(name, crate::problem::yaml11_boolean(name)));
        }
        let InputSpec::Declared(d) = spec else {
            continue;
        };
        if let Some(v) = &d.default
            && !d.input_type.accepts(v)
        {
            out.push(problem(
                name,
                format!(
                    "default is {}, not a {} as declared",
                    describe(v),
                    d.input_type
                ),
            ));
        }
        if d.required == Some(true) && d.default.is_some() {
            out.push(problem(
                name,
                "is required and has a default; drop one of them".into(),
            ));
        }
    }
    out
}

/// The values a workflow runs with: each input's default (launch values
/// were bound as defaults by [`bind`]); a required input without one is a
/// problem naming it.
pub fn values(decls: &Inputs) -> Result<Map<String, Value>, Vec<Problem>> {
    let mut out = Map::new();
    let mut problems = Vec::new();
    for (name, spec) in decls {
        match spec.default_value() {
            Some(v) => {
                out.insert(name.clone(), v.clone());
            }
            None if spec.required() => {
                let ty = spec.input_type().map_or("any".into(), |t| t.to_string());
                problems.push(problem(name, format!("required input ({ty}) is missing")));
            }
            None => {}
        }
    }
    match problems.is_empty() {
        true => Ok(out),
        false => Err(problems),
    }
}

/// Binds a launch's values to declarations: each given value becomes its
/// input's default after its type is checked. `fixed` holds the values a
/// template fixes (a launch may not set them); `source` names the
/// declarations in messages (e.g. `template etl`).
pub fn bind(
    decls: &Inputs,
    given: &Map<String, Value>,
    fixed: &Map<String, Value>,
    source: &str,
) -> Result<Inputs, Vec<Problem>> {
    let mut out = decls.clone();
    let mut problems = Vec::new();
    let declared = || decls.keys().cloned().collect::<Vec<_>>().join(", ");
    let given_only = given.iter().filter(|(name, _)| {
        let is_fixed = fixed.contains_key(*name);
        if is_fixed {
            let to = &fixed[*name];
            problems.push(problem(
                name,
                format!("is fixed by {source} to {to}; it cannot be set"),
            ));
        }
        !is_fixed
    });
    let all: Vec<(&String, &Value)> = fixed.iter().chain(given_only).collect();
    for (name, v) in all {
        let Some(spec) = decls.get(name) else {
            problems.push(problem(
                name,
                format!("is not an input of {source} (it declares: {})", declared()),
            ));
            continue;
        };
        if let Some(t) = spec.input_type()
            && !t.accepts(v)
        {
            problems.push(problem(name, format!("expected {t}, got {}", describe(v))));
            continue;
        }
        out.insert(name.clone(), spec.with_default(v.clone()));
    }
    match problems.is_empty() {
        true => Ok(out),
        false => Err(problems),
    }
}

#[cfg(test)]
mod tests;
