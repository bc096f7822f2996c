use super::*;
use serde_json::json;

fn cfg(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn secret(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Vec<u8>>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
    )
}

#[test]
fn references_resolve_anywhere_and_optional_ones_drop_out() {
    let config = cfg(json!({
        "tokens": {"valueFrom": {"secretKeyRef": {"name": "auth", "key": "tokens", "format": "json"}}},
        "jwt": {"hs256Secrets": [{"valueFrom": {"secretKeyRef": {"name": "auth", "key": "hs"}}}], "leeway": 30},
        "extra": {"valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": true}}},
        "plain": "kept"
    }));
    let mut fetched = Fetched::new();
    fetched.insert(
        "auth".into(),
        secret(&[("tokens", r#"{"t0k3n": "robot:ci"}"#), ("hs", "s3cret")]),
    );
    fetched.insert("gone".into(), None);
    let out = resolve(&config, "ns", &fetched).unwrap();
    assert_eq!(
        Value::Object(out),
        json!({"tokens": {"t0k3n": "robot:ci"}, "jwt": {"hs256Secrets": ["s3cret"], "leeway": 30}, "plain": "kept"})
    );
    assert_eq!(
        secret_names(&config),
        ["auth", "gone"].map(String::from).into()
    );
}

#[test]
fn errors_name_the_path_secret_and_key_but_never_the_value() {
    let config = cfg(
        json!({"tokens": {"valueFrom": {"secretKeyRef": {"name": "auth", "key": "tokens", "format": "json"}}}}),
    );
    let mut fetched = Fetched::new();
    fetched.insert("auth".into(), secret(&[("tokens", "not-json-s3cret")]));
    let e = resolve(&config, "team-a", &fetched)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("config.tokens: Secret team-a/auth key \"tokens\": the value is not JSON"),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
    fetched.insert("auth".into(), secret(&[]));
    let e = resolve(&config, "team-a", &fetched)
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("the Secret has no such key"), "{e}");
    fetched.insert("auth".into(), None);
    let e = resolve(&config, "team-a", &fetched)
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("not found"), "{e}");
    let bad = cfg(json!({"a": {"valueFrom": {"secretKeyRef": {"name": "x"}}}}));
    let e = refs(&bad).unwrap_err().to_string();
    assert!(
        e.contains("config.a: bad valueFrom") && e.contains("key"),
        "{e}"
    );
    let bad = cfg(json!({"a": {"valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}}));
    assert!(refs(&bad).is_err());
}
