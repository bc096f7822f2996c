//! A bounded mutation fuzz of the spec reader, validator, compiler and
//! expressions ([`weft_dag::fuzz`]), in every `cargo test`: seeds from
//! examples/, random byte and token mutations for `WEFT_FUZZ_SECS` seconds
//! per target (default 3), and every input in tests/fuzz-regressions/ (a
//! crash found once stays a test). A panic fails with the input that
//! caused it. The coverage-guided runs are `fuzz/` (docs/fuzzing.md).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

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

/// xorshift64*: deterministic, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(5) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let end = (at + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                out.splice(at..at, t.iter().copied());
            }
            3 if !out.is_empty() => {
                // Duplicate a slice: deep nesting, repeated keys.
                let start = rng.below(out.len());
                let end = (start + rng.below(64)).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            _ => out.insert(at.min(out.len()), rng.next() as u8),
        }
    }
    out
}

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
        let doc: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        specs.push(serde_yaml::to_string(&doc["spec"]).unwrap().into_bytes());
        collect_strings(&doc["spec"], &mut exprs);
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

fn budget() -> Duration {
    let secs = std::env::var("WEFT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

/// Runs `target` on every seed, then on mutations until the budget ends.
fn fuzz(name: &str, target: fn(&[u8]), seeds: &[Vec<u8>]) -> u64 {
    let run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            let file = std::env::temp_dir().join(format!("weft-fuzz-{name}-crash"));
            std::fs::write(&file, input).unwrap();
            panic!(
                "{name} panicked on {:?} (saved to {}; add it to tests/fuzz-regressions/)",
                String::from_utf8_lossy(input),
                file.display()
            );
        }
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    for entry in std::fs::read_dir(&dir).unwrap() {
        run(&std::fs::read(entry.unwrap().path()).unwrap());
    }
    seeds.iter().for_each(|s| run(s));
    let (start, mut rng, mut n) = (Instant::now(), Rng(0x5745_4654_4655_5a5a), 0);
    while start.elapsed() < budget() {
        let seed = &seeds[rng.below(seeds.len())];
        run(&mutate(&mut rng, seed));
        n += 1;
    }
    n
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
