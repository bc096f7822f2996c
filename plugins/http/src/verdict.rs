//! CEL over the response, the verdict it gives, and the meta that carries
//! the verdict from `create` to `get`.

use std::collections::HashMap;

use cel::{Context, Program};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use weft_plugin_sdk::http::Response;
use weft_plugin_sdk::{PhaseInfo, PluginError};

use crate::config::Config;

/// The most the host keeps of a web-API task's meta.
pub const MAX_META: usize = 4096;

/// Most characters of the response body quoted in a failure's message.
const BODY_EXCERPT: usize = 512;

/// Most brackets an expression may nest (as the host's `when`): the cel
/// crate's parser breaks on deeper nesting.
const MAX_NESTING: usize = 32;

/// One compiled expression and the field it came from.
pub struct Expr {
    field: String,
    src: String,
    program: Program,
}

/// The config's expressions, compiled.
pub struct Exprs {
    success: Expr,
    outputs: Vec<(String, Expr)>,
}

/// Compiles one expression; a mistake is permanent and names the field.
fn compile(field: String, src: &str) -> Result<Expr, PluginError> {
    let bad =
        |why: String| PluginError::permanent(format!("{field}: {src:?} is not valid CEL: {why}"));
    if src.trim().is_empty() {
        return Err(PluginError::permanent(format!("{field} is empty")));
    }
    let (mut depth, mut max) = (0usize, 0usize);
    for c in src.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if max > MAX_NESTING {
        return Err(bad(format!("nested {max} deep; at most {MAX_NESTING}")));
    }
    let program = Program::compile(src).map_err(|e| {
        bad(e
            .errors
            .iter()
            .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
            .collect::<Vec<_>>()
            .join("; "))
    })?;
    // The cel crate panics on message literals (`Foo{a: 1}`), and a panic
    // traps the component: refuse them here.
    if let Some(what) = unsupported(program.expression()) {
        return Err(bad(format!("{what} are not supported")));
    }
    Ok(Expr {
        field,
        src: src.to_string(),
        program,
    })
}

/// The first construct in `e` the cel crate cannot evaluate, if any.
fn unsupported(e: &cel::IdedExpr) -> Option<&'static str> {
    use cel::common::ast::{EntryExpr, Expr};
    match &e.expr {
        Expr::Struct(_) => Some("message literals (Type{...})"),
        Expr::Unspecified => Some("empty expressions"),
        Expr::Call(c) => c
            .target
            .as_deref()
            .and_then(unsupported)
            .or_else(|| c.args.iter().find_map(unsupported)),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .find_map(unsupported),
        Expr::List(l) => l.elements.iter().find_map(unsupported),
        Expr::Map(m) => m.entries.iter().find_map(|en| match &en.expr {
            EntryExpr::MapEntry(m) => unsupported(&m.key).or_else(|| unsupported(&m.value)),
            EntryExpr::StructField(_) => Some("message fields"),
        }),
        Expr::Select(s) => unsupported(&s.operand),
        Expr::Ident(_) | Expr::Literal(_) => None,
    }
}

impl Config {
    /// Compiles `successCondition` and every output: the first mistake is
    /// a permanent error naming its field (`outputs.total: ...`), before
    /// anything is sent.
    pub fn compile(&self) -> Result<Exprs, PluginError> {
        Ok(Exprs {
            success: compile("successCondition".into(), &self.success_condition)?,
            outputs: self
                .outputs
                .iter()
                .map(|(name, src)| Ok((name.clone(), compile(format!("outputs.{name}"), src)?)))
                .collect::<Result<_, PluginError>>()?,
        })
    }
}

/// JSON as CEL sees it in Kubernetes, Argo and Weft's `when`: a whole
/// number is an `int` (a `uint` only past `i64::MAX`), any other number a
/// `double`, so `response.json.count + 1` works.
pub fn to_cel(v: &Value) -> cel::Value {
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

/// `response` as the expressions see it: `status` (int), `headers` (lower
/// case names; a repeated header's values joined with ", "), `body` (text)
/// and `json` (the parsed body, or null when it is not JSON).
pub fn response_value(resp: &Response) -> Value {
    let mut headers = Map::new();
    for (name, value) in &resp.headers {
        let name = name.to_ascii_lowercase();
        match headers.get_mut(&name) {
            Some(Value::String(s)) => {
                s.push_str(", ");
                s.push_str(value);
            }
            _ => {
                headers.insert(name, Value::String(value.clone()));
            }
        }
    }
    json!({
        "status": resp.status,
        "headers": headers,
        "body": resp.text(),
        "json": resp.json::<Value>().unwrap_or(Value::Null),
    })
}

/// What `get` reports: carried in the meta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `METHOD URL`.
    pub request: String,
    /// The answer's status.
    pub status: u16,
    /// The verdict.
    pub verdict: Verdict,
}

/// The verdict on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum Verdict {
    /// `successCondition` held and every output evaluated.
    Success {
        /// The outputs.
        outputs: Map<String, Value>,
    },
    /// It did not.
    Failure {
        /// `SuccessConditionFailed`, `InvalidCondition`, `InvalidOutputs`
        /// or `OutputsTooLarge`.
        reason: String,
        /// The URL, the status and what failed.
        message: String,
        /// Whether a new attempt (a new request) may succeed: counted on
        /// the node's `retries`.
        retryable: bool,
    },
}

impl Meta {
    /// The meta as the host keeps it: JSON within [`MAX_META`] bytes. Outputs
    /// that do not fit fail the task for good instead; a message that does
    /// not fit is cut.
    pub fn to_json(mut self) -> String {
        let text = serde_json::to_string(&self).unwrap_or_default();
        if text.len() <= MAX_META {
            return text;
        }
        self.verdict = match self.verdict {
            Verdict::Success { outputs } => Verdict::Failure {
                reason: "OutputsTooLarge".into(),
                message: format!(
                    "{} answered {}, but its outputs are {} bytes as JSON, over the {MAX_META} bytes the host keeps of an http task's result: read less of the response (e.g. single fields of response.json)",
                    self.request,
                    self.status,
                    Value::Object(outputs).to_string().len()
                ),
                retryable: false,
            },
            failure => failure,
        };
        if let Verdict::Failure { message, .. } = &mut self.verdict {
            cut(message, MAX_META / 2);
        }
        cut(&mut self.request, MAX_META / 4);
        serde_json::to_string(&self).unwrap_or_default()
    }

    /// A meta `create` wrote.
    pub fn parse(meta: &str) -> Result<Meta, PluginError> {
        serde_json::from_str(meta).map_err(|e| {
            PluginError::permanent(format!("the meta {meta:?} is not an http task's: {e}"))
        })
    }

    /// The phase `get` answers.
    pub fn phase(&self) -> PhaseInfo {
        match &self.verdict {
            Verdict::Success { outputs } => PhaseInfo::success(Some(outputs.clone()))
                .with_message(format!("{} answered {}", self.request, self.status)),
            Verdict::Failure {
                reason,
                message,
                retryable: true,
            } => PhaseInfo::retryable(reason, message),
            Verdict::Failure {
                reason, message, ..
            } => PhaseInfo::permanent(reason, message),
        }
    }
}

/// Cuts `s` to at most `max` bytes, on a character boundary, marking the cut.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max.saturating_sub(3);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
}

impl Exprs {
    /// Judges an answer: `successCondition`, then the outputs.
    pub fn judge(&self, request: String, resp: &Response, inputs: &Map<String, Value>) -> Meta {
        let mut scope = Context::default();
        scope.add_variable_from_value("response", to_cel(&response_value(resp)));
        scope.add_variable_from_value("inputs", to_cel(&Value::Object(inputs.clone())));
        let status = resp.status;
        let failure = |reason: &str, why: String, retryable: bool| {
            let mut body = resp.text().into_owned();
            cut(&mut body, BODY_EXCERPT);
            let body = if body.trim().is_empty() {
                String::new()
            } else {
                format!("; the body: {body}")
            };
            Verdict::Failure {
                reason: reason.into(),
                message: format!("{request} answered {status}: {why}{body}"),
                retryable,
            }
        };
        let c = &self.success;
        let verdict = match c.program.execute(&scope) {
            Ok(cel::Value::Bool(true)) => self
                .outputs(&scope)
                .unwrap_or_else(|why| failure("InvalidOutputs", why, false)),
            Ok(cel::Value::Bool(false)) => failure(
                "SuccessConditionFailed",
                format!("{} {:?} is false", c.field, c.src),
                true,
            ),
            // The answer is not what the condition expects (a missing key
            // in an error page): not a success, and the next may differ.
            Err(e) => failure(
                "SuccessConditionFailed",
                format!("{} {:?} failed: {e}", c.field, c.src),
                true,
            ),
            Ok(other) => failure(
                "InvalidCondition",
                format!(
                    "{} {:?} must give true or false, gave {:?}",
                    c.field,
                    c.src,
                    other.type_of()
                ),
                false,
            ),
        };
        Meta {
            request,
            status,
            verdict,
        }
    }

    fn outputs(&self, scope: &Context) -> Result<Verdict, String> {
        let mut outputs = Map::new();
        for (name, e) in &self.outputs {
            let v = e
                .program
                .execute(scope)
                .map_err(|err| format!("{} {:?} failed: {err}", e.field, e.src))?;
            let v = v.json().map_err(|_| {
                format!(
                    "{} {:?} gave a {:?}, which has no JSON form",
                    e.field,
                    e.src,
                    v.type_of()
                )
            })?;
            outputs.insert(name.clone(), v);
        }
        Ok(Verdict::Success { outputs })
    }
}
