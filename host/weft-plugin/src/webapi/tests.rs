use super::*;

#[test]
fn host_keys_name_what_is_wrong() {
    let any: Rule = serde_json::from_value(serde_json::json!({"host": "*"})).unwrap();
    let ok = host_keys(
            Some(serde_json::json!([{"header": "Authorization", "prefix": "Bearer ", "value": "s3cret"}])),
            Some(serde_json::json!({"allow": [{"host": "ray.internal", "ports": [8265], "methods": ["GET", "POST"], "schemes": ["http"]}]})),
            std::slice::from_ref(&any),
        )
        .unwrap();
    assert_eq!(ok.0.len(), 1);
    assert!(ok.0[0].value.is_sensitive());
    assert_eq!(
        format!("{:?}", ok.0[0]),
        "Credential(authorization for []: ***)"
    );
    assert_eq!(ok.1.unwrap()[0].host, "ray.internal");
    for (creds, egress, want) in [
        (
            serde_json::json!([{"header": "a b", "value": "x"}]),
            None,
            "credentials[0].header",
        ),
        (
            serde_json::json!([{"header": "X", "value": {"valueFrom": {}}}]),
            None,
            "credentials[0].value: not resolved",
        ),
        (
            serde_json::json!([{"header": "X", "value": "v", "hosts": ["a b"]}]),
            None,
            "credentials[0].hosts[0]",
        ),
        (
            serde_json::json!([]),
            Some(serde_json::json!({"allow": [{"host": "h", "methods": ["get"]}]})),
            "egress.allow[0]",
        ),
        (
            serde_json::json!([{"header": "X", "valu": "v"}]),
            None,
            "credentials: unknown field `valu`",
        ),
        (
            // Any host allowed and no `hosts`: the credential could
            // go wherever a workflow points the plugin.
            serde_json::json!([{"header": "X", "value": "v"}]),
            None,
            "credentials[0].hosts: required",
        ),
    ] {
        let e = host_keys(Some(creds), egress, std::slice::from_ref(&any)).unwrap_err();
        assert!(e.contains(want), "{e} lacks {want}");
    }
}
