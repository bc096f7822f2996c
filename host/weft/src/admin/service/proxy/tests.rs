use super::*;

fn upload(len: u64, ct: &str) -> pb::CreateUploadLocationRequest {
    pb::CreateUploadLocationRequest {
        namespace: "team-a".into(),
        filename: "data.csv".into(),
        content_length: len,
        content_type: ct.into(),
        expires_in_seconds: 0,
    }
}

#[test]
fn file_names_are_plain() {
    for ok in ["data.csv", "model_v2.tar.zst", "A-1"] {
        assert!(filename(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "..",
        ".hidden",
        "a/b",
        "../x",
        "sp ace",
        &"x".repeat(256),
    ] {
        let e = filename(bad).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
        assert!(e.message().starts_with("filename: "), "{}", e.message());
    }
}

#[test]
fn namespaces_cannot_reach_other_keys() {
    assert!(namespace("team-a").is_ok());
    for bad in ["", "a/b", "..", "Team", "-a"] {
        assert!(namespace(bad).is_err(), "{bad}");
    }
}

#[test]
fn sizes_and_content_types_are_held_to_the_limits() {
    let limits = DataProxyConfig {
        max_upload_bytes: 100,
        content_types: vec!["text/csv".into(), "image/*".into()],
    };
    assert!(within(&upload(100, "text/csv; charset=utf-8"), &limits).is_ok());
    assert!(within(&upload(1, "image/png"), &limits).is_ok());
    let e = within(&upload(101, "text/csv"), &limits).unwrap_err();
    assert!(
        e.message().contains("101 bytes") && e.message().contains("100 bytes"),
        "{}",
        e.message()
    );
    let e = within(&upload(1, "application/zip"), &limits).unwrap_err();
    assert!(e.message().contains("text/csv, image/*"), "{}", e.message());
    let e = within(&upload(1, ""), &limits).unwrap_err();
    assert!(e.message().contains("none given"), "{}", e.message());
    let any = DataProxyConfig::default();
    assert!(within(&upload(1, ""), &any).is_ok());
    assert!(within(&upload(1, "not a type"), &any).is_err());
}

#[test]
fn urls_live_an_hour_by_default_and_at_most_a_week() {
    assert_eq!(expiry(0).unwrap(), DEFAULT_TTL);
    assert_eq!(expiry(60).unwrap(), Duration::from_secs(60));
    assert!(expiry(8 * 24 * 3600).is_err());
}

#[test]
fn upload_ids_differ() {
    let (a, b) = (upload_id(), upload_id());
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
}
