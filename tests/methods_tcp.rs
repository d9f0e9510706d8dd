//! Every method end to end over TCP: the real binary spawns its local
//! ranks (2; 4 for bcast, oversubscribed on small machines as docs/architecture.md
//! allows), prints the originals' columns and writes the JSON document.
//! Timings on a shared loopback are noise; these tests check that the
//! ranks agree, rows arrive complete and the figures are finite. One
//! run at a time.
#![cfg(feature = "tcp")]

use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run `ovbench COMMAND --json FILE` (`command` as a user types it);
/// returns (stdout, JSON document).
fn ovbench(command: &str) -> (String, serde_json::Value) {
    ovbench_in(Command::new(env!("CARGO_BIN_EXE_ovbench")), command)
}

/// As [`ovbench`], every rank confined to CPU 0 (`taskset -c 0`).
fn ovbench_on_one_cpu(command: &str) -> (String, serde_json::Value) {
    let mut c = Command::new("taskset");
    c.args(["-c", "0", env!("CARGO_BIN_EXE_ovbench")]);
    ovbench_in(c, command)
}

fn ovbench_in(mut cmd: Command, command: &str) -> (String, serde_json::Value) {
    let args: Vec<&str> = command.split_whitespace().collect();
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = std::env::temp_dir().join(format!(
        "ovbench-methods-{}-{}.json",
        std::process::id(),
        args[0]
    ));
    let out = cmd
        .args(&args)
        .args(["--timeout", "120", "--json"])
        .arg(&json)
        .output()
        .expect("run ovbench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "ovbench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written")).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(doc["complete"], true);
    (stdout, doc)
}

/// The JSON rows of table `table` (`tables[table].rows`).
fn rows(doc: &serde_json::Value, table: usize) -> Vec<serde_json::Value> {
    doc["tables"][table]["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no table {table} in {doc}"))
        .clone()
}

fn finite(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"));
    assert!(x.is_finite(), "{key} = {x}");
    x
}

#[test]
fn overhead_over_tcp() {
    let (stdout, doc) = ovbench("overhead --sizes 8,4K --iterations 50 --repeats 2");
    for col in [
        "msgsize",
        "iterations",
        "iter_t",
        "work_t",
        "overhead",
        "base_t",
        "avail(%)",
        "flag",
    ] {
        assert!(stdout.contains(col), "{col} missing:\n{stdout}");
    }
    assert!(stdout.contains("load average (1 min)"), "{stdout}");
    let r = rows(&doc, 0);
    assert_eq!(r.len(), 2);
    for row in &r {
        assert!(finite(row, "iter_ns") > 0.0 && finite(row, "base_ns") > 0.0);
        let o = finite(row, "overhead_ns");
        let a = finite(row, "avail_pct");
        assert!(finite(row, "overhead_lo_ns") <= o && o <= finite(row, "overhead_hi_ns"));
        assert_eq!(row["samples"], 50);
        assert_eq!(row["runs"].as_array().map(Vec::len), Some(2));
        // Timings on a shared loopback are noise: an impossible figure may
        // occur, but never unflagged.
        let valid = row["valid"].as_bool().expect("valid");
        assert!(!valid || (o >= 0.0 && (0.0..=100.0).contains(&a)), "{row}");
    }
    assert_eq!(r[1]["size"], 4096);
}

#[test]
fn logp_over_tcp() {
    let (stdout, doc) = ovbench("logp --max-size 1K --max-its 3 --max-diff 100");
    // L is unknown (null, with its reason) when RTT(0)/2 is not above g(0).
    let l_known = doc["summary"]["L_ns"].is_number();
    assert!(
        stdout.contains("os[us]")
            && stdout.contains(if l_known {
                "L = RTT(0)/2 - g(0)"
            } else {
                "L unknown"
            })
    );
    let r = rows(&doc, 0);
    assert_eq!(r[0]["size"], 0);
    assert!(r.iter().any(|x| x["size"] == 1024));
    for row in &r {
        assert!(finite(row, "rtt_ns") > 0.0 && finite(row, "os_ns") > 0.0);
        finite(row, "or_ns");
        finite(row, "g_ns");
    }
    if l_known {
        finite(&doc["summary"], "L_ns");
    } else {
        assert!(doc["summary"]["L_reason"].is_string());
    }
    // G ≤ 0 is never printed as a result: it is flagged with its reason.
    let g = finite(&doc["summary"], "G_ns_per_byte");
    assert_eq!(doc["summary"]["G_valid"], g > 0.0, "{}", doc["summary"]);
    if g <= 0.0 {
        assert!(doc["summary"]["G_reason"].is_string());
        assert!(stdout.contains("INVALID"), "{stdout}");
    }
    // Rows stopped by --max-its before their interval was narrow enough
    // say so.
    for row in &r {
        if row["converged"] == false {
            assert!(stdout.contains("max-its"), "{stdout}");
        }
    }
}

#[test]
fn bcast_over_tcp_on_four_ranks() {
    let (stdout, doc) =
        ovbench("bcast --np 4 --method all --reps 10 --max-measurements 3 --min-measurements 2");
    assert!(stdout.contains("OL_i") && stdout.contains("rounds-backward"));
    let per = rows(&doc, 0);
    assert_eq!(per.len(), 4);
    for row in &per {
        assert!(finite(row, "o_ns") > 0.0 && finite(row, "g_ns") > 0.0);
    }
    let oli = rows(&doc, 1);
    assert_eq!(oli.len(), 3);
    for row in &oli {
        assert!(finite(row, "rtl_ns") > 0.0 && finite(row, "e_ns") > 0.0);
    }
    let methods = rows(&doc, 2);
    let names: Vec<&str> = methods
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "send-latency",
            "rounds-forward",
            "rounds-backward",
            "barrier-dissemination",
            "ack",
            "max-oli"
        ]
    );
    for m in &methods {
        assert!(finite(m, "time_ns") > 0.0);
    }
    finite(&doc["summary"], "max_OL_ns");
}

#[test]
fn commtest_over_tcp() {
    let (stdout, doc) =
        ovbench("commtest --total 64K --min-packet 16K --iterations 2 --global-clock");
    assert!(stdout.contains("(1,10)") && stdout.contains("MB/s") && stdout.contains("global[us]"));
    let r = rows(&doc, 0);
    // 20 protocols ((1,6) left out) × 1, 2, 4 packets.
    assert_eq!(r.len(), 60);
    for row in &r {
        assert!(finite(row, "time_ns") > 0.0, "{row}");
        assert!(finite(row, "bytes_per_sec") > 0.0);
        assert!(row["ops"]["sends"].as_u64().unwrap() > 0);
        assert!(finite(row, "global_ns") > 0.0);
        // The synchronisation's error bound is printed beside it (0 when
        // rank 0, on its own clock, both began first and ended last).
        assert!(finite(row, "sync_error_ns") >= 0.0, "{row}");
        // How far apart the ranks started, with its error.
        assert!(finite(row, "skew_ns") >= 0.0 && finite(row, "skew_error_ns") >= 0.0);
        // A mean more than twice the time is never shown as plainly ok
        // (a skewed start reads before it).
        let far = finite(row, "mean_ns") > 2.0 * finite(row, "time_ns");
        if row["valid"] == true {
            let skewed = row["flag"] == "skewed";
            assert_eq!(row["flag"] == "noisy", far && !skewed, "{row}");
            assert!(!(far && row["flag"] == "ok"), "{row}");
        }
    }
    assert!(stdout.contains("sync±[us]"));
}

#[test]
fn overlap_over_tcp() {
    let (stdout, doc) = ovbench(
        "overlap --proto rdma-read --pair isend-irecv,send-irecv --sizes 64K --iters 5 --steps 4",
    );
    assert!(stdout.contains("s.max%") && stdout.contains("per-process totals"));
    let steps = rows(&doc, 0);
    assert_eq!(steps.len(), 2 * 5);
    for s in &steps {
        for side in ["sender", "receiver"] {
            let v = &s[side];
            let (lo, hi, d) = (
                finite(v, "min_overlap_ns"),
                finite(v, "max_overlap_ns"),
                finite(v, "data_transfer_ns"),
            );
            // Each bound lies in [0, data transfer time]. (min ≤ max holds
            // only when xfer_time does not exceed a transfer's actual
            // BEGIN..END: with the estimated table on a noisy loopback it
            // need not.)
            assert!(0.0 <= lo && lo <= d + 1e-6, "{side}: {v}");
            assert!(0.0 <= hi && hi <= d + 1e-6, "{side}: {v}");
        }
    }
    assert_eq!(rows(&doc, 1).len(), 4);
}

/// Ranks that share a CPU cannot bring bcast's spread under --max-cv (the
/// scheduler sets it): each series stops at --min-measurements and is not
/// measured again, and every row is marked.
#[test]
fn bcast_on_a_shared_cpu_stops_at_its_cap() {
    let (stdout, doc) = ovbench_on_one_cpu("bcast --np 3 --method ack --reps 10");
    let r = rows(&doc, 0);
    assert!(!r.is_empty(), "{stdout}");
    for row in &r {
        assert!(row["measurements"].as_u64().unwrap() <= 8, "{row}");
        assert_eq!(row["tries"], 1, "{row}");
        assert_eq!(row["shared_cpus"], true, "{row}");
    }
    // Three ranks on one CPU: some wait polls long enough to yield, and
    // the summary says how long.
    let cpu = doc["summary"]["cpu"].as_array().expect("summary cpu list");
    let yielded: u64 = cpu.iter().filter_map(|c| c["yielded_ns"].as_u64()).sum();
    assert!(yielded > 0, "{cpu:?}");
}

/// logp on one CPU: each figure stops after two rounds of three (the
/// scheduler, not more repetitions, sets its spread), where a loaded
/// machine would otherwise run to --max-its ×4 at every small size.
#[test]
fn logp_on_a_shared_cpu_stops_at_its_cap() {
    let (stdout, doc) = ovbench_on_one_cpu("logp --max-size 256 --max-its 30 --max-diff 100");
    let r = rows(&doc, 0);
    assert!(r.len() >= 3, "{stdout}");
    for row in &r {
        for k in ["os_samples", "or_samples"] {
            assert!(row[k].as_u64().unwrap() <= 6, "{k}: {row}");
        }
        assert_eq!(row["shared_cpus"], true, "{row}");
    }
}

/// overhead on one CPU: an impossible repeat is not measured again (the
/// scheduler made it), where on CPUs of their own the ranks retry 3 times.
#[test]
fn overhead_on_a_shared_cpu_does_not_retry() {
    let args = "overhead --sizes 8 --iterations 50 --repeats 2";
    let (stdout, doc) = ovbench_on_one_cpu(args);
    assert_eq!(doc["summary"]["retries"], 0, "{stdout}");
    for row in rows(&doc, 0) {
        assert!(
            row["rejected"].as_array().is_some_and(|r| r.is_empty()),
            "{row}"
        );
        assert_eq!(row["shared_cpus"], true, "{row}");
    }
    if std::thread::available_parallelism().map_or(0, |n| n.get()) >= 2 {
        let (_, doc) = ovbench(args);
        assert_eq!(doc["summary"]["retries"], 3, "{doc}");
    }
}
