//! A bounded, deterministic mutation fuzzer for `cargo test`: no coverage
//! guidance (that is cargo-fuzz's job, `fuzz/`), but it runs on stable in
//! every test run, starts from real inputs and splices in the syntax each
//! parser cares about. A panic fails with the input, saved for the
//! regression corpus.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

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

/// One to five mutations of `input`: bit flips, deletions, `tokens`
/// spliced in, duplicated slices (deep nesting, repeated keys), random bytes.
fn mutate(rng: &mut Rng, input: &[u8], tokens: &[&str]) -> Vec<u8> {
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
            2 if !tokens.is_empty() => {
                let t = tokens[rng.below(tokens.len())].as_bytes();
                out.splice(at..at, t.iter().copied());
            }
            3 if !out.is_empty() => {
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

/// Seconds per target: `WEFT_FUZZ_SECS`, default 3.
pub fn budget() -> Duration {
    let secs = std::env::var("WEFT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

/// Runs `target` on every file in `regressions` (a directory; each crash
/// found once), on every seed, then on mutations of the seeds until
/// [`budget`] runs out. Panics, naming the input, if `target` panics.
/// Returns how many inputs ran.
pub fn run(
    name: &str,
    target: fn(&[u8]),
    seeds: &[Vec<u8>],
    tokens: &[&str],
    regressions: &Path,
) -> u64 {
    let run_one = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            let file = std::env::temp_dir().join(format!("weft-fuzz-{name}-crash"));
            let _ = std::fs::write(&file, input);
            panic!(
                "{name} panicked on {:?} (saved to {}; add it to {})",
                String::from_utf8_lossy(input),
                file.display(),
                regressions.display()
            );
        }
    };
    if let Ok(entries) = std::fs::read_dir(regressions) {
        for entry in entries.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                run_one(&bytes);
            }
        }
    }
    seeds.iter().for_each(|s| run_one(s));
    let (start, mut rng, mut n) = (Instant::now(), Rng(0x5745_4654_4655_5a5a), 0);
    while start.elapsed() < budget() && !seeds.is_empty() {
        let seed = &seeds[rng.below(seeds.len())];
        run_one(&mutate(&mut rng, seed, tokens));
        n += 1;
    }
    n
}
