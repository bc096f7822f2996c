use super::*;

fn rule(host: &str, ports: &[u16], methods: &[&str], schemes: &[&str]) -> Rule {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
    Rule {
        host: host.into(),
        ports: ports.iter().map(|p| Ports::one(*p)).collect(),
        methods: s(methods),
        schemes: s(schemes),
    }
}

fn req<'a>(method: &'a str, scheme: &'a str, host: &'a str, port: u16) -> Request<'a> {
    Request {
        method,
        scheme,
        host,
        port,
    }
}

#[test]
fn defaults_are_get_over_https_on_443() {
    let r = rule("api.example.com", &[], &[], &[]);
    assert!(r.matches(&req("GET", "https", "api.example.com", 443)));
    assert!(r.matches(&req("GET", "https", "API.Example.com.", 443)));
    assert!(!r.matches(&req("POST", "https", "api.example.com", 443)));
    assert!(!r.matches(&req("GET", "http", "api.example.com", 80)));
    assert!(!r.matches(&req("GET", "https", "api.example.com", 8443)));
    assert!(!r.matches(&req("GET", "https", "evil.com", 443)));
}

#[test]
fn wildcards_match_subdomains_only() {
    let r = rule("*.example.com", &[443], &["GET"], &["https"]);
    assert!(r.matches(&req("GET", "https", "a.example.com", 443)));
    assert!(r.matches(&req("GET", "https", "a.b.example.com", 443)));
    assert!(!r.matches(&req("GET", "https", "example.com", 443)));
    assert!(!r.matches(&req("GET", "https", "badexample.com", 443)));
    let any = rule("*", &[8265], &["GET", "POST"], &["http"]);
    assert!(any.matches(&req("POST", "http", "10.0.0.1", 8265)));
    assert!(!any.matches(&req("DELETE", "http", "10.0.0.1", 8265)));
}

#[test]
fn the_operator_narrows_and_denials_name_plugin_url_and_list() {
    let mut p = Policy {
        manifest: vec![rule("*", &[8265], &["GET", "POST"], &["http"])],
        operator: None,
    };
    let url = "http://10.1.2.3:8265/api/jobs/";
    let r = req("POST", "http", "10.1.2.3", 8265);
    assert_eq!(p.check("ray-job", url, &r), Ok(()));
    p.operator = Some(vec![rule(
        "ray-head.ray",
        &[8265],
        &["GET", "POST"],
        &["http"],
    )]);
    let e = p.check("ray-job", url, &r).unwrap_err();
    assert_eq!(
        e.to_string(),
        "plugin ray-job may not POST http://10.1.2.3:8265/api/jobs/: not in the operator's egress.allow for this plugin"
    );
    let ok = req("POST", "http", "ray-head.ray", 8265);
    assert_eq!(p.check("ray-job", "http://ray-head.ray:8265/", &ok), Ok(()));
    let none = Policy::default();
    let e = none.check("http", "https://x.org/", &req("GET", "https", "x.org", 443));
    assert!(e.unwrap_err().why.contains("allows no outbound HTTP"));
}

#[test]
fn manifest_settings_default_and_name_bad_fields() {
    let raw: RawEgress = serde_yaml::from_str(
        "allow: [{host: '*', ports: [8265], methods: [GET, POST], schemes: [http]}]",
    )
    .unwrap();
    let e = raw.parse().unwrap();
    assert_eq!(
        (e.timeout, e.max_response, e.concurrency),
        (Duration::from_secs(30), 1 << 20, 4)
    );
    assert_eq!(e.allow[0].ports, [Ports::one(8265)]);
    let raw: RawEgress =
        serde_yaml::from_str("allow: [{host: '*', ports: ['1-65535', 80], schemes: [http]}]")
            .unwrap();
    let any = &raw.parse().unwrap().allow[0];
    assert!(any.matches(&Request {
        method: "GET",
        scheme: "http",
        host: "h",
        port: 41234
    }));
    assert_eq!(any.to_string(), "GET http://*:1-65535,80");
    for bad in ["'9-1'", "'x'", "0", "'1-70000'"] {
        let text = format!("allow: [{{host: h, ports: [{bad}]}}]");
        assert!(serde_yaml::from_str::<RawEgress>(&text).is_err(), "{bad}");
    }
    for (text, field) in [
        ("allow: [{host: ok}, {host: 'a b'}]", "egress.allow[1]"),
        ("timeout: soon", "egress.timeout"),
        ("maxResponse: 1 banana", "egress.maxResponse"),
        ("concurrency: 0", "egress.concurrency"),
    ] {
        let raw: RawEgress = serde_yaml::from_str(text).unwrap();
        assert_eq!(raw.parse().unwrap_err().0, field, "{text}");
    }
    assert!(serde_yaml::from_str::<RawEgress>("alow: []").is_err());
}

#[test]
fn bad_rules_are_refused_naming_the_field() {
    for (r, what) in [
        (rule("", &[], &[], &[]), "host"),
        (rule("a*.com", &[], &[], &[]), "host"),
        (rule("h:80", &[], &[], &[]), "host"),
        (rule("h", &[], &["get"], &[]), "method"),
        (rule("h", &[], &[], &["ftp"]), "scheme"),
        (rule("h", &[0], &[], &[]), "ports"),
    ] {
        let e = r.validate().unwrap_err();
        assert!(e.contains(what), "{e}");
    }
    assert_eq!(rule("*.a.b", &[1], &["PUT"], &["http"]).validate(), Ok(()));
    assert_eq!(
        rule("h", &[], &[], &[]).to_string(),
        "GET https://h:default"
    );
}
