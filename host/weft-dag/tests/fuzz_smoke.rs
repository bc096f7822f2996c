//! A bounded mutation fuzz of the spec reader, validator, compiler and
//! expressions ([`weft_dag::fuzz`]), in every `cargo test`: seeds from
//! examples/, random byte and token mutations for `WEFT_FUZZ_SECS` seconds
//! per target (default 3), and every input in tests/fuzz-regressions/ (a
//! crash found once stays a test). A panic fails with the input that
//! caused it. The coverage-guided runs are `fuzz/` (docs/fuzzing.md).

use serde::Deserialize;
use std::path::Path;

use weft_dag::fuzz::harness;

/// Words the mutator splices in: the syntax the parsers care about.
const TOKENS: &[&str] = &[
    "${",
    "}",
    "nodes.",
    ".outputs.",
    "inputs.",
    "dependsOn: [",
    "]",
    "- id: ",
    "\n",
    ": ",
    "'",
    "\"",
    "{",
    "[",
    "task: {type: pod}",
    "when: ",
    "array: {over: ",
    "gate: {}",
    "retry: {limit: 99999999999}",
    "timeout: 1s",
    "parallelism: ",
    "&a",
    "*a",
    "!!binary",
    "~",
    "-1",
    "18446744073709551616",
    "1e999",
    "size(",
    "has(",
    ".map(x, ",
    ")",
    " + ",
    " / 0",
    " % 0",
    "\\u0000",
    "🦀",
];

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `spec` of every example, and the strings in it (expressions).
fn seeds() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut specs, mut exprs) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let doc = serde_yaml::Value::deserialize(doc).unwrap();
            specs.push(serde_yaml::to_string(&doc["spec"]).unwrap().into_bytes());
            collect_strings(&doc["spec"], &mut exprs);
        }
    }
    exprs.extend(
        [
            "nodes.a.outputs.num + 1",
            "inputs.list.map(x, x)",
            "${inputs.n} and ${nodes['a'].phase}",
        ]
        .map(|s| s.as_bytes().to_vec()),
    );
    (specs, exprs)
}

fn collect_strings(v: &serde_yaml::Value, out: &mut Vec<Vec<u8>>) {
    match v {
        serde_yaml::Value::String(s) if s.contains("${") || s.contains("nodes.") => {
            out.push(s.clone().into_bytes())
        }
        serde_yaml::Value::Sequence(xs) => xs.iter().for_each(|x| collect_strings(x, out)),
        serde_yaml::Value::Mapping(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

fn fuzz(name: &str, target: fn(&[u8]), seeds: &[Vec<u8>]) -> u64 {
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    harness::run(name, target, seeds, TOKENS, &regressions)
}

#[test]
fn the_spec_reader_validator_and_compiler_never_panic() {
    let (specs, _) = seeds();
    let n = fuzz("workflow_spec", weft_dag::fuzz::workflow_spec, &specs);
    assert!(n > 100, "only {n} inputs ran");
}

#[test]
fn expressions_never_panic() {
    let (_, exprs) = seeds();
    let n = fuzz("expression", weft_dag::fuzz::expression, &exprs);
    assert!(n > 100, "only {n} inputs ran");
}
