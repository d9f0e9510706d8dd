//! `bw --serial` (one message of a window at a time, as NetPIPE's
//! streaming mode) against the default (the window posted at once, as
//! osu_bw): the JSON says which, and the simulator shows the difference
//! that only the posting makes.

mod common;

use common::{ovbench_rows, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The rows (8 B and 1 MiB) of a bw run over `transport` with `extra` options.
fn bw(dir: &Scratch, name: &str, transport: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let out = dir.join(format!("{name}.json"));
    let mut args = vec![
        "bw",
        "--transport",
        transport,
        "--sizes",
        "8,1M",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--window",
        "8",
        // 1 MiB by rendezvous: auto's default under sim is eager throughout.
        "--eager-limit",
        "16K",
    ];
    args.extend_from_slice(extra);
    let (_, rows) = ovbench_rows(&args, &out, LIMIT);
    assert_eq!(rows.len(), 2, "{name}: {rows:?}");
    rows
}

fn window_ns(row: &serde_json::Value) -> f64 {
    row["window_mean_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("no window_mean_ns in {row}"))
}

#[test]
fn serial_posting_is_recorded_and_costs_the_overlap_of_handshakes_in_the_simulator() {
    let dir = Scratch::new("bw-posting-sim");
    let window = bw(&dir, "window", "sim", &[]);
    let serial = bw(&dir, "serial", "sim", &["--serial"]);
    for (w, s) in window.iter().zip(&serial) {
        assert_eq!(w["posting"], "window", "{w}");
        assert_eq!(s["posting"], "serial", "{s}");
        assert_eq!(w["messages"], s["messages"], "the same messages either way");
    }
    // 8 B goes eagerly and a send completes as it is handed out, so posting
    // one at a time waits for nothing the window would not: the same time.
    assert_eq!(window_ns(&window[0]), window_ns(&serial[0]), "8 B");
    // 1 MiB goes by rendezvous: posted together, the eight handshakes
    // overlap; one at a time, each is paid in full.
    assert!(
        window_ns(&serial[1]) > window_ns(&window[1]) * 1.01,
        "1 MiB: serial {} ns a window, window {} ns",
        window_ns(&serial[1]),
        window_ns(&window[1])
    );
}

#[test]
fn serial_posting_over_tcp_delivers_every_message_intact() {
    let dir = Scratch::new("bw-posting-tcp");
    for row in bw(&dir, "tcp", "tcp", &["--serial", "--verify"]) {
        assert_eq!(row["posting"], "serial", "{row}");
        assert_eq!(row["messages"], 24, "{row}");
        assert!(row["bytes_per_sec"].as_f64().unwrap() > 0.0, "{row}");
    }
}
