use super::*;
use serde_json::json;

fn scope() -> Scope {
    Scope {
        inputs: json!({"items": [1, 2, 3], "name": "x"})
            .as_object()
            .unwrap()
            .clone(),
        nodes: json!({"fetch": {"phase": "Succeeded", "outputs": {"rows": 42}}})
            .as_object()
            .unwrap()
            .clone(),
        item: Some(json!({"k": "v"})),
        index: Some(2),
        workflow: None,
    }
}

/// What Argo and Flyte users write: arithmetic, comparisons, string and
/// list functions over inputs and outputs of every JSON type.
#[test]
fn json_numbers_are_cel_ints_and_doubles() {
    let s = Scope {
            inputs: json!({"n": 41, "neg": -3, "ratio": 0.5, "name": "wf", "tags": ["a", "b"], "on": true, "cfg": {"k": 2}})
                .as_object()
                .unwrap()
                .clone(),
            nodes: json!({"a": {"phase": "Succeeded", "outputs": {"num": 41, "big": 9007199254740993u64}}})
                .as_object()
                .unwrap()
                .clone(),
            item: Some(json!(7)),
            index: Some(1),
            workflow: None,
        };
    for (expr, want) in [
        ("${nodes.a.outputs.num + 1}", json!(42)),
        ("${inputs.n * 2 - inputs.neg}", json!(85)),
        ("${inputs.n / 2}", json!(20)),
        ("${inputs.n % 5}", json!(1)),
        ("${inputs.ratio * 4.0}", json!(2.0)),
        ("${double(inputs.n) * inputs.ratio}", json!(20.5)),
        ("${nodes.a.outputs.num > 40 && inputs.neg < 0}", json!(true)),
        ("${inputs.n == 41}", json!(true)),
        ("${item + index}", json!(8)),
        ("${inputs.cfg.k + 1}", json!(3)),
        ("${size(inputs.tags) + 1}", json!(3)),
        ("${'b' in inputs.tags}", json!(true)),
        ("${inputs.name + '-' + string(inputs.n)}", json!("wf-41")),
        ("${inputs.name.startsWith('w') && inputs.on}", json!(true)),
        ("${inputs.tags.map(t, t + '!')}", json!(["a!", "b!"])),
        ("${nodes.a.outputs.big}", json!(9007199254740993u64)),
    ] {
        assert_eq!(resolve(&json!(expr), &s).unwrap(), want, "{expr}");
    }
}

/// Found by fuzzing: the cel crate's parser overflows on deep nesting.
#[test]
fn deep_nesting_is_refused_before_the_parser() {
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    let e = compile(&deep).unwrap_err();
    assert!(e.contains("nested 40 deep; at most 32"), "{e}");
    assert!(compile(&format!("{}1{}", "(".repeat(30), ")".repeat(30))).is_ok());
}

/// Found by fuzzing: the cel crate panics on message literals.
#[test]
fn constructs_cel_cannot_evaluate_are_refused_not_panicked() {
    let e = compile("inputs{}.who").unwrap_err();
    assert!(e.contains("message literals"), "{e}");
    let e = resolve(&json!("x ${[1, Foo{a: 1}]}"), &scope()).unwrap_err();
    assert!(e.contains("not supported"), "{e}");
}

#[test]
fn a_whole_expression_keeps_its_type() {
    let v = resolve(&json!("${nodes.fetch.outputs.rows}"), &scope()).unwrap();
    assert_eq!(v, json!(42));
    let v = resolve(&json!("${inputs.items}"), &scope()).unwrap();
    assert_eq!(v, json!([1, 2, 3]));
}

#[test]
fn embedded_expressions_are_interpolated() {
    let v = resolve(
        &json!({"a": ["rows=${nodes.fetch.outputs.rows}, item ${index}: ${item.k}"]}),
        &scope(),
    )
    .unwrap();
    assert_eq!(v, json!({"a": ["rows=42, item 2: v"]}));
}

#[test]
fn map_literals_and_quotes_do_not_end_an_expression() {
    let v = resolve(&json!("${ {'a}': 1}['a}'] + 1 }"), &scope()).unwrap();
    assert_eq!(v, json!(2));
}

#[test]
fn conditions_must_be_boolean() {
    let p = compile("nodes.fetch.outputs.rows > 0").unwrap();
    assert!(eval_bool(&p, "c", &scope()).unwrap());
    let p = compile("inputs.name").unwrap();
    assert!(
        eval_bool(&p, "inputs.name", &scope())
            .unwrap_err()
            .contains("true or false")
    );
}

#[test]
fn bad_templates_are_reported() {
    let errs = template_exprs(&json!({"a": "${1 +}", "b": "${unclosed"})).unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:?}");
}

#[test]
fn node_references_are_found() {
    assert_eq!(
        node_refs("nodes.a.outputs.x > 1 && nodes[\"b-c\"].phase == 'Succeeded' && mynodes.z"),
        vec!["a".to_string(), "b-c".to_string()]
    );
}
