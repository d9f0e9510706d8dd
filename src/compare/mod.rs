//! `ovbench compare A.json B.json …`: one table with a column per run and
//! each run's ratio to the first, per size; a significance verdict per
//! size from the stored samples (Mann–Whitney U, src/stats/hist.rs); the
//! differences between the runs' environments; `--fail-if-slower PCT` for
//! regression gates; `-o FIG` for the matching figure.

mod entries;
mod envdiff;

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::plot::load::{read_all, RunFile};
use crate::stats::hist;
use entries::entries;
pub use entries::{Entry, Metric};

/// A verdict needs at least this many samples on each side.
pub const MIN_SAMPLES: u64 = 10;
/// The two-sided significance level of a verdict.
pub const ALPHA: f64 = 0.01;

/// `ovbench compare`'s options.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "The first file is the baseline: every other run's column shows its figure, its ratio to the baseline and a verdict per size:\n  slower / faster (p=…)  Mann–Whitney U on the two runs' samples, two-sided, p < 0.01\n  same (p=…)             no significant difference\n  n/a (n=A vs B)         fewer than 10 samples on a side (the two counts)\n  n/a (derived figure)   computed from other figures (bcast's max OL_i)\nSamples, as stored in the JSON: latency and bw/bibw/msgrate the per-iteration (per-window) times, overhead its repeats, logp the repetitions of os, or and g (g(0) and --flood's g are one saturation test: n=1), bcast each method's measurements, overlap each side's waits in the step, commtest its iterations (--iters).\n\nExamples:\n  ovbench compare ucx-native.json ucx-rdma-read.json tcp-eager.json\n  ovbench compare main.json branch.json --fail-if-slower 5     # CI gate: exit 1 on a significant 5 % slowdown\n  ovbench compare a.json b.json -o ab.svg"
)]
pub struct CompareArgs {
    /// Result files of one command (written by --json; one written with a
    /// --proto list holds a run per protocol); the first run is the baseline.
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Also draw the command's figure of the runs (.svg or .png).
    #[arg(short = 'o', long = "output", value_name = "FIG.svg|FIG.png")]
    pub output: Option<PathBuf>,
    /// Exit 1 when a run is significantly slower than the baseline by more than PCT percent at some size.
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub fail_if_slower: Option<f64>,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is no percentage: give e.g. 5 for 5 %")),
    }
}

/// How one run's figure at one key stands against the baseline's.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Slower(f64),
    Faster(f64),
    Same(f64),
    /// Too few samples: the baseline's count and this run's (`None`
    /// where that side's file keeps no samples for the row).
    TooFew(Option<u64>, Option<u64>),
    /// No samples stored on either side.
    NoSamples,
    /// A figure derived from others (bcast's max OL_i): nothing to test.
    Derived,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = |p: &f64| {
            if *p < 0.001 {
                "p<0.001".to_string()
            } else {
                format!("p={p:.3}")
            }
        };
        match self {
            Verdict::Slower(x) => write!(f, "slower ({})", p(x)),
            Verdict::Faster(x) => write!(f, "faster ({})", p(x)),
            Verdict::Same(x) => write!(f, "same ({})", p(x)),
            Verdict::TooFew(a, b) => {
                let n = |n: &Option<u64>| n.map_or("?".to_string(), |n| n.to_string());
                write!(f, "n/a (n={} vs {})", n(a), n(b))
            }
            Verdict::NoSamples => write!(f, "n/a (no samples stored)"),
            Verdict::Derived => write!(f, "n/a (derived figure)"),
        }
    }
}

/// The verdict of `b` against the baseline `a`.
/// A verdict only where both sides store at least [`MIN_SAMPLES`]
/// samples; otherwise "n/a" naming both counts.
pub fn verdict(a: &Entry, b: &Entry) -> Verdict {
    if a.derived || b.derived {
        return Verdict::Derived;
    }
    // A side's count: its stored samples, else the count its row reports.
    let count = |e: &Entry| e.samples.as_deref().map(hist::count).or(e.n);
    let (na, nb) = (count(a), count(b));
    let (Some(sa), Some(sb)) = (&a.samples, &b.samples) else {
        return match (na, nb) {
            (Some(x), Some(y)) if x.min(y) < MIN_SAMPLES => Verdict::TooFew(na, nb),
            _ => Verdict::NoSamples,
        };
    };
    if hist::count(sa).min(hist::count(sb)) < MIN_SAMPLES {
        return Verdict::TooFew(na, nb);
    }
    match hist::mann_whitney(sb, sa) {
        Some(t) if t.p < ALPHA && t.a_greater > 0.5 => Verdict::Slower(t.p),
        Some(t) if t.p < ALPHA => Verdict::Faster(t.p),
        Some(t) => Verdict::Same(t.p),
        None => Verdict::TooFew(na, nb),
    }
}

/// The comparison of every run against the first.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub command: String,
    pub metric: Metric,
    pub labels: Vec<String>,
    pub files: Vec<String>,
    /// Per run, the rows its method flagged invalid (left out).
    pub invalid: Vec<usize>,
    /// Per key of the baseline that another run has too: the key and
    /// each run's entry (`None` where that run has no such row, e.g. a
    /// size `--proto raw` skips).
    pub rows: Vec<(String, Vec<Option<Entry>>)>,
    /// Keys left out because the baseline or every other run lacks them.
    pub left_out: Vec<String>,
    pub env_differences: Vec<String>,
}

/// Compare `runs` (all of one command, the first the baseline).
pub fn compare(runs: &[RunFile]) -> Result<Comparison> {
    let first = &runs[0];
    let per_run: Vec<(Metric, Vec<Entry>)> = runs.iter().map(entries).collect();
    let metric = per_run[0].0.clone();
    let mut keys: Vec<(u64, String, String)> = Vec::new();
    for (_, es) in &per_run {
        for e in es {
            if !keys.iter().any(|k| k.2 == e.key) {
                keys.push((e.order.0, e.order.1.clone(), e.key.clone()));
            }
        }
    }
    keys.sort();
    let (mut rows, mut left_out) = (Vec::new(), Vec::new());
    for (_, _, key) in keys {
        let found: Vec<Option<Entry>> = per_run
            .iter()
            .map(|(_, es)| es.iter().find(|e| e.key == key).cloned())
            .collect();
        if found[0].is_some() && found[1..].iter().any(Option::is_some) {
            rows.push((key, found));
        } else {
            left_out.push(key);
        }
    }
    if rows.is_empty() {
        bail!(
            "{} and the other files have no {} in common with the first: compare runs over the same sizes (e.g. the same --sizes)",
            first.path.display(),
            if matches!(first.command.as_str(), "latency" | "bw" | "bibw" | "msgrate" | "overhead" | "logp") {
                "message size"
            } else {
                "row (size, step, method or protocol)"
            }
        );
    }
    Ok(Comparison {
        command: first.command.clone(),
        metric,
        labels: runs.iter().map(|r| r.label.clone()).collect(),
        files: runs.iter().map(|r| r.path.display().to_string()).collect(),
        invalid: runs.iter().map(|r| r.invalid).collect(),
        rows,
        left_out,
        env_differences: envdiff::differences(runs),
    })
}

/// A run's letter: A for the baseline, then B, C, …
fn letter(i: usize) -> String {
    let c = (b'A' + (i % 26) as u8) as char;
    if i < 26 {
        c.to_string()
    } else {
        format!("{c}{}", i / 26)
    }
}

/// The ratio of `b` to the baseline `a`.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (a != 0.0 && a.is_finite() && b.is_finite()).then(|| b / a)
}

fn cell(v: f64) -> String {
    if !v.is_finite() {
        "n/a".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

impl Comparison {
    /// The printed report: legend, table, differences.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "# compare: {}, {} runs, baseline A; verdicts: Mann–Whitney U, two-sided, p < {ALPHA}, at least {MIN_SAMPLES} samples a side",
            self.command,
            self.labels.len()
        )];
        for (i, (l, f)) in self.labels.iter().zip(&self.files).enumerate() {
            let bad = match self.invalid.get(i) {
                Some(&n) if n > 0 => format!("; {n} row(s) flagged invalid left out"),
                _ => String::new(),
            };
            out.push(format!("# {}: {l}  ({f}){bad}", letter(i)));
        }
        let mut head = vec![match self.command.as_str() {
            "bcast" => "method".to_string(),
            "commtest" => "experiment".to_string(),
            "overlap" => "pair size step side".to_string(),
            _ => "size[B]".to_string(),
        }];
        for i in 0..self.labels.len() {
            head.push(format!("{} {}", letter(i), self.metric.head));
            if i > 0 {
                head.push(format!("{}/A", letter(i)));
                head.push(format!("{} vs A", letter(i)));
            }
        }
        let mut table: Vec<Vec<String>> = vec![head];
        for (key, es) in &self.rows {
            let mut r = vec![key.clone()];
            let Some(base) = &es[0] else { continue };
            for (i, e) in es.iter().enumerate() {
                match e {
                    None => r.extend(["-".to_string(), "-".into(), "no such row".into()]),
                    Some(e) => {
                        r.push(cell(e.value));
                        if i > 0 {
                            r.push(
                                ratio(base.value, e.value)
                                    .map_or("n/a".into(), |x| format!("{x:.3}")),
                            );
                            r.push(verdict(base, e).to_string());
                        }
                    }
                }
            }
            table.push(r);
        }
        let widths: Vec<usize> = (0..table[0].len())
            .map(|c| {
                table
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for (n, r) in table.iter().enumerate() {
            let mut line = String::from(if n == 0 { "#" } else { " " });
            for (c, (text, w)) in r.iter().zip(&widths).enumerate() {
                let pad = w - text.chars().count();
                if c == 0 {
                    line.push_str(&format!(" {text}{}", " ".repeat(pad)));
                } else {
                    line.push_str(&format!("  {}{text}", " ".repeat(pad)));
                }
            }
            out.push(line.trim_end().to_string());
        }
        if !self.left_out.is_empty() {
            out.push(format!(
                "# not in every run, left out: {}",
                self.left_out.join(", ")
            ));
        }
        if self.env_differences.is_empty() {
            out.push("# environments: no differences".into());
        } else {
            out.push("# environments differ in:".into());
            out.extend(self.env_differences.iter().map(|d| format!("#   {d}")));
        }
        out
    }

    /// The rows where a run is significantly slower than the baseline
    /// by more than `pct` percent: (run letter, key, slowdown in %).
    pub fn slower_than(&self, pct: f64) -> Vec<(String, String, f64)> {
        let mut out = Vec::new();
        for (key, es) in &self.rows {
            let Some(base) = &es[0] else { continue };
            for (i, e) in es.iter().enumerate().skip(1) {
                let Some(e) = e else { continue };
                let Some(r) = ratio(base.value, e.value) else {
                    continue;
                };
                let slowdown = if self.metric.higher_is_better {
                    (1.0 / r - 1.0) * 100.0
                } else {
                    (r - 1.0) * 100.0
                };
                if matches!(verdict(base, e), Verdict::Slower(_)) && slowdown > pct {
                    out.push((letter(i), key.clone(), slowdown));
                }
            }
        }
        out
    }
}

/// Run `ovbench compare`; the exit code (1 under --fail-if-slower when
/// a significant slowdown beyond it is found).
pub fn run(args: &CompareArgs) -> Result<i32> {
    if let Some(o) = &args.output {
        crate::plot::render::Format::of(o).map_err(crate::run::usage)?;
        crate::files::output::check("-o", o, false).map_err(crate::run::usage)?;
    }
    let runs = read_all(&args.files).map_err(crate::run::usage)?;
    if runs.len() < 2 {
        return Err(crate::run::usage(anyhow::anyhow!(
            "{} holds one run: give two files or more (the first is the baseline), or one written with a --proto list",
            args.files[0].display()
        )));
    }
    let c = compare(&runs).map_err(crate::run::usage)?;
    for l in c.lines() {
        println!("{l}");
    }
    if let Some(o) = &args.output {
        let fig = crate::plot::kinds::figure(&runs).map_err(crate::run::usage)?;
        crate::plot::render::render(&fig, o)?;
    }
    if let Some(pct) = args.fail_if_slower {
        let bad = c.slower_than(pct);
        if !bad.is_empty() {
            let list: Vec<String> = bad
                .iter()
                .map(|(r, k, s)| format!("{r} at {k} (+{s:.1} %)"))
                .collect();
            eprintln!(
                "ovbench: compare: significantly slower than A by more than {pct} %: {}",
                list.join(", ")
            );
            return Ok(1);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(values: &[f64]) -> Entry {
        Entry {
            key: "8".into(),
            order: (8, String::new()),
            value: values[0],
            samples: Some(hist::from_values(values)),
            n: Some(values.len() as u64),
            derived: false,
        }
    }

    #[test]
    fn verdicts() {
        let a = entry(&(0..20).map(|i| 100.0 + i as f64).collect::<Vec<_>>());
        let b = entry(&(0..20).map(|i| 200.0 + i as f64).collect::<Vec<_>>());
        assert!(matches!(verdict(&a, &b), Verdict::Slower(_)));
        assert!(matches!(verdict(&b, &a), Verdict::Faster(_)));
        assert!(matches!(verdict(&a, &a), Verdict::Same(_)));
        let few = entry(&[1.0, 2.0, 3.0]);
        assert_eq!(verdict(&a, &few), Verdict::TooFew(Some(20), Some(3)));
        assert_eq!(verdict(&a, &few).to_string(), "n/a (n=20 vs 3)");
        let none = Entry {
            samples: None,
            n: Some(100),
            ..entry(&[1.0])
        };
        assert_eq!(verdict(&none, &none).to_string(), "n/a (no samples stored)");
        // One side without samples (a figure it measured once) is no test.
        let once = Entry {
            samples: None,
            n: Some(1),
            ..entry(&[1.0])
        };
        assert_eq!(verdict(&a, &once).to_string(), "n/a (n=20 vs 1)");
        let derived = Entry {
            derived: true,
            ..a.clone()
        };
        assert_eq!(verdict(&a, &derived), Verdict::Derived);
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_pct("5"), Ok(5.0));
        assert_eq!(parse_pct("2.5%"), Ok(2.5));
        assert!(parse_pct("-1").is_err());
        assert!(parse_pct("x").is_err());
    }
}
