//! Arithmetic on user values (issue 29): every integer (or size, or
//! duration) option of every command, found by walking clap's command
//! tree, given 0, 1, 2^32−1, 2^63 and 2^64−1 in turn, the rest of the
//! command line small and under `--transport sim`. Each run must exit 0,
//! 1 or 2 within its deadline, nothing may panic, and no result row of
//! its JSON may have every measured column 0 (a wrapped or truncated
//! count or clock). A value the command cannot run with is refused before
//! it starts (exit 2), so the huge ones cost no more than a parse.
//!
//! The cases run on a few threads; the test prints how many it ran and
//! how long they took. A second test holds the simulator's clock bound
//! end to end: refused up front (exit 2) or named where it is reached
//! (exit 1).

use std::any::TypeId;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ovbench::cli::common::NpList;
use ovbench::cli::Cli;
use ovbench::sizes::{ByteSize, Seconds, Sizes};

/// The five values of the issue.
const VALUES: [&str; 5] = [
    "0",
    "1",
    "4294967295",
    "9223372036854775808",
    "18446744073709551615",
];

/// One run's deadline: a value that is neither refused nor quick fails.
const LIMIT: Duration = Duration::from_secs(15);

/// Whether option `a` takes an integer: a number type, a size (one or a
/// list), a rank count list, or a duration in seconds.
fn takes_integer(a: &clap::Arg) -> bool {
    if !a.get_action().takes_values() || a.get_long().is_none() {
        return false;
    }
    let t = a.get_value_parser().type_id();
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
        TypeId::of::<ByteSize>(),
        TypeId::of::<(ByteSize, ByteSize)>(),
        TypeId::of::<Sizes>(),
        TypeId::of::<NpList>(),
        TypeId::of::<Seconds>(),
    ]
    .iter()
    .any(|id| t == *id)
}

/// The small rest of a command line: (option, value) pairs, and the
/// arguments that stand alone (a tool's files).
fn base(cmd: &str, results: &Path, out: &Path) -> (Vec<(&'static str, String)>, Vec<String>) {
    let s = |v: &str| v.to_string();
    let window = vec![
        ("--sizes", s("8")),
        ("--iters", s("2")),
        ("--warmup", s("0")),
        ("--window", s("2")),
    ];
    let opts = match cmd {
        "latency" => vec![
            ("--sizes", s("8")),
            ("--iters", s("2")),
            ("--warmup", s("0")),
        ],
        "bw" | "bibw" | "msgrate" => window,
        "overhead" => vec![
            ("--msgsize", s("8")),
            ("--iters", s("2")),
            ("--repeats", s("1")),
        ],
        "logp" => vec![("--max-size", s("8")), ("--max-its", s("2"))],
        "bcast" => vec![
            ("--reps", s("2")),
            ("--min-measurements", s("2")),
            ("--max-measurements", s("2")),
        ],
        "commtest" => vec![
            ("--total", s("16")),
            ("--min-packet", s("8")),
            ("--iters", s("1")),
            ("--protocol", s("0,0")),
        ],
        "overlap" => vec![
            ("--sizes", s("8")),
            ("--iters", s("2")),
            ("--steps", s("1")),
            ("--xfer-reps", s("1")),
        ],
        _ => Vec::new(),
    };
    let file = results.display().to_string();
    let loose = match cmd {
        "plot" => vec![s("-o"), out.join("fig.svg").display().to_string(), file],
        "compare" => vec![file],
        "completions" => vec![s("bash")],
        _ => Vec::new(),
    };
    (opts, loose)
}

/// Whether `cmd` measures (and so runs under `--transport sim`).
fn measures(cmd: &str) -> bool {
    !matches!(cmd, "plot" | "compare" | "devices" | "completions")
}

/// One case: a command, one of its integer options, one value.
#[derive(Clone, Debug)]
struct Case {
    cmd: String,
    flag: String,
    value: &'static str,
}

/// Every (command, integer option, value).
fn cases() -> Vec<Case> {
    let mut root = Cli::command_checked();
    root.build();
    let mut out = Vec::new();
    for sub in root.get_subcommands() {
        for a in sub.get_arguments().filter(|a| takes_integer(a)) {
            let flag = format!("--{}", a.get_long().expect("a long option"));
            for value in VALUES {
                out.push(Case {
                    cmd: sub.get_name().to_string(),
                    flag: flag.clone(),
                    value,
                });
            }
        }
    }
    out
}

/// The arguments of `case`, its JSON written to `json`.
fn args_of(case: &Case, results: &Path, dir: &Path, json: &Path) -> Vec<String> {
    let (opts, loose) = base(&case.cmd, results, dir);
    let mut v = vec![case.cmd.clone()];
    if measures(&case.cmd) {
        v.extend(["--transport", "sim", "--progress-bar", "never"].map(String::from));
        v.extend(["--json".to_string(), json.display().to_string()]);
    }
    for (o, val) in opts {
        // logp's --sizes MIN:MAX stands for --min-size/--max-size.
        let clash = case.cmd == "logp" && case.flag == "--sizes" && o == "--max-size";
        if o != case.flag && !clash {
            v.extend([o.to_string(), val]);
        }
    }
    v.extend([case.flag.clone(), case.value.to_string()]);
    v.extend(loose);
    v
}

/// Rows of `json` whose every measured number (a field named `…_ns` or
/// `…per_sec`) is 0: a result no real run produces.
fn zero_rows(json: &serde_json::Value) -> Vec<String> {
    let mut bad = Vec::new();
    let tables = json["tables"].as_array().cloned().unwrap_or_default();
    for t in &tables {
        for row in t["rows"].as_array().cloned().unwrap_or_default() {
            let Some(o) = row.as_object() else { continue };
            let measured: Vec<f64> = o
                .iter()
                .filter(|(k, _)| k.ends_with("_ns") || k.ends_with("per_sec"))
                .filter_map(|(_, v)| v.as_f64())
                .collect();
            if !measured.is_empty() && measured.iter().all(|&x| x == 0.0) {
                bad.push(format!("{}: {row}", t["title"]));
            }
        }
    }
    bad
}

/// The address space each run may take: messages of 4 GiB (2^32 − 1
/// bytes) are then refused by the memory check before the run, as on a
/// host that lacks the memory, rather than run for minutes here.
const ADDRESS_SPACE: u64 = 3 << 30;

/// Run `args` with its deadline: exit code (None: killed) and stderr.
fn run(args: &[String]) -> (Option<i32>, String, Duration) {
    use std::os::unix::process::CommandExt;
    let t0 = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ovbench"));
    // SAFETY: setrlimit is async-signal-safe and touches no memory of
    // the parent's.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ovbench");
    let err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let code = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (code, reader.join().unwrap_or_default(), t0.elapsed())
}

/// A scratch directory of this test's own.
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("ovbench-integer-flags-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

#[test]
fn every_integer_flag_takes_the_edge_values() {
    let dir = scratch();
    let results = dir.join("latency.json");
    let made = run(&[
        "latency".into(),
        "--transport".into(),
        "sim".into(),
        "--sizes".into(),
        "8".into(),
        "--iters".into(),
        "2".into(),
        "-q".into(),
        "--json".into(),
        results.display().to_string(),
    ]);
    assert_eq!(made.0, Some(0), "the tools' input file: {}", made.1);

    let all = cases();
    let flags: std::collections::BTreeSet<_> = all.iter().map(|c| (&c.cmd, &c.flag)).collect();
    assert!(
        flags.len() > 60,
        "only {} (command, flag) pairs",
        flags.len()
    );
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let times = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = all.get(i) else { break };
                let json = dir.join(format!("case{i}.json"));
                let args = args_of(case, &results, &dir, &json);
                let (code, stderr, took) = run(&args);
                let line = format!("ovbench {}", args.join(" "));
                times.lock().unwrap().push((took, line.clone()));
                let mut why = Vec::new();
                if !matches!(code, Some(0..=2)) {
                    why.push(format!("exit {code:?} (killed after {LIMIT:?} if None)"));
                }
                if stderr.contains("panicked") {
                    why.push("a panic".to_string());
                }
                if code == Some(0) {
                    if let Some(j) = std::fs::read_to_string(&json)
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok())
                    {
                        let z = zero_rows(&j);
                        if !z.is_empty() {
                            why.push(format!("rows with every measured column 0: {z:?}"));
                        }
                    }
                }
                let _ = std::fs::remove_file(&json);
                if !why.is_empty() {
                    let first: String = stderr.lines().take(3).collect::<Vec<_>>().join(" | ");
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{line}: {}; stderr: {first}", why.join(", ")));
                }
            });
        }
    });
    let took = t0.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    let mut times = times.into_inner().unwrap();
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    println!(
        "integer flags: {} cases ({} command-flag pairs × {} values) in {:.1} s on {threads} threads; the slowest:",
        all.len(),
        flags.len(),
        VALUES.len(),
        took.as_secs_f64(),
    );
    for (t, line) in times.iter().take(5) {
        println!("  {:.2} s: {line}", t.as_secs_f64());
    }
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

/// The virtual clock's bound, end to end: a benchmark whose messages
/// could pass it is refused before it starts (exit 2); a method, whose
/// repetitions adapt, stops at it (exit 1). Both name it; neither panics.
#[test]
fn the_virtual_clock_bound_is_named_before_or_when_it_is_reached() {
    let hour = "L=3600s,os=3600s,or=3600s,g=3600s,jitter=3600s";
    for (cmd, code) in [
        (
            &[
                "latency",
                "--sizes",
                "8",
                "--iters",
                "1000000000",
                "--sim",
                hour,
            ][..],
            2,
        ),
        (&["overhead", "--sim", hour][..], 1),
    ] {
        let mut args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        args.extend(["--transport", "sim", "-q"].map(String::from));
        let (got, stderr, _) = run(&args);
        assert_eq!(got, Some(code), "{args:?}: {stderr}");
        assert!(
            stderr.contains("2^64 - 1 ps") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}
