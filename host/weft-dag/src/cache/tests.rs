use super::*;
use serde_json::json;

fn task(config: Value) -> TaskSpec {
    serde_json::from_value(json!({"type": "pod", "config": config})).unwrap()
}

fn spec(version: &str, include_plugin: bool) -> CacheSpec {
    CacheSpec {
        version: version.into(),
        max_age: None,
        include_plugin,
    }
}

#[test]
fn the_key_follows_type_config_inputs_and_version_only() {
    let inputs: Map<String, Value> = serde_json::from_value(json!({"a": 1, "b": "x"})).unwrap();
    let reordered: Map<String, Value> = serde_json::from_value(json!({"b": "x", "a": 1})).unwrap();
    let base = key(
        &task(json!({"image": "i"})),
        &inputs,
        &[],
        &spec("1", false),
        None,
    );
    assert_eq!(base.len(), 64);
    assert_eq!(
        base,
        key(
            &task(json!({"image": "i"})),
            &reordered,
            &[],
            &spec("1", false),
            Some("sha256:p")
        )
    );
    let changed_input: Map<String, Value> =
        serde_json::from_value(json!({"a": 2, "b": "x"})).unwrap();
    for other in [
        key(
            &task(json!({"image": "j"})),
            &inputs,
            &[],
            &spec("1", false),
            None,
        ),
        key(
            &task(json!({"image": "i"})),
            &changed_input,
            &[],
            &spec("1", false),
            None,
        ),
        key(
            &task(json!({"image": "i"})),
            &inputs,
            &[],
            &spec("2", false),
            None,
        ),
        key(
            &task(json!({"image": "i"})),
            &inputs,
            &[],
            &spec("1", true),
            Some("sha256:p"),
        ),
    ] {
        assert_ne!(base, other);
    }
}

#[test]
fn max_age_limits_use_and_the_writers_age_collects() {
    let now = SystemTime::now();
    let e = CacheEntry {
        created_at: crate::status::timestamp(now - Duration::from_secs(120)),
        max_age: Some("1m".into()),
        ..Default::default()
    };
    assert!(e.fresh(None, now));
    assert!(e.fresh(Some(Duration::from_secs(600)), now));
    assert!(!e.fresh(Some(Duration::from_secs(60)), now));
    assert!(e.expired(now));
}

#[test]
fn input_artifacts_count_by_content_not_by_name() {
    use crate::artifacts::{ArtifactRef, ArtifactSource, ResolvedInput};
    let art = |name: &str, digest: &str| ResolvedInput {
        name: name.into(),
        path: format!("/in/{name}"),
        source: ArtifactSource::Stored(ArtifactRef {
            key: format!("ns/wf-{name}/uid/a/0/{name}"),
            digest: digest.into(),
            size: 1,
            kind: "file".into(),
        }),
    };
    let inputs = Map::new();
    let t = task(json!({"image": "i"}));
    let k = |a: &[ResolvedInput]| key(&t, &inputs, a, &spec("1", false), None);
    let base = k(&[art("data", "sha256:aa")]);
    assert_eq!(base, k(&[art("renamed", "sha256:aa")]));
    assert_ne!(base, k(&[art("data", "sha256:bb")]));
    assert_ne!(base, k(&[]));
    assert_eq!(k(&[]), key(&t, &inputs, &[], &spec("1", false), None));
}
