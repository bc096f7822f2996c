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

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::compile::Problem;

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
            out.push(problem(name, crate::compile::yaml11_boolean(name)));
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
mod tests {
    use super::*;
    use serde_json::json;

    fn decls(v: Value) -> Inputs {
        serde_json::from_value(v).unwrap()
    }

    fn messages(p: Vec<Problem>) -> Vec<String> {
        p.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn bare_values_and_declarations_read_apart() {
        let d = decls(json!({
            "who": "world",
            "count": {"type": "integer", "description": "how many"},
            "point": {"x": 1, "type": "integer"},
            "conf": {"type": "object", "default": {"type": "string"}}
        }));
        assert_eq!(d["who"].input_type(), Some(InputType::String));
        assert!(matches!(d["count"], InputSpec::Declared(_)));
        assert!(d["count"].required());
        // An object with other keys is a value, not a declaration.
        assert!(matches!(d["point"], InputSpec::Value(_)));
        assert_eq!(d["conf"].default_value(), Some(&json!({"type": "string"})));
    }

    #[test]
    fn missing_and_mistyped_inputs_are_named() {
        let d = decls(json!({
            "count": {"type": "integer"},
            "name": {"type": "string", "default": "x"},
            "ratio": {"type": "number", "default": 0.5},
        }));
        let err = messages(
            bind(&d, &Map::new(), &Map::new(), "template t")
                .map(|b| values(&b))
                .unwrap()
                .unwrap_err(),
        );
        assert_eq!(err, ["inputs.count: required input (integer) is missing"]);
        let given = json!({"count": "five", "ratio": 2, "extra": 1});
        let err =
            messages(bind(&d, given.as_object().unwrap(), &Map::new(), "template t").unwrap_err());
        assert_eq!(
            err,
            [
                "inputs.count: expected integer, got string \"five\"",
                "inputs.extra: is not an input of template t (it declares: count, name, ratio)"
            ]
        );
        let fixed = json!({"name": "prod"});
        let given = json!({"count": 3, "name": "dev"});
        let err = messages(
            bind(
                &d,
                given.as_object().unwrap(),
                fixed.as_object().unwrap(),
                "template t",
            )
            .unwrap_err(),
        );
        assert_eq!(
            err,
            ["inputs.name: is fixed by template t to \"prod\"; it cannot be set"]
        );
        let given = json!({"count": 3.0, "ratio": 2});
        let bound = bind(
            &d,
            given.as_object().unwrap(),
            fixed.as_object().unwrap(),
            "t",
        )
        .unwrap();
        let v = values(&bound).unwrap();
        assert_eq!(
            Value::Object(v),
            json!({"count": 3.0, "name": "prod", "ratio": 2})
        );
    }

    #[test]
    fn declarations_are_checked() {
        let d = decls(json!({
            "a": {"type": "boolean", "default": "yes"},
            "b": {"type": "list", "default": [1], "required": true},
            "false": 1
        }));
        let p = messages(check(&d));
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(
            p[0].starts_with("inputs.a: default is string \"yes\", not a boolean"),
            "{p:#?}"
        );
        assert!(
            p[1].starts_with("inputs.b: is required and has a default"),
            "{p:#?}"
        );
        assert!(p[2].contains("kubectl's YAML reader"), "{p:#?}");
    }

    #[test]
    fn command_line_values_read_by_type() {
        assert_eq!(InputType::String.parse_arg("5").unwrap(), json!("5"));
        assert_eq!(InputType::Integer.parse_arg("5").unwrap(), json!(5));
        assert_eq!(InputType::List.parse_arg("[1, 2]").unwrap(), json!([1, 2]));
        assert_eq!(
            InputType::Integer.parse_arg("five").unwrap_err(),
            "\"five\" is not a valid integer"
        );
        assert!(InputType::Boolean.parse_arg("1").is_err());
    }
}
