//! `ovbench compare`: the table of four sim runs (baseline, a slower
//! model, a run with too few samples, a repeat of the baseline) snapshot-tested; `--fail-if-slower`
//! as a gate; `-o` draws the figure; the refusals (different commands, no
//! common sizes, an older schema, one file) each one line and exit 2.
//!
//! Under sim every number is repeatable; only the scratch directory in
//! the legend is replaced by `<dir>`. Update, after reviewing the diff:
//! `INSTA_UPDATE=always cargo test -p ovbench --test compare`.
#![cfg(feature = "sim")]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{ovbench, Scratch};

const LIMIT: Duration = Duration::from_secs(120);

fn sim(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let p = path.to_str().unwrap().to_string();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--transport", "sim", "-q", "--json", &p]);
    ovbench(&a, LIMIT).expect_ok();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Never write snapshots silently (as tests/snapshots.rs).
fn no_silent_updates() {
    if std::env::var_os("INSTA_UPDATE").is_none() {
        std::env::set_var("INSTA_UPDATE", "no");
    }
}

#[test]
fn three_runs_side_by_side() {
    no_silent_updates();
    let d = Scratch::new("compare");
    let base = ["latency", "--sizes", "8:1K", "--iters", "200"];
    let a = sim(&d, "a", &base);
    let mut slow = base.to_vec();
    slow.extend(["--sim", "L=1.2us,jitter=50ns,seed=7"]);
    let b = sim(&d, "b", &slow);
    let c = sim(&d, "c", &["latency", "--sizes", "8:2K", "--iters", "5"]);
    let same = sim(&d, "same", &base);
    let fig = d.join("cmp.svg");
    let r = ovbench(
        &["compare", s(&a), s(&b), s(&c), s(&same), "-o", s(&fig)],
        LIMIT,
    )
    .expect_ok();
    let text = r.stdout.replace(d.to_str().unwrap(), "<dir>");
    insta::assert_snapshot!("latency_three_runs", text);
    assert!(std::fs::read_to_string(&fig).unwrap().contains("<polyline"));

    // The gate: B is about 15 % slower, significantly.
    let r = ovbench(&["compare", s(&a), s(&b), "--fail-if-slower", "5"], LIMIT);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("B at 8 (+"), "{}", r.stderr);
    let r = ovbench(&["compare", s(&a), s(&b), "--fail-if-slower", "50"], LIMIT);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // Faster is no failure.
    let r = ovbench(&["compare", s(&b), s(&a), "--fail-if-slower", "1"], LIMIT);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("faster (p<0.001)"), "{}", r.stdout);
}

#[test]
fn refusals_say_what_is_wrong_in_one_line() {
    let d = Scratch::new("compare-refuse");
    let lat = sim(&d, "lat", &["latency", "--sizes", "8,16", "--iters", "20"]);
    let big = sim(&d, "big", &["latency", "--sizes", "1K", "--iters", "20"]);
    let ovh = sim(&d, "ovh", &["overhead"]);
    let old = d.join("old.json");
    let text = std::fs::read_to_string(&lat).unwrap();
    std::fs::write(&old, text.replace("\"ovbench/4\"", "\"ovbench/3\"")).unwrap();
    for (args, says) in [
        (vec![s(&lat), s(&ovh)], "give files of one command"),
        (vec![s(&lat), s(&big)], "no message size in common"),
        (vec![s(&lat), s(&old)], "schema ovbench/3"),
        (vec![s(&lat), s(&lat), "-o", "x.pdf"], ".svg or .png"),
    ] {
        let mut a = vec!["compare"];
        a.extend(args.iter().copied());
        let r = ovbench(&a, LIMIT);
        assert_eq!(r.code, Some(2), "{a:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{a:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
    let r = ovbench(&["compare", s(&lat)], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("holds one run"), "{}", r.stderr);
}
