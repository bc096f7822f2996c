//! Two variants of one run compared on one cluster and controller, for
//! the "within N % of the same run without it" goals (issues 42–44).
//!
//! Why paired and many: the same 1,000 one-node workflows, unchanged,
//! move ±10 % from run to run in one process (benches/controller.rs
//! `DRIFT_ROUNDS`: 14.2k, 13.8k, 13.2k, 12.5k, 11.8k, 14.0k per minute),
//! more than the 5 % a goal judges. So the variants alternate, each
//! round in the other order than the last (ABBA…), every round gives
//! one ratio of adjacent runs, and the figure is the median of those
//! ratios, printed with their range and every run.

use std::collections::BTreeMap;
use std::future::Future;

/// One variant's runs.
#[derive(Default)]
pub struct Variant {
    /// Workflows per minute of each run, in order.
    pub per_min: Vec<f64>,
    /// CPU seconds of the bench process (controller and dev cluster) of
    /// each run.
    pub cpu: Vec<f64>,
    /// The controller's counters summed over the runs.
    pub counts: BTreeMap<String, f64>,
}

/// Both variants' runs, round by round.
pub struct Paired {
    pub labels: [String; 2],
    pub runs: [Variant; 2],
    /// Workflows per run (for per-workflow figures).
    pub workflows: usize,
}

impl Paired {
    /// `rounds` rounds of both variants: `run(variant, round, name)` makes
    /// one run (variant 0 or 1; `name` is unique per run, for workflow
    /// names) and answers its workflows/min.
    pub async fn run<F, Fut>(
        ctx: &weft::controller::Context,
        labels: [&str; 2],
        rounds: usize,
        workflows: usize,
        mut run: F,
    ) -> anyhow::Result<Paired>
    where
        F: FnMut(usize, usize, String) -> Fut,
        Fut: Future<Output = anyhow::Result<f64>>,
    {
        let mut runs = [Variant::default(), Variant::default()];
        for round in 0..rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for v in order {
                let (cpu, then) = (super::own_cpu(), super::counters(ctx));
                let per_min = run(v, round, format!("{}{round}", labels[v])).await?;
                let r = &mut runs[v];
                r.per_min.push(per_min);
                r.cpu.push(super::own_cpu() - cpu);
                for (k, n) in super::since(&super::counters(ctx), &then) {
                    *r.counts.entry(k).or_default() += n;
                }
            }
        }
        Ok(Paired {
            labels: labels.map(String::from),
            runs,
            workflows,
        })
    }

    /// The second variant's workflows/min over the first's, per round.
    pub fn ratios(&self) -> Vec<f64> {
        let [a, b] = &self.runs;
        a.per_min
            .iter()
            .zip(&b.per_min)
            .map(|(a, b)| b / a)
            .collect()
    }

    /// Prints the comparison: medians, the median ratio with its range,
    /// every run, CPU per 1,000 workflows, and per-workflow counters.
    pub fn print(&self, what: &str) {
        let [a, b] = &self.runs;
        let [la, lb] = &self.labels;
        let ratios = self.ratios();
        let (lo, hi) = (
            ratios.iter().copied().fold(f64::MAX, f64::min),
            ratios.iter().copied().fold(f64::MIN, f64::max),
        );
        println!(
            "{what}: {la} {:.0}, {lb} {:.0} workflows/min (medians of {} runs each); \
             {lb}/{la} per round: median {:+.1}% (from {:+.1}% to {:+.1}%)",
            median(&a.per_min),
            median(&b.per_min),
            a.per_min.len(),
            (median(&ratios) - 1.0) * 100.0,
            (lo - 1.0) * 100.0,
            (hi - 1.0) * 100.0,
        );
        let each = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>();
        println!("  runs, {la}: {}", each(&a.per_min).join(" "));
        println!("  runs, {lb}: {}", each(&b.per_min).join(" "));
        let per_k = 1_000.0 / self.workflows as f64;
        println!(
            "  CPU seconds per 1,000 workflows (controller and dev cluster), medians: {la} {:.2}, {lb} {:.2}",
            median(&a.cpu) * per_k,
            median(&b.cpu) * per_k,
        );
        println!("  per workflow ({la} / {lb}):");
        let n = (a.per_min.len() * self.workflows) as f64;
        for (k, v) in &a.counts {
            let other = b.counts.get(k).copied().unwrap_or(0.0);
            println!("    {k}: {:.2} / {:.2}", v / n, other / n);
        }
    }
}

/// The median (the upper one of an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|x, y| x.total_cmp(y));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `var` as a number of rounds, else `default`.
pub fn rounds(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}

/// Whether a paired bench profiles `round`: its `usual` round only, or
/// every round with `PROFILE_EVERY_ROUND=1`. One run's profile holds a
/// few hundred samples, too thin to rank a cost of a few percent; every
/// round's files together are thick enough, as pprof merges the files it
/// is given (`go tool pprof -top -diff_base 'target/controller-plain*'
/// target/controller-io*-cpu.pb.gz`).
pub fn profiles_round(round: usize, usual: usize) -> bool {
    round == usual || std::env::var_os("PROFILE_EVERY_ROUND").is_some()
}
