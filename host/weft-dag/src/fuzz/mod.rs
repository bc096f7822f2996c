//! Entry points for fuzzing what a user's bytes reach in this crate: the
//! Workflow spec reader, the validator and DAG compiler, and CEL / `${...}`
//! expressions. `fuzz/` (cargo-fuzz, coverage-guided, nightly) and
//! `tests/fuzz_smoke.rs` (a bounded mutation run in every `cargo test`)
//! both call these; neither may ever panic: every bad input must end as an
//! error value. [`harness`] is the bounded mutation runner the other
//! crates' smoke tests share (the plugin manifest reader, the dev
//! cluster's patch handlers).

pub mod harness;

use serde_json::{Value, json};

use crate::expr::{self, Scope};
use crate::{WorkflowSpec, compile};

/// Bytes as a Workflow spec (YAML, which JSON is too), validated and
/// compiled with every task type known, and every problem described.
pub fn workflow_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = serde_yaml::from_str::<WorkflowSpec>(text) else {
        return;
    };
    match compile(&spec, &|_| true) {
        Ok(c) => {
            // Walk what the scheduler walks.
            for &i in &c.order {
                let _ = (&c.nodes[i].id, &c.dependents[i]);
            }
        }
        Err(problems) => {
            let _ = crate::compile::describe(&problems);
        }
    }
}

/// A scope like a running workflow's, for expressions to read.
fn scope() -> Scope {
    let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
    Scope {
        inputs: obj(
            json!({"n": 41, "x": -1.5, "s": "text", "list": [1, "a", null], "m": {"k": true}}),
        ),
        nodes: obj(
            json!({"a": {"phase": "Succeeded", "outputs": {"num": 41, "big": 18446744073709551615u64}}}),
        ),
        item: Some(json!({"i": 1})),
        index: Some(3),
        workflow: None,
    }
}

/// Bytes as a CEL expression (compiled and evaluated) and as a string with
/// `${...}` templates (split, compiled, evaluated, interpolated).
pub fn expression(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let s = scope();
    if let Ok(p) = expr::compile(text) {
        let _ = expr::eval(&p, text, &s);
        let _ = expr::eval_bool(&p, text, &s);
    }
    let _ = expr::node_refs(text);
    let template = Value::String(text.to_string());
    let _ = expr::template_exprs(&template);
    let _ = expr::resolve(&template, &s);
}
