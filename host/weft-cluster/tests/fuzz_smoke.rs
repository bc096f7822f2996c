//! A bounded mutation fuzz of the dev cluster's patch handlers
//! ([`weft_cluster::fuzz::patches`]): merge, JSON and strategic merge
//! patches and server-side apply's field sets; see docs/fuzzing.md.

use std::path::Path;

const TOKENS: &[&str] = &[
    "{\"op\": \"remove\", \"path\": \"/",
    "{\"op\": \"move\", \"from\": \"/a\", \"path\": \"/a/b\"}",
    "\"$patch\": \"delete\"",
    "\"$patch\": \"replace\"",
    "\"$retainKeys\": [",
    "\"$setElementOrder/containers\": [",
    "\"containers\": [",
    "\"name\": ",
    "\"f:",
    "\"k:{",
    "\"v:",
    "\".\": {}",
    "null",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"-\"",
    "\"/0\"",
    "~1",
    "~0",
    "99999999999999999999",
    "🦀",
];

fn seeds() -> Vec<Vec<u8>> {
    let pod = r#"{"metadata": {"name": "p", "labels": {"a": "b"}, "managedFields": [{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}}}}}}]}, "spec": {"containers": [{"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]}}"#;
    [
        r#"{"metadata": {"labels": {"a": null, "c": "d"}}, "spec": {"containers": [{"name": "side", "image": "x"}]}}"#,
        r#"[{"op": "add", "path": "/spec/containers/-", "value": {"name": "x"}}, {"op": "replace", "path": "/metadata/name", "value": "q"}]"#,
        r#"{"spec": {"containers": [{"name": "main", "$patch": "delete"}], "$setElementOrder/containers": [{"name": "main"}]}}"#,
        r#"[{"op": "test", "path": "/spec", "value": {}}, {"op": "copy", "from": "/spec", "path": "/status"}]"#,
    ]
    .iter()
    .map(|p| format!("{pod}\n---\n{p}").into_bytes())
    .collect()
}

#[test]
fn the_patch_handlers_never_panic() {
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let n = weft_dag::fuzz::harness::run(
        "patches",
        weft_cluster::fuzz::patches,
        &seeds(),
        TOKENS,
        &regressions,
    );
    assert!(n > 100, "only {n} inputs ran");
}
