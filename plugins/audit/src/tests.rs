//! What an operator reading the audit log notices: one line per answered
//! call, in a stable format, with nothing a client can forge and no
//! credential.

use super::*;
use serde_json::json;

const CREATE: &str = "/weft.admin.v1.AdminService/CreateExecution";

fn outcome(code: &str, message: &str) -> Call {
    Call {
        method: CREATE.into(),
        metadata: [
            (PHASE, "outcome"),
            (OUTCOME, code),
            (OUTCOME_MESSAGE, message),
            (PRINCIPAL, "alice"),
            (REQUEST_ID, "r-1"),
            (AUTHORIZATION, "Bearer s3cr3t"),
            ("x-tenant", "ml team"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        peer: Some("127.0.0.1:5555".into()),
        request: None,
        plugin_config: json!({"level": "info", "methods": [], "includeMetadata": []}),
    }
}

#[test]
fn an_ok_call_is_one_line_with_caller_and_outcome() {
    let call = outcome("OK", "");
    assert_eq!(
        line(&call, &Config::default()).unwrap(),
        "audit method=/weft.admin.v1.AdminService/CreateExecution principal=alice \
         peer=127.0.0.1:5555 request_id=r-1 outcome=OK"
    );
    assert_eq!(audit(&call), Verdict::proceed());
}

#[test]
fn a_refused_call_carries_the_quoted_message() {
    let mut call = outcome(
        "UNAUTHENTICATED",
        "invalid bearer token: the token has expired",
    );
    call.metadata.remove(PRINCIPAL);
    call.peer = None;
    assert_eq!(
        line(&call, &Config::default()).unwrap(),
        "audit method=/weft.admin.v1.AdminService/CreateExecution principal=anonymous \
         peer=- request_id=r-1 outcome=UNAUTHENTICATED \
         message=\"invalid bearer token: the token has expired\""
    );
}

#[test]
fn values_cannot_forge_fields_or_lines() {
    let mut call = outcome(
        "INTERNAL",
        "boom\naudit method=/x principal=root outcome=OK",
    );
    call.metadata
        .insert(PRINCIPAL.into(), "eve outcome=OK \"x\\".into());
    let l = line(&call, &Config::default()).unwrap();
    assert!(!l.contains('\n'), "{l}");
    assert!(l.contains(r#"principal="eve outcome=OK \"x\\""#), "{l}");
    assert!(
        l.ends_with(r#"message="boom\naudit method=/x principal=root outcome=OK""#),
        "{l}"
    );
}

#[test]
fn include_metadata_adds_fields_but_never_the_credential() {
    let config = Config {
        include_metadata: vec!["x-tenant".into(), AUTHORIZATION.into(), "x-missing".into()],
        ..Config::default()
    };
    let l = line(&outcome("OK", ""), &config).unwrap();
    assert!(l.ends_with(" outcome=OK x-tenant=\"ml team\""), "{l}");
    assert!(!l.contains("s3cr3t") && !l.contains(AUTHORIZATION), "{l}");
}

#[test]
fn methods_restricts_what_is_logged() {
    let config = Config {
        methods: vec!["/weft.admin.v1.AdminService/DeleteExecution".into()],
        ..Config::default()
    };
    assert_eq!(line(&outcome("OK", ""), &config), None);
    let config = Config {
        methods: vec![CREATE.into()],
        ..Config::default()
    };
    assert!(line(&outcome("OK", ""), &config).is_some());
}

#[test]
fn the_request_phase_proceeds_untouched() {
    let mut call = outcome("OK", "");
    call.metadata.remove(PHASE);
    assert!(!is_outcome_phase(&call));
    assert_eq!(audit(&call), Verdict::proceed());
    call.metadata.insert(PHASE.into(), "request".into());
    assert!(!is_outcome_phase(&call));
}

#[test]
fn config_is_read_from_the_host_json() {
    let config = Config::from_value(&json!({
        "level": "warn",
        "methods": [CREATE],
        "includeMetadata": ["x-tenant"],
    }))
    .unwrap();
    assert_eq!(config.level, Level::Warn);
    assert_eq!(config.methods, [CREATE]);
    assert!(Config::from_value(&json!({"level": "loud"})).is_err());
    assert!(Config::from_value(&json!({"method": []})).is_err());
    // A broken config still audits, with defaults.
    let mut call = outcome("OK", "");
    call.plugin_config = json!({"level": "loud"});
    assert_eq!(audit(&call), Verdict::proceed());
}

#[test]
fn a_signed_in_caller_has_groups_its_authenticator_and_the_decision() {
    let mut call = outcome("PERMISSION_DENIED", "refused");
    for (k, v) in [
        (GROUPS, "team-a,system:authenticated"),
        (AUTHENTICATED_BY, "oidc"),
        (
            DECISION,
            r#"user "alice" may not create workflows.weft.dev in namespace "team-b""#,
        ),
    ] {
        call.metadata.insert(k.to_string(), v.to_string());
    }
    assert_eq!(
        line(&call, &Config::default()).unwrap(),
        "audit method=/weft.admin.v1.AdminService/CreateExecution principal=alice \
         groups=team-a,system:authenticated authenticated_by=oidc peer=127.0.0.1:5555 \
         request_id=r-1 outcome=PERMISSION_DENIED message=refused \
         decision=\"user \\\"alice\\\" may not create workflows.weft.dev in namespace \\\"team-b\\\"\""
    );
}
