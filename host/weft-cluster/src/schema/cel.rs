//! `x-kubernetes-validations`: CEL rules evaluated with the `cel` crate
//! (the one weft-dag uses). Supported: `rule` with `self`, transition rules
//! with `oldSelf` (evaluated on updates where the old value exists at the
//! same path through properties and map keys), `message`,
//! `messageExpression`, `reason` and `fieldPath`; the crate's standard
//! functions plus `matches`. Not supported: Kubernetes' CEL libraries
//! (`quantity`, `url`, `isSorted`, list/set extensions...), cost limits,
//! `optionalOldSelf`, and correlating list items (list-type=map) for
//! `oldSelf`. Rules are compiled when they run, not when the CRD is
//! written, so a rule that does not compile refuses objects instead.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::{Context, Program};
use serde_json::Value;

use super::{FieldError, child};

/// Whether any node of the schema has rules (then a blocked evaluation is
/// worth reporting).
pub(crate) fn has_rules(s: &Value) -> bool {
    match s {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

/// Evaluates every rule of `s` and its children against `v`.
pub(crate) fn check(
    v: &Value,
    old: Option<&Value>,
    s: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if v.is_null() {
        return;
    }
    for rule in s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(e) = run_rule(rule, v, old, s, path) {
            errs.push(e);
        }
    }
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, cv) in m {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    check(cv, old.and_then(|o| o.get(k)), cs, &child(path, k), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    check(item, None, is, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

/// One rule; `None` when it holds or does not apply.
fn run_rule(
    rule: &Value,
    v: &Value,
    old: Option<&Value>,
    s: &Value,
    path: &str,
) -> Option<FieldError> {
    let src = rule.get("rule").and_then(Value::as_str)?;
    let transition = src.contains("oldSelf");
    // Transition rules need an old value; other rules ratchet: an
    // unchanged value is not checked again.
    if (transition && old.is_none()) || (!transition && old == Some(v)) {
        return None;
    }
    let ctx = context(v, old.filter(|_| transition));
    let detail = match eval(src, &ctx) {
        Ok(Value::Bool(true)) => return None,
        Ok(Value::Bool(false)) => message(rule, src, &ctx),
        Ok(other) => format!("{src}: the rule gave {other}, not a bool"),
        Err(e) => format!("{src}: {e}"),
    };
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(fp) if !fp.is_empty() => child(path, fp.trim_start_matches('.')),
        _ => path.to_string(),
    };
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let reason = rule.get("reason").and_then(Value::as_str);
    Some(field_error(&field, reason, ty, detail))
}

fn field_error(field: &str, reason: Option<&str>, ty: &str, detail: String) -> FieldError {
    let (reason, message) = match reason {
        Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        Some("FieldValueRequired") => ("FieldValueRequired", format!("Required value: {detail}")),
        Some("FieldValueDuplicate") => (
            "FieldValueDuplicate",
            format!("Duplicate value: {ty:?}: {detail}"),
        ),
        _ => (
            "FieldValueInvalid",
            format!("Invalid value: {ty:?}: {detail}"),
        ),
    };
    FieldError::new(field, reason, message)
}

/// `messageExpression` when it gives a non-empty string, else `message`,
/// else `failed rule: RULE`, as kube-apiserver chooses.
fn message(rule: &Value, src: &str, ctx: &Context<'_>) -> String {
    if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
        && let Ok(Value::String(m)) = eval(expr, ctx)
        && !m.trim().is_empty()
    {
        return m;
    }
    match rule.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed rule: {}", src.trim()),
    }
}

fn context(v: &Value, old: Option<&Value>) -> Context<'static> {
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(v));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    ctx.add_function(
        "matches",
        |This(this): This<Arc<String>>, re: Arc<String>| -> bool {
            super::validate::regex(&re).is_some_and(|r| r.is_match(&this))
        },
    );
    ctx
}

fn eval(src: &str, ctx: &Context<'_>) -> Result<Value, String> {
    let program = Program::compile(src).map_err(|e| format!("compilation failed: {e}"))?;
    let out = program.execute(ctx).map_err(|e| e.to_string())?;
    out.json().map_err(|e| format!("{e:?}"))
}

/// JSON as Kubernetes' CEL sees it: whole numbers are `int`, other
/// numbers `double` (the crate's serde path would make them `uint`).
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(s.clone().into()),
        Value::Array(a) => cel::Value::List(a.iter().map(to_cel).collect::<Vec<_>>().into()),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> =
                m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

#[cfg(test)]
mod tests;
