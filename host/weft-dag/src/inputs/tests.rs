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
