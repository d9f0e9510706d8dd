//! End to end over TCP between two local ranks: the launcher, the
//! bootstrap, the transport, the engine and the outputs together.

mod common;

use std::time::Duration;

use common::{json, ovbench, ovbench_rows, rows, words, Scratch};

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn latency_sweep_with_verify_writes_json_and_table() {
    let dir = Scratch::new("lat");
    let out = dir.join("lat.json");
    let csv = dir.join("lat.csv");
    let mut args = words("latency --sizes 0,8,64K --iters 60 --warmup 5 --verify");
    args.extend(["--json", out.to_str().unwrap()]);
    args.extend(["--csv", csv.to_str().unwrap()]);
    let r = ovbench(&args, LIMIT).expect_ok();
    // Header: clock, transport axes, both ranks' affinity.
    assert!(r.stdout.contains("# clock: "), "{}", r.stdout);
    assert!(
        r.stdout.contains("RMA emulated by messages"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("# rank 1: host "), "{}", r.stdout);
    let table: Vec<&str> = r.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(table.len(), 3, "{}", r.stdout);
    assert!(table[2].trim_start().starts_with("65536 "), "{}", table[2]);

    let doc = json(&out);
    assert_eq!(doc["schema"], ovbench::export::SCHEMA);
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["header"]["command"], "latency");
    assert_eq!(
        doc["header"]["environment"]["ranks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let rows = rows(&doc);
    let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, vec![0, 8, 65536]);
    for row in &rows {
        assert_eq!(row["samples"], 60);
        let (min, p50, p90) = (
            row["min_ns"].as_f64().unwrap(),
            row["p50_ns"].as_f64().unwrap(),
            row["p90_ns"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= p50 && p50 <= p90, "{row}");
        // 60 samples support p90, not p99 (100) nor p99.9 (1000).
        assert!(row["p99_ns"].is_null() && row["p999_ns"].is_null(), "{row}");
        assert_eq!(row["cpu"].as_array().unwrap().len(), 2, "{row}");
        // Every iteration moved the size both ways (plus warm-up).
        assert_eq!(
            row["ops"]["bytes"].as_u64().unwrap(),
            2 * 65 * row["size"].as_u64().unwrap(),
            "{row}"
        );
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .starts_with("size,iterations,warmup,samples,min_ns,p50_ns"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 4, "{csv}");
}

#[test]
fn operation_counts_show_what_each_protocol_did() {
    let dir = Scratch::new("ops");
    let count = |proto: &str| {
        let out = dir.join(format!("{proto}.json"));
        let args = [
            "latency", "--proto", proto, "--sizes", "64K", "--iters", "20", "--warmup", "2",
            "--verify",
        ];
        ovbench_rows(&args, &out, LIMIT).1[0]["ops"].clone()
    };
    let eager = count("eager");
    let read = count("rdma-read");
    let write = count("rdma-write");
    assert_eq!(
        (eager["reads"].as_u64(), eager["writes"].as_u64()),
        (Some(0), Some(0)),
        "{eager}"
    );
    assert_eq!(
        read["reads"].as_u64(),
        Some(2 * 22),
        "one read per message: {read}"
    );
    assert_eq!(read["writes"].as_u64(), Some(0), "{read}");
    assert_eq!(
        write["writes"].as_u64(),
        Some(2 * 22),
        "one write per message: {write}"
    );
}

/// The default run has no cliff at 32 KiB: auto's eager limit is measured
/// at start, and over TCP (an eager message costs a few copies, a
/// rendezvous four more trips of several µs) it lies far above 32 KiB, so
/// each message is one send and nothing is written. The old fixed default,
/// forced back, sends 32 KiB by emulated rdma-write.
#[test]
fn the_default_sends_32k_eagerly_in_one_send() {
    let dir = Scratch::new("no-cliff");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(format!("{name}.json"));
        let mut args = words("latency --sizes 32K --iters 20 --warmup 2 --verify");
        args.extend_from_slice(extra);
        let (_, rows) = ovbench_rows(&args, &out, LIMIT);
        (json(&out), rows[0]["ops"].clone())
    };
    let (doc, auto) = run("auto", &[]);
    let limit = &doc["header"]["communicator"]["eager_limit"];
    assert_eq!(limit["source"], "measured", "{limit}");
    assert!(
        limit["inputs"]["one_way_ns"].as_f64().unwrap() > 0.0,
        "{limit}"
    );
    assert_eq!(
        auto["sends"].as_u64(),
        Some(2 * 22),
        "one send per message: {auto} ({limit})"
    );
    assert_eq!(
        (auto["writes"].as_u64(), auto["reads"].as_u64()),
        (Some(0), Some(0)),
        "{auto} ({limit})"
    );
    let (_, forced) = run("forced", &["--eager-limit", "16K"]);
    assert_eq!(forced["writes"].as_u64(), Some(2 * 22), "{forced}");
}

#[test]
fn bw_json_has_one_entry_per_size_with_samples() {
    let dir = Scratch::new("bw");
    let out = dir.join("bw.json");
    let args = [
        "bw", "--sizes", "8,4K", "--iters", "10", "--warmup", "1", "--window", "16", "--verify",
    ];
    let (_, rows) = ovbench_rows(&args, &out, LIMIT);
    assert_eq!(rows.len(), 2);
    let doc = json(&out);
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    for row in &rows {
        assert_eq!(row["samples"], 10, "{row}");
        assert_eq!(row["messages"], 160, "{row}");
        let bps = row["bytes_per_sec"].as_f64().unwrap();
        assert!(bps > 0.0, "{row}");
        // MB/s more than 10 % from the median window's rate is explained
        // in a note, whatever the timing noise made of them; otherwise no
        // note.
        let f = |k: &str| row[k].as_f64().unwrap();
        let median = f("window") * f("size") / f("window_p50_ns") * 1e9;
        let apart = (bps - median).abs() / median > 0.10;
        let note = format!("size {}: MB/s", row["size"]);
        assert_eq!(
            notes.iter().any(|n| n.starts_with(&note)),
            apart,
            "{row} {notes:?}"
        );
    }
}

/// `--one-buffer` (NetPIPE's default mode: a rank replies from the buffer
/// the message arrived in) runs and says so in its table's title, in
/// the JSON too; with `--verify`, whose check needs each rank's own
/// pattern, it is refused before any rank starts.
#[test]
fn one_buffer_replies_from_the_receive_buffer_and_says_so() {
    let dir = Scratch::new("lat-one-buffer");
    let out = dir.join("one.json");
    let mut args = words("latency --one-buffer --sizes 8,64K --iters 40 --warmup 4");
    args.extend(["--json", out.to_str().unwrap()]);
    let r = ovbench(&args, LIMIT).expect_ok();
    let said = "each reply sent from the receive buffer";
    assert!(r.stdout.contains(said), "{}", r.stdout);
    let doc = json(&out);
    assert!(
        doc["tables"][0]["title"].as_str().unwrap().contains(said),
        "{doc}"
    );
    assert_eq!(rows(&doc).len(), 2, "{doc}");
    let r = ovbench(&words("latency --one-buffer --verify --sizes 8"), LIMIT);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains("--one-buffer") && r.stderr.contains("--verify"),
        "{}",
        r.stderr
    );
}

/// An 8 B eager ping-pong over TCP runs every timed message on the
/// engine's fast path, both ways.
#[test]
fn an_eager_ping_pong_takes_the_fast_path() {
    let dir = Scratch::new("fast-tcp");
    common::fast_path_ping_pong(&["--transport", "tcp"], &dir.join("fast.json"), LIMIT);
}

/// Ranks that share CPUs never print a row as `ok`: two ranks confined to
/// one CPU (taskset) mark every row `shared`, in the table (a flag column
/// added where the table has none) and in JSON, and say why once. The
/// same run with a CPU per rank carries no mark.
#[test]
fn rows_of_ranks_sharing_a_cpu_are_marked() {
    let dir = Scratch::new("lat-cpu-mark");
    let bin = env!("CARGO_BIN_EXE_ovbench");
    let run = |confine: bool, name: &str| {
        let out = dir.join(name);
        let mut cmd = if confine {
            let mut c = std::process::Command::new("taskset");
            c.args(["-c", "0", bin]);
            c
        } else {
            std::process::Command::new(bin)
        };
        cmd.args(words("latency --np 2 --sizes 8,64 --iters 20"))
            .args(["--json", out.to_str().unwrap()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let r = common::run(&mut cmd, LIMIT).expect_ok();
        (r.stdout, json(&out))
    };
    let (stdout, doc) = run(true, "confined.json");
    let t = &doc["tables"][0];
    assert_eq!(
        t["columns"].as_array().unwrap().last().unwrap(),
        "flag",
        "{t}"
    );
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines.iter().all(|l| l.ends_with(" shared")), "{stdout}");
    assert!(rows(&doc).iter().all(|r| r["shared_cpus"] == true), "{doc}");
    assert!(
        stdout.contains("so they share them: every row reads `shared`"),
        "{stdout}"
    );
    if std::thread::available_parallelism().map_or(0, |n| n.get()) >= 2 {
        let (stdout, doc) = run(false, "own.json");
        assert!(!stdout.contains("reads `shared`"), "{stdout}");
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(lines.iter().all(|l| !l.ends_with(" shared")), "{stdout}");
        assert!(
            rows(&doc).iter().all(|r| r.get("shared_cpus").is_none()),
            "{doc}"
        );
        // Ranks on their own CPUs never yield in a wait.
        let cpu = doc["summary"]["cpu"].as_array().expect("summary cpu list");
        assert!(cpu.iter().all(|c| c.get("yielded_ns").is_none()), "{cpu:?}");
    }
}
