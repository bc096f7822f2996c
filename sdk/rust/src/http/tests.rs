use super::error::describe;
use super::*;
use crate::wit::webapi::wasi::http::types as t;
use serde_json::json;

#[test]
fn urls_split_into_scheme_authority_and_path() {
    let u = Url::parse("https://api.example.com").unwrap();
    assert_eq!(
        u,
        Url {
            scheme: Scheme::Https,
            authority: "api.example.com".into(),
            path_with_query: "/".into()
        }
    );
    let u = Url::parse("HTTP://[::1]:8265?x=1").unwrap();
    assert_eq!(u.scheme, Scheme::Http);
    assert_eq!(u.authority, "[::1]:8265");
    assert_eq!(u.path_with_query, "/?x=1");
    let u = Url::parse("http://h/a/b/?q=a/b#frag").unwrap();
    assert_eq!(u.path_with_query, "/a/b/?q=a/b");
    let u = Url::parse("grpc+tls://h:1/x").unwrap();
    assert_eq!(u.scheme, Scheme::Other("grpc+tls".into()));
}

#[test]
fn bad_urls_are_invalid_and_say_why() {
    for (url, why) in [
        ("127.0.0.1:8265/api", "no scheme"),
        ("http:///api", "no host"),
        ("http://user:pw@h/", "user info"),
        ("http://h/a b", "' '"),
        ("http://h/\n", "'\\n'"),
        ("1http://h/", "scheme is malformed"),
        ("", "no scheme"),
    ] {
        let e = Url::parse(url).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{url}");
        assert!(e.detail().contains(why), "{url}: {e}");
    }
}

#[test]
fn requests_are_built_in_order() {
    let r = Request::new("PROPFIND", "http://h/")
        .with_header("X-A", "1")
        .with_header("x-a", "2")
        .with_body(b"raw".to_vec());
    assert_eq!(r.method(), "PROPFIND");
    assert_eq!(r.url(), "http://h/");
    assert_eq!(r.header("x-A"), Some("1"));
    assert_eq!(r.headers().len(), 2);
    assert_eq!(r.body(), b"raw");
    for (req, m) in [
        (Request::get("u"), "GET"),
        (Request::post("u"), "POST"),
        (Request::put("u"), "PUT"),
        (Request::patch("u"), "PATCH"),
        (Request::delete("u"), "DELETE"),
    ] {
        assert_eq!(req.method(), m);
    }
}

#[test]
fn json_bodies_set_the_content_type_once() {
    let r = Request::post("http://h/").with_json(&json!({"a": [1, 2]}));
    assert_eq!(r.body(), br#"{"a":[1,2]}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let r = Request::post("http://h/")
        .with_header("Content-Type", "application/merge-patch+json")
        .with_json(&json!({}));
    assert_eq!(r.headers().len(), 1);
    assert_eq!(
        r.header("content-type"),
        Some("application/merge-patch+json")
    );
}

#[test]
fn a_body_that_does_not_serialize_fails_at_send() {
    let mut m = std::collections::BTreeMap::new();
    m.insert(vec![1u8], 1);
    let e = Request::post("http://h/").with_json(&m).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(
        e.to_string()
            .starts_with("POST http://h/: the JSON body does not serialize"),
        "{e}"
    );
}

#[test]
fn bad_urls_fail_at_send_naming_the_request() {
    let e = Request::get("ftp//x").send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().starts_with("GET ftp//x: invalid URL"), "{e}");
}

#[test]
fn the_native_responder_answers_and_without_one_send_fails() {
    native::clear_responder();
    let e = Request::get("http://h/").send().unwrap_err();
    assert!(
        e.is_retryable() && e.detail().contains("set_responder"),
        "{e}"
    );

    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    native::set_responder(move |req| {
        log.borrow_mut()
            .push(format!("{} {}", req.method(), req.url()));
        let mut resp = Response::new(201, r#"{"ok": true}"#);
        resp.headers
            .push(("content-type".into(), "application/json".into()));
        Ok(resp)
    });
    let resp = Request::post("http://h/x")
        .with_json(&json!({}))
        .send()
        .unwrap();
    assert!(resp.is_success());
    assert_eq!(resp.header("Content-Type"), Some("application/json"));
    assert_eq!(
        resp.json::<serde_json::Value>().unwrap(),
        json!({"ok": true})
    );
    assert_eq!(resp.text(), r#"{"ok": true}"#);
    assert_eq!(*seen.borrow(), ["POST http://h/x"]);
    native::clear_responder();
}

#[test]
fn responses_tell_success_by_status() {
    assert!(Response::new(204, "").is_success());
    assert!(!Response::new(302, "").is_success());
    assert!(!Response::new(404, "").is_success());
    assert_eq!(Response::new(500, vec![0xff, b'a']).text(), "\u{fffd}a");
}

#[test]
fn error_codes_read_as_the_host_words_them() {
    let d = |c: t::ErrorCode| describe(&c);
    assert_eq!(
        d(t::ErrorCode::HttpRequestDenied),
        (ErrorKind::Denied, "HTTP request denied".into())
    );
    assert_eq!(
        d(t::ErrorCode::HttpResponseBodySize(Some(4194305))),
        (
            ErrorKind::TooLarge,
            "HTTP response body size exceeds limit: 4194305 bytes".into()
        )
    );
    assert_eq!(
        d(t::ErrorCode::ConnectionRefused),
        (ErrorKind::Transport, "connection refused".into())
    );
    assert_eq!(
        d(t::ErrorCode::DnsError(t::DnsErrorPayload {
            rcode: Some("NXDOMAIN".into()),
            info_code: Some(3)
        }))
        .1,
        "DNS error: rcode NXDOMAIN (info code 3)"
    );
    assert_eq!(
        d(t::ErrorCode::HttpRequestHeaderSize(Some(
            t::FieldSizePayload {
                field_name: Some("x-big".into()),
                field_size: Some(9000)
            }
        ))),
        (
            ErrorKind::Invalid,
            "HTTP request header size exceeds limit: field \"x-big\" (9000 bytes)".into()
        )
    );
    assert_eq!(
        d(t::ErrorCode::InternalError(Some("boom".into()))).1,
        "internal error: boom"
    );
    assert_eq!(d(t::ErrorCode::ConnectionTimeout).0, ErrorKind::Transport);
}

#[test]
fn http_errors_become_plugin_errors() {
    let p: crate::PluginError = HttpError::new(ErrorKind::Transport, "connection refused")
        .in_request("GET http://h/".into())
        .into();
    assert_eq!(p.message, "GET http://h/: connection refused");
    assert!(p.retryable);
    for kind in [ErrorKind::Invalid, ErrorKind::Denied, ErrorKind::TooLarge] {
        let p: crate::PluginError = HttpError::new(kind, "x").into();
        assert!(!p.retryable, "{kind:?}");
    }
}

#[test]
fn path_segments_are_percent_encoded() {
    assert_eq!(
        encode_path_segment("raysubmit_AbC-1.2~_"),
        "raysubmit_AbC-1.2~_"
    );
    assert_eq!(encode_path_segment("é/%"), "%C3%A9%2F%25");
}
