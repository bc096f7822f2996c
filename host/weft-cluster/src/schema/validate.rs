//! OpenAPI value validation of a custom resource, with kube-openapi's
//! checks and messages as apiextensions-apiserver turns them into field
//! errors (`spec.x: Invalid value: "string": spec.x in body must be of type
//! integer: "string"`). Unchanged values on update are not re-validated
//! (validation ratcheting, on by default since Kubernetes 1.30).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use super::{FieldError, child, go_float, go_value};

type Errs = Vec<FieldError>;

/// Validates a whole object; `metadata` is left to the metadata checks
/// (only its presence counts, for a root `required`).
pub(crate) fn validate_root(obj: &Value, old: Option<&Value>, s: &Value, errs: &mut Errs) {
    node(obj, old, s, "", errs);
}

fn flag(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool) == Some(true)
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError::new(
        path,
        "FieldValueInvalid",
        format!("Invalid value: {}: {detail}", go_value(v)),
    )
}

fn type_invalid(path: &str, shown: &str, detail: String) -> FieldError {
    FieldError::new(
        path,
        "FieldValueTypeInvalid",
        format!("Invalid value: {shown:?}: {detail}"),
    )
}

/// Validates one value; `old` is the value at the same path before an
/// update, whose equality skips the subtree.
fn node(v: &Value, old: Option<&Value>, s: &Value, path: &str, errs: &mut Errs) {
    if old == Some(v) {
        return;
    }
    if !type_ok(v, s, path, errs) {
        return;
    }
    if v.is_null() {
        return;
    }
    combinators(v, s, path, errs);
    match v {
        Value::String(st) => string(st, v, s, path, errs),
        Value::Number(_) => number(v, s, path, errs),
        Value::Array(a) => array(a, s, path, errs),
        Value::Object(m) => object(m, old, s, path, errs),
        Value::Bool(_) | Value::Null => {}
    }
    enumeration(v, s, path, errs);
}

/// JSON type of a decoded value as kube-openapi names it.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The declared types: `x-kubernetes-int-or-string` is integer or string.
fn declared(s: &Value) -> Vec<&str> {
    if flag(s, "x-kubernetes-int-or-string") {
        return vec!["integer", "string"];
    }
    s.get("type")
        .and_then(Value::as_str)
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect()
}

fn type_ok(v: &Value, s: &Value, path: &str, errs: &mut Errs) -> bool {
    let types = declared(s);
    if types.is_empty() {
        return true;
    }
    let joined = types.join(",");
    if v.is_null() {
        if flag(s, "nullable") {
            return true;
        }
        let msg = format!("{path} in body must be of type {joined}: \"null\"");
        errs.push(type_invalid(path, "null", msg));
        return false;
    }
    let got = json_type(v);
    let float_int = got == "number"
        && types.contains(&"integer")
        && v.as_f64().is_some_and(|f| f.fract() == 0.0);
    let int_float = got == "integer" && types.contains(&"number");
    if types.contains(&got) || float_int || int_float {
        return true;
    }
    let msg = format!("{path} in body must be of type {joined}: \"{got}\"");
    errs.push(type_invalid(path, got, msg));
    false
}

fn string(st: &str, v: &Value, s: &Value, path: &str, errs: &mut Errs) {
    let len = st.chars().count() as u64;
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        errs.push(FieldError::new(
            path,
            "FieldValueTooLong",
            format!("Too long: may not be longer than {max}"),
        ));
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        let detail = format!("{path} in body should be at least {min} chars long");
        errs.push(invalid(path, v, detail));
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && regex(p).is_some_and(|re| !re.is_match(st))
    {
        errs.push(invalid(
            path,
            v,
            format!("{path} in body should match '{p}'"),
        ));
    }
    if let Some(f) = s.get("format").and_then(Value::as_str)
        && !super::formats::valid(f, st)
    {
        let detail = format!("{path} in body must be of type {f}: {st:?}");
        errs.push(type_invalid(path, st, detail));
    }
}

/// Compiled patterns, kept: a CRD's few patterns are checked on every write.
pub(crate) fn regex(p: &str) -> Option<Arc<regex::Regex>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<regex::Regex>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    c.entry(p.to_string())
        .or_insert_with(|| regex::Regex::new(p).ok().map(Arc::new))
        .clone()
}

fn number(v: &Value, s: &Value, path: &str, errs: &mut Errs) {
    let f = v.as_f64().unwrap_or(f64::NAN);
    if s.get("format").and_then(Value::as_str) == Some("int32")
        && v.as_i64().is_some_and(|i| i32::try_from(i).is_err())
    {
        let detail = format!("Checked value must be of type integer with format int32 in {path}");
        errs.push(FieldError::new(
            "<nil>",
            "FieldValueInvalid",
            format!("Invalid value: \"\": {detail}"),
        ));
    }
    let excl = |k: &str| s.get(k).and_then(Value::as_bool) == Some(true);
    if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
        let (bad, word) = if excl("exclusiveMinimum") {
            (f <= min, "greater than")
        } else {
            (f < min, "greater than or equal to")
        };
        if bad {
            let detail = format!("{path} in body should be {word} {}", bound(v, min));
            errs.push(invalid(path, v, detail));
        }
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
        let (bad, word) = if excl("exclusiveMaximum") {
            (f >= max, "less than")
        } else {
            (f > max, "less than or equal to")
        };
        if bad {
            let detail = format!("{path} in body should be {word} {}", bound(v, max));
            errs.push(invalid(path, v, detail));
        }
    }
    if let Some(m) = s.get("multipleOf").and_then(Value::as_f64)
        && m > 0.0
        && (f / m).fract() != 0.0
    {
        let detail = format!("{path} in body should be a multiple of {}", bound(v, m));
        errs.push(invalid(path, v, detail));
    }
}

/// A bound printed as kube-openapi prints it: as an integer when the value
/// is one, else as a Go float.
fn bound(v: &Value, b: f64) -> String {
    if v.is_i64() || v.is_u64() {
        format!("{}", b as i64)
    } else {
        go_float(b)
    }
}

/// Items are not correlated with the old list (no list-type=map keys).
fn array(a: &[Value], s: &Value, path: &str, errs: &mut Errs) {
    if let Some(is) = s.get("items").filter(|i| i.is_object()) {
        for (i, item) in a.iter().enumerate() {
            node(item, None, is, &format!("{path}[{i}]"), errs);
        }
    }
    let n = a.len() as u64;
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        let detail = format!("{path} in body should have at least {min} items");
        errs.push(invalid(path, &Value::from(n), detail));
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        errs.push(FieldError::new(
            path,
            "FieldValueTooMany",
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
}

fn object(m: &Map<String, Value>, old: Option<&Value>, s: &Value, path: &str, errs: &mut Errs) {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(r) {
            errs.push(FieldError::new(
                &child(path, r),
                "FieldValueRequired",
                "Required value".into(),
            ));
        }
    }
    if flag(s, "x-kubernetes-embedded-resource") {
        for k in ["apiVersion", "kind"] {
            if m.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::new(
                    &child(path, k),
                    "FieldValueRequired",
                    "Required value: must not be empty".into(),
                ));
            }
        }
    }
    properties_count(m, s, path, errs);
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties").filter(|a| a.is_object());
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        if path.is_empty() && k == "metadata" {
            continue;
        }
        let Some(cs) = props.and_then(|p| p.get(k)).or(additional) else {
            continue;
        };
        let o = old.and_then(|o| o.get(k));
        node(&m[k], o, cs, &child(path, k), errs);
    }
}

fn properties_count(m: &Map<String, Value>, s: &Value, path: &str, errs: &mut Errs) {
    let n = m.len() as u64;
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && n < min
    {
        let detail = format!("{path} in body should have at least {min} properties");
        errs.push(invalid(path, &Value::from(n), detail));
    }
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && n > max
    {
        errs.push(FieldError::new(
            path,
            "FieldValueTooMany",
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
}

fn enumeration(v: &Value, s: &Value, path: &str, errs: &mut Errs) {
    let Some(values) = s.get("enum").and_then(Value::as_array) else {
        return;
    };
    if values.is_empty() || values.iter().any(|e| same(e, v)) {
        return;
    }
    let quoted: Vec<String> = values
        .iter()
        .map(|e| match e {
            Value::String(s) => format!("{s:?}"),
            other => format!("{:?}", other.to_string()),
        })
        .collect();
    errs.push(FieldError::new(
        path,
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {}: supported values: {}",
            go_value(v),
            quoted.join(", ")
        ),
    ));
}

/// JSON equality with 1 == 1.0, as Go's decoded numbers compare.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// `allOf`, `anyOf`, `oneOf` and `not`: value validations only (a
/// structural schema declares types and properties outside them).
fn combinators(v: &Value, s: &Value, path: &str, errs: &mut Errs) {
    for sub in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        node(v, None, sub, path, errs);
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let results: Vec<Errs> = any.iter().map(|sub| branch(v, sub, path)).collect();
        if !results.iter().any(Vec::is_empty) {
            errs.push(schema_error(
                path,
                "must validate at least one schema (anyOf)",
            ));
            errs.extend(results.into_iter().next().unwrap_or_default());
        }
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
        let ok = one
            .iter()
            .filter(|sub| branch(v, sub, path).is_empty())
            .count();
        if ok != 1 {
            errs.push(schema_error(
                path,
                "must validate one and only one schema (oneOf)",
            ));
        }
    }
    if let Some(not) = s.get("not")
        && branch(v, not, path).is_empty()
    {
        errs.push(schema_error(path, "must not validate the schema (not)"));
    }
}

fn branch(v: &Value, s: &Value, path: &str) -> Errs {
    let mut e = Vec::new();
    node(v, None, s, path, &mut e);
    e
}

/// kube-openapi reports combinator failures without a field name, so the
/// API server's cause has no field (`<nil>`), with the path as the value.
fn schema_error(path: &str, what: &str) -> FieldError {
    FieldError::new(
        "<nil>",
        "FieldValueInvalid",
        format!("Invalid value: []interface {{}}{{{path:?}}}: {path} {what}"),
    )
}

#[cfg(test)]
mod tests;
