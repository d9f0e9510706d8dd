//! The benchmarks under the simulator, where the truth is known in closed
//! form (docs/architecture.md § The simulator): one-way latency = o_s + L + o_r.

mod common;

use std::time::Duration;

use common::{json, ovbench_rows, words, Scratch};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn sim_latency_is_the_closed_form() {
    let dir = Scratch::new("sim");
    let out = dir.join("sim.json");
    let args = words(
        "latency --transport sim --sim L=2us,os=250ns,or=400ns \
         --sizes 0,8 --iters 50 --warmup 3 --verify",
    );
    let (r, rows) = ovbench_rows(&args, &out, LIMIT);
    assert!(r.stdout.contains("# transport L: "), "{}", r.stdout);
    assert!(r.stdout.contains("clock: virtual"), "{}", r.stdout);
    for row in rows {
        // 250 ns + 2 µs + 400 ns, exactly, every iteration (G·m negligible at 8 B:
        // 0.1 ns/B default adds 0.8 ns).
        let want = 2650.0 + 0.1 * row["size"].as_f64().unwrap();
        for k in ["min_ns", "p50_ns", "max_ns", "mean_ns"] {
            let got = row[k].as_f64().unwrap();
            assert!((got - want).abs() <= 1.0, "{k} = {got}, want {want}: {row}");
        }
        assert_eq!(row["samples"], 50);
    }
    let doc = json(&out);
    assert!(
        doc["header"]["sim_model"]["L"].is_string(),
        "{}",
        doc["header"]
    );
}

#[test]
fn instrument_adds_a_recorded_pass_that_costs_no_virtual_time() {
    let dir = Scratch::new("siminstr");
    let out = dir.join("i.json");
    let args = words("latency --transport sim --sizes 8,64K --iters 20 --warmup 2 --instrument");
    let (r, rows) = ovbench_rows(&args, &out, LIMIT);
    assert!(
        r.stdout.contains("size 8 instrumented: p50"),
        "{}",
        r.stdout
    );
    for row in rows {
        let i = &row["instrumented"];
        // Virtual time: recording events costs nothing, so p50 is unchanged.
        assert_eq!(i["p50_ns"], row["p50_ns"], "{row}");
        let ranks = i["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 2);
        for rk in ranks {
            assert!(rk["events_per_iter"].as_f64().unwrap() >= 2.0, "{rk}");
            // Each iteration sends one message and receives one, on each rank.
            assert_eq!(rk["transfers"].as_u64().unwrap(), 2 * 22, "{rk}");
        }
    }
}

/// Under the simulator too, every message of an 8 B eager ping-pong takes
/// the engine's fast path.
#[test]
fn an_eager_ping_pong_takes_the_fast_path() {
    let dir = Scratch::new("fast-sim");
    let row = common::fast_path_ping_pong(&["--transport", "sim"], &dir.join("fast.json"), LIMIT);
    // Virtual time and a fixed schedule: no ping comes early.
    assert_eq!(common::ops(&row, "fast_recvs"), 2 * (200 + 20), "{row}");
}
