//! Expressions: `when` conditions and `${...}` in inputs, both CEL
//! (the cel crate, formerly cel-interpreter) — the language Kubernetes itself
//! uses for validation rules, so users meet one syntax.
//!
//! An expression sees `inputs` (the workflow's inputs), `nodes` (each
//! upstream node as `{phase, outputs}`) and, in an array node's task,
//! `item` and `index`. A string that is exactly one `${...}` takes the
//! expression's value with its type (a number stays a number); `${...}`
//! inside a longer string is interpolated as text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::{Context, Program};
use serde_json::{Map, Value};

/// What expressions can see.
#[derive(Debug, Default, Clone)]
pub struct Scope {
    /// The workflow's inputs.
    pub inputs: Map<String, Value>,
    /// Upstream nodes by id: `{"phase": ..., "outputs": {...}}`.
    pub nodes: Map<String, Value>,
    /// The array item, in an array node's task.
    pub item: Option<Value>,
    /// The array index.
    pub index: Option<usize>,
    /// The workflow's outcome, in exit handler nodes:
    /// `{phase, failures: [{node, message}], duration}`.
    pub workflow: Option<Value>,
}

/// How many compiled expressions [`compile`] keeps (cleared when full).
const COMPILED_ENTRIES: usize = 4096;

/// Compiles a CEL expression, or says why it is not one. Constructs the
/// cel crate cannot evaluate (message literals such as `Foo{}`, which it
/// answers with a panic) are refused here, so evaluation never meets them.
///
/// Programs are kept by source: every round resolves its nodes' `${...}`
/// again, and the cel crate's parser (ANTLR) took a tenth of a busy
/// controller's CPU compiling the same few expressions (docs/benchmarks.md,
/// the data plane's controller line).
pub fn compile(src: &str) -> Result<Arc<Program>, String> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<Program>>>> = OnceLock::new();
    let cache = COMPILED.get_or_init(Default::default);
    let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = lock().get(src) {
        return Ok(p.clone());
    }
    let program = Arc::new(compile_uncached(src)?);
    let mut kept = lock();
    if kept.len() >= COMPILED_ENTRIES {
        kept.clear();
    }
    kept.insert(src.to_string(), program.clone());
    Ok(program)
}

fn compile_uncached(src: &str) -> Result<Program, String> {
    too_deep(src)?;
    let program = guarded(src, || {
        Program::compile(src).map_err(|e| format!("invalid CEL {src:?}: {e}"))
    })?;
    unsupported(program.expression())
        .map(|what| Err(format!("invalid CEL {src:?}: {what} are not supported")))
        .unwrap_or(Ok(program))
}

/// Most brackets an expression may nest. The cel crate's parser breaks
/// (an arithmetic overflow in its recursion guard) on deep nesting that
/// fails to parse; no real condition comes near this.
const MAX_NESTING: usize = 32;

/// Refuses expressions nested deeper than [`MAX_NESTING`]. Brackets are
/// counted everywhere, in quotes too: the parser's view of an unbalanced
/// quote differs from any simple scan, and no real string needs 32
/// unclosed brackets.
fn too_deep(src: &str) -> Result<(), String> {
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
        return Err(format!(
            "invalid CEL {:?}: nested {max} deep; at most {MAX_NESTING}",
            src.chars().take(60).collect::<String>()
        ));
    }
    Ok(())
}

/// Runs `f`; a panic inside the cel crate (a construct it has no code for)
/// becomes an error naming the expression instead of a crashed round.
fn guarded<T>(src: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(format!("CEL {src:?} uses a construct Weft cannot evaluate")))
}

/// The first construct in `e` the cel crate cannot evaluate, if any.
fn unsupported(e: &cel::IdedExpr) -> Option<&'static str> {
    use cel::common::ast::{EntryExpr, Expr};
    let entries = |es: &[cel::common::ast::IdedEntryExpr]| {
        es.iter().find_map(|en| match &en.expr {
            EntryExpr::MapEntry(m) => unsupported(&m.key).or_else(|| unsupported(&m.value)),
            EntryExpr::StructField(_) => Some("message fields"),
        })
    };
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
        Expr::Map(m) => entries(&m.entries),
        Expr::Select(s) => unsupported(&s.operand),
        Expr::Ident(_) | Expr::Literal(_) => None,
    }
}

/// JSON as CEL sees it in Kubernetes and Argo: a whole number is an
/// `int` (a `uint` only past `i64::MAX`), any other number a `double`.
/// (The cel crate's serde path makes every non-negative number a `uint`,
/// and `uint + int` is an error: `outputs.num + 1` would fail.)
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
            let map: std::collections::HashMap<String, cel::Value> =
                m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

/// Evaluates a compiled expression in a scope, as JSON.
pub fn eval(program: &Program, src: &str, scope: &Scope) -> Result<Value, String> {
    let mut ctx = Context::default();
    ctx.add_variable_from_value("inputs", to_cel(&Value::Object(scope.inputs.clone())));
    ctx.add_variable_from_value("nodes", to_cel(&Value::Object(scope.nodes.clone())));
    if let Some(item) = &scope.item {
        ctx.add_variable_from_value("item", to_cel(item));
    }
    if let Some(index) = scope.index {
        ctx.add_variable_from_value("index", cel::Value::Int(index as i64));
    }
    if let Some(w) = &scope.workflow {
        ctx.add_variable_from_value("workflow", to_cel(w));
    }
    let v = guarded(src, || {
        program
            .execute(&ctx)
            .map_err(|e| format!("{src:?} failed: {e}"))
    })?;
    v.json()
        .map_err(|e| format!("{src:?} gave a value with no JSON form: {e:?}"))
}

/// Evaluates a `when` condition: it must give a boolean.
pub fn eval_bool(program: &Program, src: &str, scope: &Scope) -> Result<bool, String> {
    match eval(program, src, scope)? {
        Value::Bool(b) => Ok(b),
        other => Err(format!("{src:?} must give true or false, gave {other}")),
    }
}

/// A piece of a template string.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Expr(&'a str),
}

/// Splits a string into text and `${...}` expressions. Braces inside an
/// expression (CEL map literals) and quoted strings are respected.
fn pieces(s: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let body = &rest[start + 2..];
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        let mut end = None;
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match (quote, c) {
                (Some(_), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '{') => depth += 1,
                (None, '}') if depth == 0 => {
                    end = Some(i);
                    break;
                }
                (None, '}') => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else {
            return Err(format!("{s:?}: `${{` without its closing `}}`"));
        };
        let expr = body[..end].trim();
        if expr.is_empty() {
            return Err(format!("{s:?}: empty `${{}}`"));
        }
        out.push(Piece::Expr(expr));
        rest = &body[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// Every `${...}` expression in a JSON value (recursively), checked to be
/// valid CEL. Returns the expressions' sources, or every problem found.
pub fn template_exprs(v: &Value) -> Result<Vec<String>, Vec<String>> {
    let mut exprs = Vec::new();
    let mut problems = Vec::new();
    walk_strings(v, &mut |s| match pieces(s) {
        Ok(ps) => {
            for p in ps {
                if let Piece::Expr(e) = p {
                    if let Err(problem) = compile(e) {
                        problems.push(problem);
                    }
                    exprs.push(e.to_string());
                }
            }
        }
        Err(p) => problems.push(p),
    });
    if problems.is_empty() {
        Ok(exprs)
    } else {
        Err(problems)
    }
}

fn walk_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|v| walk_strings(v, f)),
        Value::Object(m) => m.values().for_each(|v| walk_strings(v, f)),
        _ => {}
    }
}

/// Resolves every `${...}` in a JSON value.
pub fn resolve(v: &Value, scope: &Scope) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => resolve_str(s, scope)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| resolve(v, scope))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, scope)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn resolve_str(s: &str, scope: &Scope) -> Result<Value, String> {
    if !s.contains("${") {
        return Ok(Value::String(s.to_string()));
    }
    let ps = pieces(s)?;
    if let [Piece::Expr(e)] = ps.as_slice() {
        return eval(&*compile(e)?, e, scope);
    }
    let mut out = String::new();
    for p in ps {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Expr(e) => match eval(&*compile(e)?, e, scope)? {
                Value::String(s) => out.push_str(&s),
                other => out.push_str(&other.to_string()),
            },
        }
    }
    Ok(Value::String(out))
}

/// The node ids an expression refers to as `nodes.<id>` or `nodes["<id>"]`.
pub fn node_refs(src: &str) -> Vec<String> {
    refs(src, "nodes")
}

/// The names an expression looks up in `root` (`inputs`, `nodes`) as
/// `root.<name>` or `root["<name>"]`.
pub fn refs(src: &str, root: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let bytes = src.as_bytes();
    let mut i = 0;
    while let Some(pos) = src[i..].find(root) {
        let at = i + pos;
        i = at + root.len();
        let before_ok = at == 0 || !is_ident(bytes[at - 1]);
        if !before_ok {
            continue;
        }
        let rest = &src[i..];
        if let Some(r) = rest.strip_prefix('.') {
            let id: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !id.is_empty() {
                refs.push(id);
            }
        } else if let Some(r) = rest.strip_prefix("[\"").or_else(|| rest.strip_prefix("['")) {
            let id: String = r.chars().take_while(|c| *c != '"' && *c != '\'').collect();
            refs.push(id);
        }
    }
    refs
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

#[cfg(test)]
mod tests;
