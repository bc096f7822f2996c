//! Workflow input declarations (the types; checking and binding values
//! is `crate::inputs`).

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The type of a workflow input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// A JSON string.
    String,
    /// A whole number (`5`, or `5.0`).
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON list.
    List,
}

impl InputType {
    /// The type a value has (`None` for null); a whole number is an integer.
    pub fn of(v: &Value) -> Option<InputType> {
        Some(match v {
            Value::Null => return None,
            Value::Bool(_) => InputType::Boolean,
            Value::Number(n) if n.is_f64() => InputType::Number,
            Value::Number(_) => InputType::Integer,
            Value::String(_) => InputType::String,
            Value::Array(_) => InputType::List,
            Value::Object(_) => InputType::Object,
        })
    }

    /// Whether `v` is of this type: integers are numbers too, and `5.0`
    /// is an integer (as in JSON Schema).
    pub fn accepts(self, v: &Value) -> bool {
        match (self, v) {
            (InputType::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            (t, v) => InputType::of(v) == Some(t) || (t == InputType::Number && v.is_number()),
        }
    }

    /// Reads a command-line value (`-p key=value`) as this type: a string
    /// stays as typed, anything else is read as JSON (`5`, `true`, `[1]`).
    pub fn parse_arg(self, raw: &str) -> Result<Value, String> {
        if self == InputType::String {
            return Ok(Value::String(raw.to_string()));
        }
        let v: Value =
            serde_json::from_str(raw).map_err(|_| format!("{raw:?} is not a valid {self}"))?;
        match self.accepts(&v) {
            true => Ok(v),
            false => Err(format!("{raw:?} is not a valid {self}")),
        }
    }
}

impl InputType {
    /// Some value of this type (validation compiles templates with it
    /// where a launch will give the value).
    pub fn example(self) -> Value {
        match self {
            InputType::String => Value::String(String::new()),
            InputType::Integer => 0.into(),
            InputType::Number => 0.5.into(),
            InputType::Boolean => false.into(),
            InputType::Object => Value::Object(Map::new()),
            InputType::List => Value::Array(Vec::new()),
        }
    }
}

impl fmt::Display for InputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Object => "object",
            InputType::List => "list",
        };
        f.write_str(s)
    }
}

/// A declared input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputDecl {
    /// Its type.
    #[serde(rename = "type")]
    pub input_type: InputType,
    /// The value when a launch gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Whether a launch must give a value; defaults to true when there is
    /// no default. An optional input without a value is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// What it is for (shown by `weft template get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One workflow input: a declaration, or a bare value that declares an
/// input of its type with itself as default. An object is a declaration
/// when it reads as one (a `type` of the names above and only declaration
/// keys); an object default is declared with `type: object`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InputSpec {
    /// `{type, default, required, description}`.
    Declared(InputDecl),
    /// A bare default.
    Value(Value),
}

impl InputSpec {
    /// The declared or implied type (`None` for a bare null).
    pub fn input_type(&self) -> Option<InputType> {
        match self {
            InputSpec::Declared(d) => Some(d.input_type),
            InputSpec::Value(v) => InputType::of(v),
        }
    }

    /// The default value.
    pub fn default_value(&self) -> Option<&Value> {
        match self {
            InputSpec::Declared(d) => d.default.as_ref(),
            InputSpec::Value(v) => Some(v),
        }
    }

    /// Whether a value must be given.
    pub fn required(&self) -> bool {
        match self {
            InputSpec::Declared(d) => d.required.unwrap_or(d.default.is_none()),
            InputSpec::Value(_) => false,
        }
    }

    /// This input with `value` as its default (what a launch binds).
    pub fn with_default(&self, value: Value) -> InputSpec {
        match self {
            InputSpec::Declared(d) => InputSpec::Declared(InputDecl {
                default: Some(value),
                ..d.clone()
            }),
            InputSpec::Value(_) => InputSpec::Value(value),
        }
    }
}

/// A workflow's input declarations, by name.
pub type Inputs = BTreeMap<String, InputSpec>;
