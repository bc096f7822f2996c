//! CRD schemas enforced on custom resources as kube-apiserver's
//! apiextensions-apiserver enforces them: unknown fields pruned (and
//! reported or refused per `fieldValidation`), nulls and defaults as the
//! structural defaulting does, OpenAPI value validation worded as
//! kube-openapi words it, and `x-kubernetes-validations` CEL rules.
//!
//! Schemas are used as the CRD holds them (`serde_json::Value`), so what a
//! CRD declares is what is checked, with no intermediate model to drift.

mod cel;
mod defaults;
mod formats;
pub(crate) mod openapi;
mod prune;
mod validate;

use serde_json::Value;

use crate::status::ApiError;

pub(crate) use prune::{apply_unknown_fields, prune_object};

/// `?fieldValidation=`: what to do with fields the schema does not declare.
/// Without the parameter kube-apiserver warns (since 1.23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    /// Refuse the request (400, `strict decoding error`).
    Strict,
    /// Drop them and say so in `Warning` headers.
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query parameter as kube-apiserver does (absent is Warn).
    pub(crate) fn parse(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

pub(crate) use crate::status::FieldError;

/// Everything done to a custom resource after decoding and before storage:
/// nulls and defaults, then schema validation and CEL rules. `old` is the
/// stored object on updates (for ratcheting and transition rules).
pub(crate) fn default_and_validate(
    schema: &Value,
    obj: &mut Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    defaults::apply(obj, schema);
    let mut errs = Vec::new();
    validate::validate_root(obj, old, schema, &mut errs);
    if let Some(blocking) = blocking(&errs) {
        if cel::has_rules(schema) {
            errs.push(blocking);
        }
        return errs;
    }
    cel::check(obj, old, schema, "", &mut errs);
    errs
}

/// As kube-apiserver: CEL rules are not run on an object whose errors may
/// make their cost estimate wrong (wrong types, missing required fields,
/// unsupported values, too long or too many).
fn blocking(errs: &[FieldError]) -> Option<FieldError> {
    let blocks = errs.iter().any(|e| {
        matches!(
            e.reason,
            "FieldValueTypeInvalid"
                | "FieldValueRequired"
                | "FieldValueNotSupported"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
        )
    });
    blocks.then(|| {
        FieldError::new(
            "<nil>",
            "FieldValueInvalid",
            "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        )
    })
}

/// `a.b` for a property.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// How Go's `%v` prints a JSON number or other value in field errors.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => "\"null\"".into(),
        Value::Array(_) => format!("[]interface {{}}{}", go_literal(v)),
        Value::Object(_) => format!("map[string]interface {{}}{}", go_literal(v)),
    }
}

/// Go's `%#v` of decoded JSON, enough to recognise the value.
fn go_literal(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_elem).collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k:?}:{}", go_elem(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => go_value(other),
    }
}

fn go_elem(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => format!("{}", n),
        Value::Number(n) => go_number(n),
        Value::Array(_) => format!("[]interface {{}}{}", go_literal(v)),
        Value::Object(_) => format!("map[string]interface {{}}{}", go_literal(v)),
        other => go_value(other),
    }
}

/// Integers as they are; other numbers as Go's shortest `%v` (`1e+06`).
fn go_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    go_float(n.as_f64().unwrap_or(f64::NAN))
}

fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let exp = f.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", e.abs());
    }
    format!("{f}")
}
