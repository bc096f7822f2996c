use super::*;

fn entry(key: &str, created: &str, max_age: Option<&str>) -> Entry {
    let mut value = json!({"taskType": "pod", "version": "1", "workflow": "wf-a",
                               "node": "train", "createdAt": created, "outputs": {"n": 1}});
    if let Some(m) = max_age {
        value["maxAge"] = m.into();
    }
    Entry {
        key: key.into(),
        cache: "weft-cache-pod".into(),
        raw: value.to_string(),
        value,
        task_type: "pod".into(),
    }
}

#[test]
fn cache_names_are_dns_labels() {
    assert_eq!(object_name("pod"), "weft-cache-pod");
    assert_eq!(object_name("K8s_Resource"), "weft-cache-k8s-resource");
    assert_eq!(object_name("example.com/job"), "weft-cache-example-com-job");
}

#[test]
fn keys_are_sha256_hex() {
    assert!(is_key(&"ab12".repeat(16)));
    assert!(!is_key(&"AB12".repeat(16)));
    assert!(!is_key("ab12"));
}

#[test]
fn the_table_is_newest_first_with_expiry() {
    let now = humantime::parse_rfc3339("2026-11-25T12:00:00Z").unwrap();
    let mut entries = vec![
        entry(&"a".repeat(64), "2026-11-24T10:00:00Z", Some("24h")),
        entry(&"b".repeat(64), "2026-11-25T11:00:00Z", Some("24h")),
        entry(&"c".repeat(64), "2026-11-25T11:30:00Z", None),
        entry(&"d".repeat(64), "2026-11-25T11:59:00Z", Some("1h30m0s")),
    ];
    newest_first(&mut entries);
    let out = render(&entries, false, now);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("KEY            TASK TYPE   NODE"),
        "{out}"
    );
    let row = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    let size = entries[0].raw.len().to_string();
    assert_eq!(row(lines[1])[0], "d".repeat(12));
    assert_eq!(
        row(lines[1])[1..],
        ["pod", "train", "wf-a", "60s", "in", "89m", &size]
    );
    assert_eq!(row(lines[2])[4..6], ["30m", "never"]);
    assert_eq!(row(lines[3])[4..7], ["60m", "in", "23h"]);
    assert_eq!(row(lines[4])[4..6], ["26h", "expired"]);
    let wide = render(&entries, true, now);
    assert!(wide.contains(&"d".repeat(64)), "{wide}");
    assert!(wide.contains("weft-cache-pod"), "{wide}");
}

#[test]
fn prefixes_resolve_to_one_entry() {
    let a = format!("abcdef0{}", "0".repeat(57));
    let b = format!("abcdef1{}", "0".repeat(57));
    let c = format!("123456{}", "0".repeat(58));
    let t = "2026-11-25T11:00:00Z";
    let entries = vec![entry(&a, t, None), entry(&b, t, None), entry(&c, t, None)];
    assert_eq!(resolve(&entries, "ABCDEF0", "ns").unwrap().key, a);
    assert_eq!(resolve(&entries, &b, "ns").unwrap().key, b);
    assert_eq!(resolve(&entries, "123456", "ns").unwrap().key, c);
    let err = |k: &str| resolve(&entries, k, "ns").unwrap_err().to_string();
    assert_eq!(
        err("abcde"),
        "cache key abcde: give at least 6 characters of it"
    );
    assert!(err("abcdeg").contains("hex"), "{}", err("abcdeg"));
    assert_eq!(err("ffffff"), "no cache entry ffffff in namespace ns");
    let ambiguous = err("abcdef");
    assert!(
        ambiguous.starts_with("cache key abcdef is ambiguous in namespace ns: it begins 2 keys")
            && ambiguous.contains(&a)
            && ambiguous.contains(&b),
        "{ambiguous}"
    );
}

#[test]
fn get_prints_the_key_first() {
    let e = entry(&"a".repeat(64), "2026-11-25T11:00:00Z", Some("24h"));
    let text = with_key(&e.key, e.object()).unwrap();
    assert!(
        text.starts_with(&format!("{{\n  \"key\": \"{}\",\n  \"createdAt\"", e.key)),
        "{text}"
    );
    let back: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back["key"], e.key.as_str());
    assert_eq!(back["outputs"], json!({"n": 1}));
    assert_eq!(with_key("k", Map::new()).unwrap(), "{\n  \"key\": \"k\"\n}");
}
