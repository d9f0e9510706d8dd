//! A killed rank's libfabric shm segment stays in `/dev/shm`, named and
//! stamped with its pid. When the kernel hands that pid out again, the
//! shm provider alone refuses the new process's endpoint (`fi_enable`:
//! -FI_EBUSY, as the pid it finds recorded, its own, is alive). ovbench
//! clears such segments first: the job runs.

#![cfg(feature = "ofi")]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::serial;

/// How many upcoming pids get a planted segment.
const PLANTED: u32 = 64;

fn segment_of(pid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/{pid}:0:0"))
}

/// The children of `parent`, from /proc.
fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // "pid (comm) state ppid …": the comm may hold spaces.
                    let after = &s[s.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// A real segment of this libfabric, left by a rank killed mid-run, and
/// that rank's pid.
fn killed_rank_segment() -> (Vec<u8>, u32) {
    let mut job = Command::new(env!("CARGO_BIN_EXE_ovbench"))
        .args(["latency", "--transport", "ofi", "--provider", "shm"])
        .args(["--proto", "native", "--sizes", "8", "--iters", "100000000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ovbench");
    let deadline = Instant::now() + Duration::from_secs(30);
    let rank = loop {
        assert!(Instant::now() < deadline, "no rank segment within 30 s");
        if let Some(p) = children(job.id())
            .into_iter()
            .find(|p| segment_of(*p).exists())
        {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The ranks die with their launcher (SIGKILL), closing nothing.
    let ranks = children(job.id());
    kill(Pid::from_raw(job.id() as i32), Signal::SIGKILL).expect("kill ovbench");
    job.wait().expect("reap ovbench");
    for p in &ranks {
        let gone = Instant::now() + Duration::from_secs(5);
        while kill(Pid::from_raw(*p as i32), None).is_ok() {
            assert!(Instant::now() < gone, "rank {p} outlived its launcher");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let bytes = std::fs::read(segment_of(rank)).expect("the killed rank's segment");
    for p in &ranks {
        let _ = std::fs::remove_file(segment_of(*p));
    }
    (bytes, rank)
}

#[test]
fn shm_opens_over_a_dead_ranks_segment_under_a_reused_pid() {
    let _g = serial();
    let (segment, dead) = killed_rank_segment();
    // Where the segment records its creator's pid.
    let at = segment[..64]
        .windows(4)
        .position(|w| w == (dead as i32).to_le_bytes())
        .expect("the creator's pid in the segment's header");
    // Plant it under the next pids, each recording that pid as its own.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .expect("ns_last_pid")
        .trim()
        .parse()
        .expect("a pid");
    let planted: Vec<PathBuf> = (last + 1..=last + PLANTED)
        .filter(|p| !segment_of(*p).exists())
        .map(|p| {
            let mut s = segment.clone();
            s[at..at + 4].copy_from_slice(&(p as i32).to_le_bytes());
            std::fs::write(segment_of(p), &s).expect("plant a segment");
            segment_of(p)
        })
        .collect();
    let run = common::ovbench(
        &[
            "latency",
            "--transport",
            "ofi",
            "--provider",
            "shm",
            "--proto",
            "native",
            "--sizes",
            "8",
            "--iters",
            "10",
            "--warmup",
            "1",
        ],
        Duration::from_secs(60),
    );
    for p in &planted {
        let _ = std::fs::remove_file(p);
    }
    run.expect_ok();
}
