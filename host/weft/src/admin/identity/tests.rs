use super::*;

#[test]
fn the_session_cookie_is_found_among_others() {
    assert_eq!(
        session_cookie("a=1; weft_session=abc.def.ghi; b=2").as_deref(),
        Some("abc.def.ghi")
    );
    assert_eq!(session_cookie("weft_session=; a=1"), None);
    assert_eq!(session_cookie("weft_sessions=x"), None);
}

#[test]
fn via_round_trips_and_unknown_is_a_middleware() {
    for v in [Via::Oidc, Via::Session, Via::TokenReview, Via::Middleware] {
        assert_eq!(Via::parse(Some(v.as_str())), v);
    }
    assert_eq!(Via::parse(None), Via::Middleware);
}

#[test]
fn unverified_claims_read_a_jwt_payload_only() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let token = format!(
        "{}.{}.sig",
        b64(r#"{"alg":"RS256"}"#),
        b64(r#"{"iss":"http://x"}"#)
    );
    let claims = oidc::unverified_claims(&token).unwrap();
    assert_eq!(claims["iss"], "http://x");
    assert!(oidc::unverified_claims("static-token").is_none());
}
