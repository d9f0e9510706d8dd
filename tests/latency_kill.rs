//! A rank killed during a sweep: ovbench stops within 5 s, non-zero,
//! naming the rank; no rank is left running; the JSON keeps the sizes
//! completed before.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::{command, Scratch};

fn read_json(path: &std::path::Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

#[test]
fn sigkill_of_a_rank_stops_the_job_and_keeps_completed_rows() {
    let dir = Scratch::new("kill");
    let out = dir.join("k.json");
    let mut child = command(&[
        "latency", "--sizes", "0:4M", "--iters", "3000", "--warmup", "10",
    ])
    .arg("--json")
    .arg(&out)
    .stdout(Stdio::null())
    .spawn()
    .expect("start ovbench");
    // Wait until two sizes are complete; the header names every rank's pid.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (pids, done) = loop {
        assert!(
            Instant::now() < deadline,
            "no two completed sizes within 60 s"
        );
        if let Some(doc) = read_json(&out) {
            let n = doc["tables"][0]["rows"].as_array().map_or(0, |a| a.len());
            if n >= 2 {
                let pids: Vec<i32> = doc["header"]["environment"]["ranks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["pid"].as_i64().unwrap() as i32)
                    .collect();
                break (pids, n);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 2);
    kill(Pid::from_raw(pids[1]), Signal::SIGKILL).expect("kill rank 1");
    let killed_at = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if killed_at.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("ovbench still running 5 s after rank 1 was killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("rank 1"), "{stderr}");
    // No rank is left running.
    for p in pids {
        let gone = Instant::now() + Duration::from_secs(2);
        while kill(Pid::from_raw(p), None).is_ok() && Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            kill(Pid::from_raw(p), None).is_err(),
            "rank pid {p} still alive"
        );
    }
    let doc = read_json(&out).expect("the JSON is whole after the crash");
    let rows = doc["tables"][0]["rows"].as_array().unwrap();
    assert!(rows.len() >= done, "{} rows < {done}", rows.len());
    assert_eq!(doc["complete"], false);
}
