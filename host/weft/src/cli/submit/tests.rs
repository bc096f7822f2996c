use super::*;
use serde_json::json;

fn params(args: &[&str]) -> Vec<Param> {
    parse_params(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

fn decls() -> Inputs {
    serde_json::from_value(json!({
        "who": {"type": "string"},
        "size": {"type": "integer", "default": 1},
        "tags": {"type": "list", "default": []},
        "env": {"type": "string"},
        "anything": null,
    }))
    .unwrap()
}

fn fixed() -> Map<String, Value> {
    json!({"env": "prod"}).as_object().unwrap().clone()
}

fn bound(args: &[&str]) -> anyhow::Result<Map<String, Value>> {
    bind(
        &params(args),
        &decls(),
        &fixed(),
        "template etl",
        &Map::new(),
    )
}

#[test]
fn values_are_typed_by_their_declarations() {
    let v = bound(&["who=42", "size=7", "tags=[1, \"a\"]", "anything=x=y"]).unwrap();
    assert_eq!(
        Value::Object(v),
        json!({"who": "42", "size": 7, "tags": [1, "a"], "anything": "x=y"})
    );
}

#[test]
fn each_problem_names_the_argument_and_the_input() {
    let e = bound(&["who=a", "size=big", "nope=1", "env=dev"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"-p size=big: input size is an integer: "big" is not a valid integer"#),
        "{e}"
    );
    assert!(
            e.contains("-p nope=1: template etl has no input nope (it declares: anything, env, size, tags, who)"),
            "{e}"
        );
    assert!(
        e.contains(r#"-p env=dev: input env is fixed by template etl to "prod"; it cannot be set"#),
        "{e}"
    );
}

#[test]
fn a_required_input_needs_a_value() {
    let e = bound(&[]).unwrap_err().to_string();
    assert_eq!(
        e,
        "template etl: input who (string) is required: give it with -p who=VALUE"
    );
    let given = json!({"who": "x"}).as_object().unwrap().clone();
    assert!(bind(&[], &decls(), &fixed(), "template etl", &given).is_ok());
}

#[test]
fn malformed_arguments_are_refused() {
    let e = parse_params(&["x".into(), "=1".into()])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "-p x: expected KEY=VALUE\n-p =1: expected KEY=VALUE");
    assert_eq!(template_name("template/etl").unwrap(), "etl");
    for bad in ["etl", "template/", "workflow/etl", "template/a/b"] {
        let e = template_name(bad).unwrap_err().to_string();
        assert_eq!(e, format!("--from {bad}: expected template/NAME"));
    }
}

#[test]
fn artifact_inputs_must_be_declared_objects_that_nothing_else_sets() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().display().to_string();
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let e = parse_artifacts(&args(&["data", "x=/no/such/file"])).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("-a data: expected NAME=PATH"), "{e}");
    assert!(e.contains("-a x=/no/such/file: /no/such/file:"), "{e}");

    let given = parse_artifacts(&args(&[
        &format!("anything={path}"),
        &format!("who={path}"),
        &format!("env={path}"),
        &format!("nope={path}"),
        &format!("size={path}"),
    ]))
    .unwrap();
    let e = check_artifacts(
        &given,
        &params(&["size=3"]),
        &decls(),
        &fixed(),
        "template etl",
    )
    .unwrap_err()
    .to_string();
    assert!(
        !e.contains("-a anything="),
        "an untyped input takes a reference: {e}"
    );
    assert!(
        e.contains("input who is a string; an artifact reference is an object"),
        "{e}"
    );
    assert!(e.contains("input env is fixed by template etl"), "{e}");
    assert!(e.contains("template etl has no input nope"), "{e}");
    assert!(e.contains("input size is also given with -p"), "{e}");
}
