use super::*;
use serde_json::json;

fn errs(o: Value, s: Value) -> Vec<String> {
    let mut e = Vec::new();
    validate_root(&o, None, &s, &mut e);
    e.into_iter()
        .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
        .collect()
}

#[test]
fn messages_match_kube_apiserver() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["nodes"],
            "properties": {
                "parallelism": {"type": "integer", "minimum": 0},
                "policy": {"type": "string", "enum": ["A", "B"]},
                "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                "n": {"type": "integer", "format": "int32"},
                "ios": {"x-kubernetes-int-or-string": true},
                "l": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}}}});
    let o = json!({"spec": {"parallelism": "lots", "policy": "C", "name": "ABCD",
            "n": 3_000_000_000i64, "ios": true, "l": ["a", 1]}});
    assert_eq!(
        errs(o, s),
        vec![
            "FieldValueRequired spec.nodes: Required value",
            "FieldValueTypeInvalid spec.ios: Invalid value: \"boolean\": spec.ios in body must be of type integer,string: \"boolean\"",
            "FieldValueTypeInvalid spec.l[1]: Invalid value: \"integer\": spec.l[1] in body must be of type string: \"integer\"",
            "FieldValueTooMany spec.l: Too many: 2: must have at most 1 items",
            "FieldValueInvalid <nil>: Invalid value: \"\": Checked value must be of type integer with format int32 in spec.n",
            "FieldValueTooLong spec.name: Too long: may not be longer than 3",
            "FieldValueInvalid spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
            "FieldValueTypeInvalid spec.parallelism: Invalid value: \"string\": spec.parallelism in body must be of type integer: \"string\"",
            "FieldValueNotSupported spec.policy: Unsupported value: \"C\": supported values: \"A\", \"B\"",
        ]
    );
}
