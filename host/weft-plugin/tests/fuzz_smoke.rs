//! A bounded mutation fuzz of the plugin manifest reader
//! ([`weft_plugin::fuzz::manifest`]), seeded with every manifest in the
//! repository; see docs/fuzzing.md.

use std::path::Path;

const TOKENS: &[&str] = &[
    "name: ",
    "version: ",
    "world: ",
    "taskTypes: [",
    "resources: [{apiVersion: v1, kind: Pod}]",
    "limits: {",
    "deadline: ",
    "memory: ",
    "1Ei",
    "99999999999999999999Mi",
    "0s",
    "-1s",
    "config: {",
    "valueFrom: {",
    "secretKeyRef: {",
    "middleware: {",
    "failStrategy: ",
    "priority: ",
    "2147483648",
    "]",
    "}",
    "\n",
    ": ",
    "\"",
    "'",
    "&a",
    "*a",
    "~",
    "🦀",
];

fn seeds() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [
        "plugins",
        "plugins/testing",
        "sdk/python",
        "sdk/js",
        "sdk/c",
        "sdk/rust",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            for f in [
                e.path().join("weft-plugin.yaml"),
                e.path().join("template/weft-plugin.yaml"),
            ] {
                if let Ok(bytes) = std::fs::read(&f) {
                    out.push(bytes);
                }
            }
        }
    }
    out
}

#[test]
fn the_manifest_reader_never_panics() {
    let seeds = seeds();
    assert!(seeds.len() > 10, "{} manifests", seeds.len());
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let n = weft_dag::fuzz::harness::run(
        "manifest",
        weft_plugin::fuzz::manifest,
        &seeds,
        TOKENS,
        &regressions,
    );
    assert!(n > 100, "only {n} inputs ran");
}
