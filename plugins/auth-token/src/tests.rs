//! What a caller notices: which tokens get in, with which identity, and
//! which reason a refused one is given. Time is fixed (`NOW`), so expiry
//! tests never sleep; tokens are signed here with HMAC or the committed
//! test RSA key.

use super::*;
use base64ct::{Base64UrlUnpadded, Encoding};
use hmac::{Hmac, Mac};
use rsa::pkcs1v15::SigningKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::signature::{SignatureEncoding, Signer};
use rsa::RsaPrivateKey;
use serde_json::json;

/// 2025-06-15T14:13:20Z, in milliseconds.
const NOW: u64 = 1_750_000_000_000;
const NOW_S: u64 = NOW / 1000;

const SECRET: &str = "a-shared-secret-of-at-least-32-bytes!";
const OTHER_SECRET: &str = "another-shared-secret-32-bytes-long!!";
const RSA_PRIVATE: &str = include_str!("../testdata/test-rsa-private.pem");
const RSA_PUBLIC: &str = include_str!("../testdata/test-rsa-public.pem");
const RSA_PUBLIC_PKCS1: &str = include_str!("../testdata/test-rsa-public-pkcs1.pem");
const OTHER_RSA_PUBLIC: &str = include_str!("../testdata/other-rsa-public.pem");

const METHOD: &str = "/weft.admin.v1.AdminService/GetExecution";

fn config() -> Value {
    json!({
        "tokens": {"s3cr3t-robot-token": "robot:ci"},
        "skipMethods": ["/grpc.health.v1.Health/Check"],
        "jwt": {
            "hs256Secrets": [OTHER_SECRET, SECRET],
            "rs256PublicKeys": [OTHER_RSA_PUBLIC, RSA_PUBLIC],
            "issuer": "https://idp.example.com",
            "audience": "weft",
        },
    })
}

fn call_with(config: Value, authorization: Option<&str>) -> Call {
    Call {
        method: METHOD.into(),
        metadata: authorization
            .map(|a| (AUTHORIZATION.to_string(), a.to_string()))
            .into_iter()
            .chain([("x-request-id".to_string(), "r-1".to_string())])
            .collect(),
        peer: Some("127.0.0.1:5555".into()),
        request: None,
        plugin_config: config,
    }
}

fn run(authorization: Option<&str>) -> Verdict {
    authenticate(&call_with(config(), authorization), NOW)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn b64(v: &Value) -> String {
    Base64UrlUnpadded::encode_string(v.to_string().as_bytes())
}

fn hs256(claims: Value, secret: &str) -> String {
    let signed = format!(
        "{}.{}",
        b64(&json!({"alg": "HS256", "typ": "JWT"})),
        b64(&claims)
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(signed.as_bytes());
    let sig = mac.finalize().into_bytes();
    format!("{signed}.{}", Base64UrlUnpadded::encode_string(&sig))
}

fn rs256(claims: Value) -> String {
    let key = RsaPrivateKey::from_pkcs8_pem(RSA_PRIVATE).unwrap();
    let signed = format!(
        "{}.{}",
        b64(&json!({"alg": "RS256", "typ": "JWT"})),
        b64(&claims)
    );
    let sig = SigningKey::<Sha256>::new(key).sign(signed.as_bytes());
    format!(
        "{signed}.{}",
        Base64UrlUnpadded::encode_string(&sig.to_bytes())
    )
}

/// Claims of a token valid at `NOW`.
fn claims() -> Value {
    json!({
        "sub": "alice",
        "iss": "https://idp.example.com",
        "aud": ["other", "weft"],
        "iat": NOW_S - 60,
        "nbf": NOW_S - 60,
        "exp": NOW_S + 3600,
        "groups": ["admins", "ml"],
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    if value.is_null() {
        claims.as_object_mut().unwrap().remove(key);
    } else {
        claims[key] = value;
    }
    claims
}

fn assert_identity(v: &Verdict, principal: &str, groups: Option<&str>) {
    let Verdict::Proceed { set, remove } = v else {
        panic!("expected proceed, got {v:?}");
    };
    assert_eq!(set.get(PRINCIPAL).map(String::as_str), Some(principal));
    assert_eq!(set.get(GROUPS).map(String::as_str), groups);
    assert_eq!(
        remove,
        &[AUTHORIZATION.to_string()],
        "the credential must not travel on"
    );
}

#[track_caller]
fn assert_unauthenticated(v: &Verdict, reason: &str) {
    match v {
        Verdict::Reject {
            code: Code::Unauthenticated,
            message,
        } => assert!(
            message.contains(reason),
            "{message:?} should say {reason:?}"
        ),
        other => panic!("expected UNAUTHENTICATED ({reason}), got {other:?}"),
    }
}

#[test]
fn a_static_token_names_its_principal() {
    assert_identity(&run(Some("Bearer s3cr3t-robot-token")), "robot:ci", None);
    // The scheme is case-insensitive.
    assert_identity(&run(Some("bearer s3cr3t-robot-token")), "robot:ci", None);
}

#[test]
fn an_unknown_static_token_is_refused_without_echoing_it() {
    let v = run(Some("Bearer s3cr3t-robot-tokeN"));
    assert_unauthenticated(&v, "unknown token");
    let Verdict::Reject { message, .. } = v else {
        unreachable!()
    };
    assert!(!message.contains("s3cr3t"), "{message}");
}

#[test]
fn a_missing_header_names_the_authorization_metadata() {
    assert_unauthenticated(&run(None), "`authorization`");
}

#[test]
fn other_schemes_and_empty_tokens_are_refused() {
    assert_unauthenticated(&run(Some("Basic YWxpY2U6cHc=")), "Bearer <token>");
    assert_unauthenticated(&run(Some("s3cr3t-robot-token")), "Bearer <token>");
    assert_unauthenticated(&run(Some("Bearer   ")), "Bearer <token>");
}

#[test]
fn skipped_methods_pass_without_a_token_and_still_drop_one() {
    let mut call = call_with(config(), Some("Bearer whatever"));
    call.method = "/grpc.health.v1.Health/Check".into();
    assert_eq!(
        authenticate(&call, NOW),
        Verdict::proceed().and_remove(AUTHORIZATION)
    );
}

#[test]
fn a_valid_hs256_token_names_principal_and_groups() {
    // Signed with the second configured secret: rotation works.
    let v = run(Some(&bearer(&hs256(claims(), SECRET))));
    assert_identity(&v, "alice", Some("admins,ml"));
}

#[test]
fn an_expired_token_is_refused_past_the_leeway() {
    let token = hs256(with(claims(), "exp", json!(NOW_S - 10)), SECRET);
    // Within the default 30 s of leeway...
    assert_identity(&run(Some(&bearer(&token))), "alice", Some("admins,ml"));
    // ...and past it.
    let token = hs256(with(claims(), "exp", json!(NOW_S - 31)), SECRET);
    assert_unauthenticated(&run(Some(&bearer(&token))), "expired");
}

#[test]
fn a_token_before_its_nbf_is_refused() {
    let token = hs256(with(claims(), "nbf", json!(NOW_S + 120)), SECRET);
    assert_unauthenticated(&run(Some(&bearer(&token))), "not valid yet");
}

#[test]
fn a_token_without_exp_is_refused_unless_allowed() {
    let token = hs256(with(claims(), "exp", Value::Null), SECRET);
    assert_unauthenticated(&run(Some(&bearer(&token))), "no exp");
    let mut config = config();
    config["jwt"]["requireExp"] = json!(false);
    let v = authenticate(&call_with(config, Some(&bearer(&token))), NOW);
    assert_identity(&v, "alice", Some("admins,ml"));
}

#[test]
fn a_bad_hs256_signature_is_refused() {
    let token = hs256(claims(), "not-the-secret-but-long-enough-32-bytes");
    assert_unauthenticated(&run(Some(&bearer(&token))), "bad signature");
}

#[test]
fn issuer_and_audience_are_checked() {
    let token = hs256(
        with(claims(), "iss", json!("https://evil.example.com")),
        SECRET,
    );
    assert_unauthenticated(&run(Some(&bearer(&token))), "issuer");
    let token = hs256(with(claims(), "aud", json!(["other"])), SECRET);
    assert_unauthenticated(&run(Some(&bearer(&token))), "audience");
    let token = hs256(with(claims(), "aud", Value::Null), SECRET);
    assert_unauthenticated(&run(Some(&bearer(&token))), "audience");
    // A single string audience works as well as an array.
    let token = hs256(with(claims(), "aud", json!("weft")), SECRET);
    assert_identity(&run(Some(&bearer(&token))), "alice", Some("admins,ml"));
}

#[test]
fn unsigned_tokens_are_refused() {
    for alg in ["none", "None", "NONE"] {
        let token = format!("{}.{}.", b64(&json!({"alg": alg})), b64(&claims()));
        assert_unauthenticated(&run(Some(&bearer(&token))), "alg none");
    }
}

#[test]
fn algorithms_without_a_configured_key_are_refused() {
    let token = hs256(claims(), SECRET);
    let (_, rest) = token.split_once('.').unwrap();
    let hs512 = format!("{}.{rest}", b64(&json!({"alg": "HS512"})));
    assert_unauthenticated(
        &run(Some(&bearer(&hs512))),
        "algorithm HS512 is not accepted",
    );

    // HS256 with only RSA keys configured: the public key is never an HMAC secret.
    let mut config = config();
    config["jwt"]["hs256Secrets"] = json!([]);
    let v = authenticate(&call_with(config, Some(&bearer(&token))), NOW);
    assert_unauthenticated(&v, "algorithm HS256 is not accepted");
}

#[test]
fn a_valid_rs256_token_is_accepted_with_either_pem_form() {
    let token = rs256(claims());
    assert_identity(&run(Some(&bearer(&token))), "alice", Some("admins,ml"));

    let mut config = config();
    config["jwt"]["rs256PublicKeys"] = json!([RSA_PUBLIC_PKCS1]);
    let v = authenticate(&call_with(config, Some(&bearer(&token))), NOW);
    assert_identity(&v, "alice", Some("admins,ml"));
}

#[test]
fn a_tampered_rs256_token_is_refused() {
    let token = rs256(claims());
    let mut parts: Vec<&str> = token.split('.').collect();
    let forged = b64(&with(claims(), "sub", json!("root")));
    parts[1] = &forged;
    assert_unauthenticated(&run(Some(&bearer(&parts.join(".")))), "bad signature");

    // Signed by a key the operator does not trust.
    let mut config = config();
    config["jwt"]["rs256PublicKeys"] = json!([OTHER_RSA_PUBLIC]);
    let v = authenticate(&call_with(config, Some(&bearer(&token))), NOW);
    assert_unauthenticated(&v, "bad signature");
}

#[test]
fn the_principal_and_groups_claims_are_configurable() {
    let mut config = config();
    config["jwt"]["principalClaim"] = json!("email");
    config["jwt"]["groupsClaim"] = json!("roles");
    let claims = with(claims(), "email", json!("alice@example.com"));
    let claims = with(claims, "roles", json!("viewer"));
    let v = authenticate(
        &call_with(config.clone(), Some(&bearer(&hs256(claims, SECRET)))),
        NOW,
    );
    assert_identity(&v, "alice@example.com", Some("viewer"));

    let token = hs256(with(self::claims(), "email", Value::Null), SECRET);
    let v = authenticate(&call_with(config, Some(&bearer(&token))), NOW);
    assert_unauthenticated(&v, "no email claim");
}

#[test]
fn a_jwt_without_any_jwt_keys_is_an_unknown_token() {
    let config = json!({"tokens": {"t": "p"}});
    let v = authenticate(
        &call_with(config, Some(&bearer(&hs256(claims(), SECRET)))),
        NOW,
    );
    assert_unauthenticated(&v, "unknown token");
}

#[test]
fn garbage_in_token_parts_is_refused() {
    for token in ["a.b.c", "..", "eyJhbGciOiJIUzI1NiJ9.!!!.x"] {
        assert_unauthenticated(&run(Some(&bearer(token))), "invalid bearer token");
    }
}

#[test]
fn a_config_the_plugin_cannot_use_fails_closed() {
    let internal = |config: Value| match authenticate(&call_with(config, Some("Bearer x")), NOW) {
        Verdict::Reject {
            code: Code::Internal,
            message,
        } => message,
        other => panic!("expected INTERNAL, got {other:?}"),
    };
    assert!(internal(json!({"tokenz": {}})).contains("tokenz"));
    assert!(internal(json!({"jwt": {"hs256Secrets": ["short"]}})).contains("at least 32"));
    let bad_key = json!({"jwt": {"rs256PublicKeys": ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]}});
    let v = authenticate(&call_with(bad_key, Some(&bearer(&rs256(claims())))), NOW);
    assert!(
        matches!(&v, Verdict::Reject { code: Code::Internal, message } if message.contains("rs256PublicKeys[0]")),
        "{v:?}"
    );
}

#[test]
fn indented_pem_from_yaml_parses() {
    let indented: String = RSA_PUBLIC.lines().map(|l| format!("    {l}\n")).collect();
    assert!(jwt::parse_public_key(&indented).is_ok());
}

#[test]
fn the_component_entry_point_uses_the_real_clock() {
    // exp in 2100: valid against the system clock for a long while.
    let claims = with(claims(), "exp", json!(4_102_444_800u64));
    let call = call_with(config(), Some(&bearer(&rs256(claims))));
    assert_identity(&AuthToken::on_request(call), "alice", Some("admins,ml"));
}

#[test]
fn a_caller_the_host_signed_in_passes_as_it_is() {
    let mut call = call_with(config(), None);
    call.metadata
        .insert(AUTHENTICATED_BY.to_string(), "oidc".to_string());
    call.metadata
        .insert(PRINCIPAL.to_string(), "alice@example.com".to_string());
    assert_eq!(authenticate(&call, NOW), Verdict::proceed());
    // Without the host's mark, the same call needs a token.
    call.metadata.remove(AUTHENTICATED_BY);
    assert_unauthenticated(&authenticate(&call, NOW), "`authorization`");
}
