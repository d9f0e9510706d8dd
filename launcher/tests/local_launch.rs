//! The launcher with real processes: the probe binary launches copies of
//! itself, and the tests fail ranks, kill them and interrupt the launcher,
//! then check the exit code, the message and that no rank survived.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const PROBE: &str = env!("CARGO_BIN_EXE_ovbench-launcher-probe");

/// A running launcher whose stderr lines arrive on a channel.
struct Job {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Job {
    fn start(np: u32, env: &[(&str, &str)]) -> Job {
        // SIGINT back to its default first: a test run started in the
        // background by a script without job control inherits it ignored
        // (as POSIX has asynchronous commands do), and the launcher, like
        // any program, keeps an ignored SIGINT; the interrupt test then
        // failed on how the suite was started. env execs the probe (same pid).
        let mut cmd = Command::new("env");
        cmd.arg("--default-signal=INT")
            .arg(PROBE)
            .args(["--np", &np.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the probe launcher");
        let err = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Job {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Collects stderr until `done` holds for what was seen (or 20 s).
    fn wait_for(&mut self, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("timed out; stderr so far:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Waits for the launcher to exit (at most `limit`); its code and how long.
    fn finish(&mut self, limit: Duration) -> (i32, Duration) {
        let t = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
                    self.seen.push(l);
                }
                return (status.code().unwrap_or(-1), t.elapsed());
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "launcher still running after {limit:?}; stderr:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&self) -> String {
        self.seen.join("\n")
    }
}

/// rank → pid from the probes' "probe: rank R pid P" lines.
fn pids(lines: &[String]) -> BTreeMap<u32, i32> {
    lines
        .iter()
        .filter_map(|l| {
            let rest = &l[l.find("probe: rank ")? + "probe: rank ".len()..];
            let (rank, rest) = rest.split_once(" pid ")?;
            Some((rank.parse().ok()?, rest.trim().parse().ok()?))
        })
        .collect()
}

/// Whether `pid` is a running (not zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn assert_all_gone(pids: &BTreeMap<u32, i32>) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.values().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for (rank, &pid) in pids {
        assert!(!alive(pid), "rank {rank} (pid {pid}) is still running");
    }
}

#[test]
fn three_ranks_succeed() {
    let mut job = Job::start(3, &[]);
    let (code, _) = job.finish(Duration::from_secs(30));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut job.child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(code, 0, "stderr:\n{}", job.stderr());
    assert!(out.contains("probe: ok 3 ranks"), "stdout: {out}");
    // Other ranks' lines arrive whole and labelled.
    assert!(
        job.seen
            .iter()
            .any(|l| l.starts_with("[rank 2] probe: rank 2 pid ")),
        "{}",
        job.stderr()
    );
    let p = pids(&job.seen);
    assert_eq!(p.len(), 3, "{}", job.stderr());
    assert_all_gone(&p);
}

#[test]
fn a_failing_rank_stops_the_job() {
    let mut job = Job::start(3, &[("PROBE_FAIL", "exit3"), ("PROBE_FAIL_RANK", "1")]);
    let (code, _) = job.finish(Duration::from_secs(30));
    assert_eq!(code, 3, "stderr:\n{}", job.stderr());
    let p = pids(&job.seen);
    let msg = format!("ovbench: rank 1 (pid {}) exited with status 3", p[&1]);
    assert!(job.stderr().contains(&msg), "{}", job.stderr());
    assert_all_gone(&p);
}

#[test]
fn a_killed_rank_stops_the_job_within_5_s() {
    let mut job = Job::start(3, &[("PROBE_FAIL", "hang"), ("PROBE_FAIL_RANK", "1")]);
    job.wait_for(|seen| {
        pids(seen).len() == 3 && seen.iter().any(|l| l.contains("probe: rank 1 hanging"))
    });
    let p = pids(&job.seen);
    kill(Pid::from_raw(p[&1]), Signal::SIGKILL).unwrap();
    let (code, took) = job.finish(Duration::from_secs(10));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(code, 128 + 9, "stderr:\n{}", job.stderr());
    let msg = format!(
        "ovbench: rank 1 (pid {}) was killed by signal 9 (SIGKILL); stopping the other ranks",
        p[&1]
    );
    assert!(job.stderr().contains(&msg), "{}", job.stderr());
    assert_all_gone(&p);
}

/// A two-rank job whose ranks both hang once started, and their pids.
fn two_hanging_ranks() -> (Job, BTreeMap<u32, i32>) {
    let mut job = Job::start(2, &[("PROBE_FAIL", "hang-all")]);
    job.wait_for(|seen| seen.iter().filter(|l| l.contains("hanging")).count() == 2);
    let p = pids(&job.seen);
    (job, p)
}

#[test]
fn interrupting_the_launcher_stops_every_rank() {
    let (mut job, p) = two_hanging_ranks();
    kill(Pid::from_raw(job.child.id() as i32), Signal::SIGINT).unwrap();
    let (code, took) = job.finish(Duration::from_secs(10));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(code, 130, "stderr:\n{}", job.stderr());
    assert!(job.stderr().contains("received SIGINT"), "{}", job.stderr());
    assert_all_gone(&p);
}

#[test]
fn ranks_die_with_a_killed_launcher() {
    let (mut job, p) = two_hanging_ranks();
    job.child.kill().unwrap();
    job.child.wait().unwrap();
    assert_all_gone(&p);
}

#[test]
fn ranks_of_an_mpirun_job_bootstrap_through_rank_0() {
    // As mpirun would start them: no launcher, rank 1 possibly first, rank 0
    // hosting the service at the port derived from the job id.
    let job = format!("test-{}", std::process::id());
    let start = |rank: u32| {
        Command::new(PROBE)
            .env("OMPI_COMM_WORLD_RANK", rank.to_string())
            .env("OMPI_COMM_WORLD_SIZE", "2")
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
            .env("OMPI_MCA_ess_base_jobid", &job)
            .env("OVBENCH_SECRET", "s3cret")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let r1 = start(1);
    std::thread::sleep(Duration::from_millis(100));
    let r0 = start(0);
    let out0 = r0.wait_with_output().unwrap();
    let out1 = r1.wait_with_output().unwrap();
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(out0.status.success(), "rank 0: {}", err(&out0));
    assert!(out1.status.success(), "rank 1: {}", err(&out1));
    assert!(String::from_utf8_lossy(&out0.stdout).contains("probe: ok 2 ranks"));
}

#[test]
fn a_rank_that_never_exits_is_stopped_after_the_timeout() {
    let env = [
        ("PROBE_FAIL", "linger"),
        ("PROBE_FAIL_RANK", "1"),
        ("PROBE_TIMEOUT_MS", "1000"),
    ];
    let mut job = Job::start(3, &env);
    let (code, took) = job.finish(Duration::from_secs(15));
    assert_eq!(code, 124, "stderr:\n{}", job.stderr());
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let p = pids(&job.seen);
    let msg = format!("rank 1 (pid {}) still running", p[&1]);
    assert!(job.stderr().contains(&msg), "{}", job.stderr());
    assert_all_gone(&p);
}
