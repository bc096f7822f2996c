//! The task config, read field by field so that every mistake names its
//! field, and the `${inputs.<name>}` placeholders in what is sent.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use weft_plugin_sdk::PluginError;

/// The default `successCondition`: any 2xx answer.
pub const DEFAULT_SUCCESS: &str = "response.status >= 200 && response.status < 300";

/// The fields a task config may have.
const FIELDS: [&str; 6] = [
    "method",
    "url",
    "headers",
    "body",
    "successCondition",
    "outputs",
];

/// A task's config, as written (placeholders not yet substituted).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The method as written (default `GET`).
    pub method: String,
    /// The URL as written.
    pub url: String,
    /// Header names and values, in name order.
    pub headers: BTreeMap<String, String>,
    /// What to send, if anything.
    pub body: Option<Body>,
    /// CEL over `response` and `inputs`: whether the answer is a success.
    pub success_condition: String,
    /// Output name -> CEL over `response` and `inputs`.
    pub outputs: BTreeMap<String, String>,
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Sent as it is (after substitution), with no content type of its own.
    Text(String),
    /// Any other JSON value: sent as JSON, `content-type: application/json`
    /// unless the headers set one.
    Json(Value),
}

fn permanent(message: String) -> PluginError {
    PluginError::permanent(message)
}

fn string(config: &Map<String, Value>, field: &str) -> Result<Option<String>, PluginError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(permanent(format!(
            "{field} must be a string, found {other}"
        ))),
    }
}

fn string_map(
    config: &Map<String, Value>,
    field: &str,
) -> Result<BTreeMap<String, String>, PluginError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(permanent(format!(
                    "{field}.{k} must be a string, found {other}"
                ))),
            })
            .collect(),
        Some(other) => Err(permanent(format!(
            "{field} must be a map of strings, found {other}"
        ))),
    }
}

/// Reads a task config. Unknown fields and fields of the wrong type are
/// permanent errors naming them.
pub fn parse(config: &Value) -> Result<Config, PluginError> {
    let Value::Object(config) = config else {
        return Err(permanent(format!(
            "the task config must be a map with at least a url, found {config}"
        )));
    };
    if let Some(unknown) = config.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(permanent(format!(
            "unknown field {unknown:?} (an http task has {})",
            FIELDS.join(", ")
        )));
    }
    let url = string(config, "url")?
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| permanent("url is required".into()))?;
    let success_condition =
        string(config, "successCondition")?.unwrap_or_else(|| DEFAULT_SUCCESS.to_string());
    let body = match config.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Body::Text(s.clone())),
        Some(other) => Some(Body::Json(other.clone())),
    };
    Ok(Config {
        method: string(config, "method")?.unwrap_or_else(|| "GET".into()),
        url,
        headers: string_map(config, "headers")?,
        body,
        success_condition,
        outputs: string_map(config, "outputs")?,
    })
}

/// The request a config describes, its placeholders substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The method, upper case.
    pub method: String,
    /// The URL.
    pub url: String,
    /// Header names and values.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Option<Body>,
}

impl Config {
    /// Substitutes `${inputs.<name>}` in the method, URL, header values and
    /// body. An input the node does not have is a permanent error naming
    /// the field.
    pub fn resolve(&self, inputs: &Map<String, Value>) -> Result<Resolved, PluginError> {
        let text = |field: &str, s: &str| -> Result<String, PluginError> {
            Ok(match substitute(s, inputs, field)? {
                Value::String(s) => s,
                other => other.to_string(),
            })
        };
        let method = text("method", &self.method)?.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(permanent(format!(
                "method {method:?} is not an HTTP method"
            )));
        }
        let headers = self
            .headers
            .iter()
            .map(|(k, v)| Ok((k.clone(), text(&format!("headers.{k}"), v)?)))
            .collect::<Result<_, PluginError>>()?;
        let body = match &self.body {
            None => None,
            Some(Body::Text(s)) => Some(Body::Text(text("body", s)?)),
            Some(Body::Json(v)) => {
                let mut v = v.clone();
                substitute_all(&mut v, inputs, &mut "body".to_string())?;
                Some(Body::Json(v))
            }
        };
        Ok(Resolved {
            method,
            url: text("url", &self.url)?,
            headers,
            body,
        })
    }
}

/// A piece of a template string.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    /// Text to keep, including any `${...}` that is not an input.
    Text(&'a str),
    /// `${inputs.<name>}`: the name.
    Input(&'a str),
}

/// Splits a string into text and `${inputs.<name>}` placeholders (spaces
/// inside the braces allowed), as the k8s-resource plugin does.
fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_from = 0;
    let mut at = 0;
    while let Some(start) = s[at..].find("${").map(|i| at + i) {
        let Some(len) = s[start..].find('}') else {
            break;
        };
        let body = s[start + 2..start + len].trim();
        at = start + len + 1;
        if let Some(name) = body.strip_prefix("inputs.") {
            if start > text_from {
                out.push(Piece::Text(&s[text_from..start]));
            }
            out.push(Piece::Input(name.trim()));
            text_from = at;
        }
    }
    if text_from < s.len() {
        out.push(Piece::Text(&s[text_from..]));
    }
    out
}

/// One string with its placeholders replaced: a string that is exactly one
/// placeholder is the input's value with its type; otherwise text (inputs
/// that are not strings as JSON).
fn substitute(s: &str, inputs: &Map<String, Value>, field: &str) -> Result<Value, PluginError> {
    if !s.contains("${") {
        return Ok(Value::String(s.to_string()));
    }
    let lookup = |name: &str| {
        inputs.get(name).ok_or_else(|| {
            let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
            permanent(format!(
                "{field}: unknown input {name:?} in ${{inputs.{name}}} (the node's inputs: [{}])",
                known.join(", ")
            ))
        })
    };
    let ps = pieces(s);
    if let [Piece::Input(name)] = ps.as_slice() {
        return lookup(name).cloned();
    }
    let mut out = String::with_capacity(s.len());
    for p in &ps {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Input(name) => match lookup(name)? {
                Value::String(text) => out.push_str(text),
                other => out.push_str(&other.to_string()),
            },
        }
    }
    Ok(Value::String(out))
}

/// Replaces the placeholders in every string of a JSON value; `path` names
/// where `v` is, for errors.
fn substitute_all(
    v: &mut Value,
    inputs: &Map<String, Value>,
    path: &mut String,
) -> Result<(), PluginError> {
    match v {
        Value::String(s) => *v = substitute(s, inputs, path)?,
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                substitute_all(item, inputs, path)?;
                path.truncate(len);
            }
        }
        Value::Object(m) => {
            for (k, item) in m.iter_mut() {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                substitute_all(item, inputs, path)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}
