use super::*;
use serde_json::json;

fn run(v: Value, old: Option<Value>, s: Value) -> Vec<String> {
    let mut e = Vec::new();
    check(&v, old.as_ref(), &s, "", &mut e);
    e.into_iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect()
}

#[test]
fn rules_messages_and_transitions() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.min >= 0", "messageExpression": "'min is ' + string(self.min)"},
                {"rule": "self.name.matches('^[a-z]+$')", "fieldPath": ".name"},
                {"rule": "self.max >= oldSelf.max", "message": "max may not shrink", "reason": "FieldValueForbidden"}],
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"}}}}});
    let bad = json!({"spec": {"min": -5, "max": -6, "name": "X"}});
    assert_eq!(
        run(bad, None, s.clone()),
        vec![
            "spec: Invalid value: \"object\": min must not exceed max",
            "spec: Invalid value: \"object\": min is -5",
            "spec.name: Invalid value: \"object\": failed rule: self.name.matches('^[a-z]+$')",
        ]
    );
    let old = json!({"spec": {"min": 1, "max": 9, "name": "a"}});
    let new = json!({"spec": {"min": 1, "max": 3, "name": "a"}});
    assert_eq!(
        run(new, Some(old), s),
        vec!["spec: Forbidden: max may not shrink"]
    );
}
