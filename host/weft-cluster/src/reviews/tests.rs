use serde_json::json;

use super::*;

#[test]
fn metadata_is_what_the_create_handler_leaves() {
    let obj = json!({"metadata": {
        "name": "", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z",
        "selfLink": "/x", "bogus": "dropped on decoding", "labels": {},
    }});
    assert_eq!(metadata(&obj, None).unwrap(), Map::new());
    // A namespaced review takes the path's namespace, or refuses another.
    let m = metadata(&json!({}), Some("team-a")).unwrap();
    assert_eq!(Value::Object(m), json!({"namespace": "team-a"}));
    let e = metadata(&json!({"metadata": {"namespace": "b"}}), Some("a")).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    );
    // A cluster-scoped review drops a namespace.
    let m = metadata(&json!({"metadata": {"namespace": "a"}}), None).unwrap();
    assert!(m.is_empty());
}

#[test]
fn metadata_errors_render_the_object_meta_as_json_in_go_order() {
    let m = metadata(
        &json!({"metadata": {"labels": {"b": "2", "a": "1"}, "name": "x",
                             "managedFields": [{"manager": "m"}]}}),
        None,
    )
    .unwrap();
    let e = metadata_error(&m, &[], "must be empty").unwrap();
    assert_eq!(e.field, "metadata");
    assert_eq!(e.reason, "FieldValueInvalid");
    assert_eq!(
        e.message,
        r#"Invalid value: {"name":"x","labels":{"a":"1","b":"2"}}: must be empty"#
    );
    // managedFields alone (the server's own) and a local review's
    // namespace are allowed.
    let m = metadata(&json!({"metadata": {"managedFields": [{}]}}), Some("ns")).unwrap();
    assert!(metadata_error(&m, &["namespace"], "x").is_none());
    assert!(metadata_error(&m, &[], "x").is_some());
}
