//! `ovbench compare`: the table of four sim runs (baseline, a slower
//! model, a run with too few samples, a repeat of the baseline) snapshot-tested; `--fail-if-slower`
//! as a gate; `-o` draws the figure; the refusals (different commands, no
//! common sizes, an older schema, one file) each one line and exit 2.
//! For logp, bcast, overlap and commtest, the samples their JSON keeps:
//! a model that differs gives a significant verdict, a repeat of the
//! baseline does not, a run with fewer than 10 samples gives `n/a (n=…)`.
//!
//! Under sim every number is repeatable; only the scratch directory in
//! the legend is replaced by `<dir>`. Update, after reviewing the diff:
//! `INSTA_UPDATE=always cargo test -p ovbench --test compare`.
#![cfg(feature = "sim")]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{ovbench, words, Scratch};

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
    std::fs::write(&old, text.replace("\"ovbench/5\"", "\"ovbench/4\"")).unwrap();
    for (args, says) in [
        (vec![s(&lat), s(&ovh)], "give files of one command"),
        (vec![s(&lat), s(&big)], "no message size in common"),
        (vec![s(&lat), s(&old)], "schema ovbench/4"),
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

/// A damaged file is refused by compare and plot alike, in one line
/// naming `file:tables[t].rows[r]:field` and exit 2: a figure that is no
/// number, one beyond any measurement (a 309-digit number), a histogram
/// that does not decode. A histogram that is absent is no damage: its
/// size reads "no samples stored".
#[test]
fn damaged_rows_are_refused_by_where_they_are() {
    let d = Scratch::new("compare-damaged");
    let lat = sim(&d, "lat", &["latency", "--sizes", "8,16", "--iters", "20"]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lat).unwrap()).unwrap();
    let huge: serde_json::Value = serde_json::from_str(&format!("1{}", "0".repeat(308))).unwrap();
    let damage: [(&str, serde_json::Value, &str); 3] = [
        ("p50_ns", "fast".into(), "where a number or null belongs"),
        ("p50_ns", huge, "beyond any measurement"),
        ("histogram", "AAAA".into(), "does not decode"),
    ];
    for (i, (field, value, says)) in damage.into_iter().enumerate() {
        let mut bad = doc.clone();
        bad["tables"][0]["rows"][1][field] = value;
        let path = d.join(format!("bad{i}.json"));
        std::fs::write(&path, bad.to_string()).unwrap();
        let at = format!("{}:tables[0].rows[1]:{field}: ", path.display());
        let fig = d.join(format!("bad{i}.svg"));
        for args in [
            vec!["compare", s(&lat), s(&path)],
            vec!["plot", s(&path), "-o", s(&fig)],
        ] {
            let r = ovbench(&args, LIMIT);
            assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains(&at) && r.stderr.contains(says),
                "{args:?}: {}",
                r.stderr
            );
            assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        }
    }
    let mut none = doc.clone();
    none["tables"][0]["rows"][1]["histogram"] = serde_json::Value::Null;
    let path = d.join("none.json");
    std::fs::write(&path, none.to_string()).unwrap();
    let r = ovbench(&["compare", s(&lat), s(&path)], LIMIT).expect_ok();
    assert!(r.stdout.contains("no samples stored"), "{}", r.stdout);
}

/// The table's cells of the row whose key starts with `key`: the key,
/// then per run its figure and, after A, its ratio and verdict (cells
/// are separated by two spaces or more, a cell holds single ones).
fn cells<'a>(table: &'a str, key: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| !l.starts_with('#') && l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no row `{key}` in\n{table}"));
    line.trim()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// The sim model of the runs compared: jittered, so that samples vary,
/// and seeded, so that a repeat draws the same.
const MODEL: &str = "jitter=20ns,seed=3";

/// Sim runs of `name`: A the command line `base` under [`MODEL`], B the
/// same with the parameters `differ` changed, C a repeat of A, D the
/// command line `few` (fewer than 10 samples); their comparison's table.
fn four_runs(name: &str, base: &str, differ: &str, few: &str) -> String {
    fn with<'a>(line: &'a str, model: &'a str) -> Vec<&'a str> {
        let mut a = words(line);
        a.extend(["--sim", model]);
        a
    }
    let d = Scratch::new(&format!("compare-{name}"));
    let differs = format!("{differ},{MODEL}");
    let a = sim(&d, "a", &with(base, MODEL));
    let b = sim(&d, "b", &with(base, &differs));
    let c = sim(&d, "c", &with(base, MODEL));
    let f = sim(&d, "d", &with(few, MODEL));
    let r = ovbench(&["compare", s(&a), s(&b), s(&c), s(&f)], LIMIT).expect_ok();
    r.stdout
}

/// Row `key`'s verdicts of B, C and D against A.
fn verdicts<'a>(table: &'a str, key: &str) -> [&'a str; 3] {
    let c = cells(table, key);
    assert!(c.len() >= 11, "row `{key}` has {} cells: {c:?}", c.len());
    let n = c.len();
    [c[n - 7], c[n - 4], c[n - 1]]
}

/// B significantly different, C the same as A, D n/a with both counts.
fn assert_tested(table: &str, key: &str, few: &str) {
    let [b, c, d] = verdicts(table, key);
    assert!(
        b.starts_with("slower (p") || b.starts_with("faster (p"),
        "{key}: B differs, verdict `{b}`:\n{table}"
    );
    assert!(
        c.starts_with("same (p"),
        "{key}: C repeats A, verdict `{c}`:\n{table}"
    );
    assert_eq!(d, few, "{key}:\n{table}");
}

#[test]
fn logp_tests_its_repetitions() {
    // os is the send call: 400 ns against 300 ns. RTT jitters, so the
    // os/RTT rounds run to the cap (--max-its 20 × 4 = 80 up to 1 KiB);
    // or's rounds stop at 3 (its figure is steady under the model).
    let args = |its| format!("logp --max-size 64 --eps 0.0001 --max-its {its}");
    let (base, few) = (args(20), args(2));
    let t = four_runs("logp", &base, "os=400ns", &few);
    for size in ["0", "8", "64"] {
        assert_tested(&t, &format!("{size} os"), "n/a (n=80 vs 8)");
        assert_eq!(verdicts(&t, &format!("{size} or"))[1], "n/a (n=3 vs 3)");
    }
    // g from RTT's repetitions; g(0) is one saturation test.
    assert!(verdicts(&t, "64 g")[1].starts_with("same (p"), "{t}");
    assert_eq!(verdicts(&t, "0 g")[0], "n/a (n=1 vs 1)");
}

#[test]
fn bcast_tests_its_measurements() {
    let args = |min, max| {
        format!(
            "bcast --np 4 --method all --reps 5 --min-measurements {min} --max-measurements {max}"
        )
    };
    let (base, few) = (args(10, 12), args(3, 3));
    let t = four_runs("bcast", &base, "L=1.5us", &few);
    for m in [
        "ack",
        "barrier-dissemination",
        "rounds-forward",
        "rounds-backward",
    ] {
        assert_tested(&t, &format!("{m} np=4"), "n/a (n=10 vs 3)");
    }
    // max OL_i is derived from RTL_i and E_i: nothing of its own to test.
    assert_eq!(verdicts(&t, "max-oli np=4")[0], "n/a (derived figure)");
}

#[test]
fn overlap_tests_the_waits_of_each_step() {
    // o_r 400 ns against 300 ns: the receiver's wait per transfer.
    let base = "overlap --sizes 1K --iters 20 --steps 1";
    let few = "overlap --sizes 1K --iters 5 --steps 1";
    let t = four_runs("overlap", base, "or=400ns", few);
    assert_tested(&t, "isend-irecv 1K step 1 receiver", "n/a (n=20 vs 5)");
    assert_eq!(
        verdicts(&t, "isend-irecv 1K step 0 sender")[2],
        "n/a (n=20 vs 5)"
    );
}

#[test]
fn commtest_tests_its_iterations() {
    let args = |iters| format!("commtest --total 2K --min-packet 1K --iters {iters}");
    let (base, few) = (args(12), args(5));
    let t = four_runs("commtest", &base, "L=1.5us", &few);
    for e in [
        "basic swap (0,0) simple x1",
        "basic swap (1,10) sync. send x1",
        "basic swap (0,0) simple x2",
    ] {
        assert_tested(&t, e, "n/a (n=12 vs 5)");
    }
}
