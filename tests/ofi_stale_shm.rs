//! A killed process's libfabric shm segment stays in `/dev/shm`, named
//! (by default) and stamped with its pid. When the kernel hands that pid
//! out again, the shm provider alone refuses the new process's endpoint
//! under the default name (`fi_enable`: -FI_EBUSY, as the pid it finds
//! recorded, its own, is alive). ovbench names its endpoints itself, so
//! such a segment is not in its way: the job runs.

#![cfg(feature = "ofi")]

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::{children, Scratch};

/// How many upcoming pids get a planted segment.
const PLANTED: u32 = 64;

/// Where libfabric 1.17's shm provider puts `pid`'s first endpoint by
/// default.
fn segment_of(pid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/{pid}:0:0"))
}

/// A job killed when dropped, also when the test fails first.
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where in its first bytes a segment records its creator's pid.
fn creator_at(head: &[u8], pid: u32) -> Option<usize> {
    head.windows(4)
        .position(|w| w == (pid as i32).to_le_bytes())
}

/// Whether process `pid` has a segment whose header records it.
fn segment_made(pid: u32) -> bool {
    ovbench_ofi::shm_segments_of(pid).iter().any(|s| {
        let mut head = [0u8; 64];
        std::fs::File::open(s)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok_and(|()| creator_at(&head, pid).is_some())
    })
}

/// A real segment of this libfabric, left by a rank killed mid-run, and
/// that rank's pid.
fn killed_rank_segment() -> (Vec<u8>, u32) {
    let mut cmd = common::command(&["latency", "--transport", "ofi", "--provider", "shm"]);
    cmd.args(["--proto", "native", "--sizes", "8", "--iters", "100000000"])
        .stdout(Stdio::null());
    let mut job = Job(cmd.spawn().expect("start ovbench"));
    let stderr = common::drain(job.0.stderr.take().expect("stderr"));
    // Kill only a running job whose ranks' segments are all made: the
    // provider creates a segment's file before it writes its header (a
    // kill in between left one with no creator's pid), and a job that
    // ended by itself (a failed start) closed them, and says why.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ranks = loop {
        assert!(Instant::now() < deadline, "no rank segments within 30 s");
        if let Some(status) = job.0.try_wait().expect("wait for ovbench") {
            panic!(
                "the job ended by itself ({status}) before it was killed:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
        let ranks = children(job.0.id());
        if ranks.len() == 2 && ranks.iter().all(|p| segment_made(*p)) {
            break ranks;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The ranks die with their launcher (SIGKILL), closing nothing.
    kill(Pid::from_raw(job.0.id() as i32), Signal::SIGKILL).expect("kill ovbench");
    job.0.wait().expect("reap ovbench");
    for p in &ranks {
        let gone = Instant::now() + Duration::from_secs(5);
        while kill(Pid::from_raw(*p as i32), None).is_ok() {
            assert!(Instant::now() < gone, "rank {p} outlived its launcher");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let rank = ranks[0];
    let Some(segment) = ovbench_ofi::shm_segments_of(rank).into_iter().next() else {
        panic!(
            "killed rank {rank} left no segment; the job said:\n{}",
            stderr.join().unwrap_or_default()
        );
    };
    let bytes = std::fs::read(segment).expect("the killed rank's segment");
    for s in ranks.iter().flat_map(|p| ovbench_ofi::shm_segments_of(*p)) {
        let _ = std::fs::remove_file(s);
    }
    (bytes, rank)
}

/// Whether this process may start a job in a PID namespace of its own
/// (`unshare --pid`: root, or CAP_SYS_ADMIN).
fn pid_namespace_works() -> bool {
    std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Plant `segment` (its creator's pid at `at`) under the default names of
/// the pids the job's ranks can get, each recording that pid as its own;
/// run a job over shm; remove what is left. Whether a rank's pid was
/// among the planted ones. In a PID namespace of its own (`own_pids`) the
/// job's processes and threads are the namespace's first tasks, so its
/// ranks get pids in 1..=PLANTED on every schedule; otherwise the next
/// pids after ns_last_pid, which other processes' forks may take first.
fn run_over_planted(segment: &[u8], at: usize, dir: &Path, own_pids: bool) -> bool {
    let range = if own_pids {
        1..=PLANTED
    } else {
        let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .expect("ns_last_pid")
            .trim()
            .parse()
            .expect("a pid");
        last + 1..=last + PLANTED
    };
    let planted: Vec<PathBuf> = range
        .clone()
        .filter(|p| !segment_of(*p).exists())
        .map(|p| {
            let mut s = segment.to_vec();
            s[at..at + 4].copy_from_slice(&(p as i32).to_le_bytes());
            std::fs::write(segment_of(p), &s).expect("plant a segment");
            segment_of(p)
        })
        .collect();
    let out = dir.join("stale.json");
    let args = [
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
        "--json",
        out.to_str().unwrap(),
    ];
    // sh, not ovbench, is the namespace's init (pid 1), so the launcher
    // keeps its ordinary signal semantics.
    let mut cmd = if own_pids {
        let mut c = std::process::Command::new("unshare");
        c.args([
            "--pid",
            "--fork",
            "--kill-child",
            "sh",
            "-c",
            "\"$@\"; exit $?",
            "sh",
        ])
        .arg(env!("CARGO_BIN_EXE_ovbench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    } else {
        common::command(&args)
    };
    let run = common::run(&mut cmd, Duration::from_secs(60));
    for p in &planted {
        let _ = std::fs::remove_file(p);
    }
    run.expect_ok();
    common::json(&out)["header"]["environment"]["ranks"]
        .as_array()
        .expect("the ranks in the header")
        .iter()
        .any(|r| {
            r["pid"]
                .as_u64()
                .is_some_and(|p| range.contains(&(p as u32)))
        })
}

#[test]
fn shm_opens_over_a_dead_ranks_segment_under_a_reused_pid() {
    let dir = Scratch::new("ofi-stale-shm");
    let (segment, dead) = killed_rank_segment();
    // Where the segment records its creator's pid.
    let at = creator_at(&segment[..64], dead).expect("the creator's pid in the segment's header");
    // In a PID namespace of its own the job's ranks get planted pids on
    // every schedule: one run decides. Where none can be made (no root),
    // other processes may take the planted pids first: a few tries, until
    // a rank ran over a planted segment.
    if pid_namespace_works() {
        assert!(
            run_over_planted(&segment, at, &dir, true),
            "no rank of a job in its own PID namespace got a pid in 1..={PLANTED}"
        );
        return;
    }
    println!("no PID namespace (unshare --pid refused): planting after ns_last_pid");
    let hit = (0..3).any(|_| run_over_planted(&segment, at, &dir, false));
    assert!(hit, "no rank got a pid with a planted segment in 3 runs");
}
