//! What a caller and an operator notice: which ids are kept, what replaces
//! the others, and where the id is copied.

use super::*;
use serde_json::json;

const NOW: u64 = 1_750_000_000_000;

fn call(id: Option<&str>, config: Value) -> Call {
    Call {
        method: "/weft.admin.v1.AdminService/GetExecution".into(),
        metadata: id
            .map(|id| (REQUEST_ID.to_string(), id.to_string()))
            .into_iter()
            .collect(),
        peer: Some("127.0.0.1:5555".into()),
        request: None,
        plugin_config: config,
    }
}

fn defaults() -> Value {
    json!({"maxLength": 128, "onInvalid": "replace", "prefix": "weft-", "propagateAs": []})
}

fn set_of(v: &Verdict) -> &std::collections::BTreeMap<String, String> {
    match v {
        Verdict::Proceed { set, remove } => {
            assert!(remove.is_empty());
            set
        }
        other => panic!("expected proceed, got {other:?}"),
    }
}

#[test]
fn a_plain_client_id_is_kept_as_it_is() {
    for id in [
        "abc-123",
        "7f0c2a4e-9a0b-4c1e-8f59-5a3c3b9e1d2f",
        "svc:job.42_x",
    ] {
        assert_eq!(
            normalise(&call(Some(id), defaults()), NOW),
            Verdict::proceed()
        );
    }
    let exactly_max = "a".repeat(128);
    assert_eq!(
        normalise(&call(Some(&exactly_max), defaults()), NOW),
        Verdict::proceed()
    );
}

#[test]
fn a_too_long_or_odd_id_is_replaced_and_kept_as_original() {
    let long = "a".repeat(129);
    for bad in [
        long.as_str(),
        "has space",
        "quote\"d",
        "tab\there",
        "ünï",
        "",
    ] {
        let v = normalise(&call(Some(bad), defaults()), NOW);
        let set = set_of(&v);
        let id = &set[REQUEST_ID];
        assert!(id.starts_with("weft-1750000000000-"), "{id}");
        assert!(is_valid(id, 128), "{id}");
        assert_eq!(set[ORIGINAL], bad);
    }
}

#[test]
fn generated_ids_differ_within_a_millisecond() {
    let a = generate("weft-", NOW);
    let b = generate("weft-", NOW);
    assert_ne!(a, b);
}

#[test]
fn reject_mode_refuses_a_bad_id_naming_the_header() {
    let mut config = defaults();
    config["onInvalid"] = json!("reject");
    config["maxLength"] = json!(8);
    match normalise(&call(Some("123456789"), config.clone()), NOW) {
        Verdict::Reject {
            code: Code::InvalidArgument,
            message,
        } => assert!(
            message.contains("x-request-id") && message.contains("1 to 8"),
            "{message}"
        ),
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    }
    assert_eq!(
        normalise(&call(Some("12345678"), config), NOW),
        Verdict::proceed()
    );
}

#[test]
fn the_id_is_copied_to_propagate_as_keys() {
    let mut config = defaults();
    config["propagateAs"] = json!(["x-correlation-id", "x-amzn-trace-id"]);
    let v = normalise(&call(Some("abc"), config.clone()), NOW);
    let set = set_of(&v);
    assert_eq!(set["x-correlation-id"], "abc");
    assert_eq!(set["x-amzn-trace-id"], "abc");
    assert!(!set.contains_key(REQUEST_ID));

    // A replaced id is the one propagated.
    config["prefix"] = json!("gw.");
    let v = normalise(&call(Some("bad id"), config), NOW);
    let set = set_of(&v);
    assert!(set[REQUEST_ID].starts_with("gw.1750000000000-"));
    assert_eq!(set["x-correlation-id"], set[REQUEST_ID]);
}

#[test]
fn a_missing_id_is_generated_without_an_original() {
    let v = normalise(&call(None, Value::Null), NOW);
    let set = set_of(&v);
    assert!(set[REQUEST_ID].starts_with("weft-"));
    assert!(!set.contains_key(ORIGINAL));
}

#[test]
fn reserved_or_invalid_propagate_keys_are_a_config_error_that_fails_open() {
    for keys in [
        json!(["x-weft-principal"]),
        json!(["authorization"]),
        json!(["X-Upper"]),
        json!(["trace-bin"]),
    ] {
        let config = json!({"propagateAs": keys});
        assert!(Config::from_value(&config).is_err(), "{config}");
        // Open: the call goes on untouched, the bad id included.
        assert_eq!(
            normalise(&call(Some("bad id"), config), NOW),
            Verdict::proceed()
        );
    }
    assert!(Config::from_value(&json!({"prefix": "no spaces"})).is_err());
    assert!(Config::from_value(&json!({"onInvalid": "drop"})).is_err());
    assert!(Config::from_value(&json!({"maxLen": 3})).is_err());
}
