//! What the cluster tests (mpirun, srun, ssh across network namespaces)
//! share: running a launcher with a deadline that kills its whole process
//! group, finding ovbench's ranks among the host's processes, and
//! checking that none is left behind.

#![allow(dead_code)]

#[path = "../common/shell.rs"]
mod shell;
pub mod slurm;
pub mod ssh_net;

// Each test crate uses some of these (as with dead_code above).
#[allow(unused_imports)]
pub use shell::{assert_holds, stdout_of, words};

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Hold this while a test runs ranks (they need the cores).
pub fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_ovbench")
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Run {
    pub fn expect_ok(self, what: &str) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// A launcher running in its own process group.
pub struct Job {
    pub child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
    started: Instant,
    what: String,
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = pipe.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    })
}

impl Job {
    pub fn start(mut cmd: Command) -> Job {
        let what = format!("{cmd:?}");
        eprintln!("running: {what}");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Job {
            child,
            out,
            err,
            started: Instant::now(),
            what,
        }
    }

    /// Waits up to `limit`; past it, kills the group and panics with the output.
    pub fn wait(mut self, limit: Duration) -> Run {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                kill_group(self.child.id());
                let _ = self.child.wait();
                let err = self.err.take().map(|h| h.join().unwrap_or_default());
                panic!(
                    "{} ran past {limit:?}; stderr:\n{}",
                    self.what,
                    err.unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = self.started.elapsed();
        let run = Run {
            code: status.code(),
            stdout: self
                .out
                .take()
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default(),
            stderr: self
                .err
                .take()
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default(),
            took,
        };
        eprintln!(
            "exit {:?} after {:.2} s\n--- stdout\n{}--- stderr\n{}",
            run.code,
            took.as_secs_f64(),
            run.stdout,
            run.stderr
        );
        run
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn kill_group(pgid: u32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Runs `cmd` to completion within `limit`.
pub fn run(cmd: Command, limit: Duration) -> Run {
    Job::start(cmd).wait(limit)
}

/// The pids of running ovbench processes (this build's binary).
pub fn ovbench_pids() -> Vec<u32> {
    let me = Path::new(exe()).canonicalize().expect("the binary exists");
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(target) = std::fs::read_link(e.path().join("exe")) else {
            continue;
        };
        // A zombie's exe is gone; it is reaped, not running.
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if target == me && !zombie {
            pids.push(pid);
        }
    }
    pids
}

/// The environment of `pid` (empty when gone).
pub fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| {
            b.split(|&c| c == 0)
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The ovbench process whose environment has `var` (e.g.
/// `OMPI_COMM_WORLD_RANK=1`), waiting up to `limit` for it to appear.
pub fn rank_pid(var: &str, limit: Duration) -> u32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(p) = ovbench_pids()
            .into_iter()
            .find(|&p| environ(p).iter().any(|v| v == var))
        {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "no ovbench rank with {var} appeared within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fails, listing them, if ovbench processes remain after `grace`.
pub fn assert_none_left(grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        let left = ovbench_pids();
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            let list: Vec<String> = left
                .iter()
                .map(|p| {
                    let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                    format!("{p}: {}", String::from_utf8_lossy(&cmd).replace('\0', " "))
                })
                .collect();
            for p in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*p as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("ovbench processes left behind:\n{}", list.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kill rank 1 of `job` (the ovbench process whose environment has
/// `rank_var`, e.g. `OMPI_COMM_WORLD_RANK=1`) half a second into its
/// measurement: the job must fail within 5 s with an error that says one
/// of `names` (how the launcher calls that rank), and leave no rank behind.
pub fn kill_rank_1(job: Job, rank_var: &str, names: &[&str]) {
    let victim = rank_pid(rank_var, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill rank 1");
    let r = job.wait(Duration::from_secs(30));
    let took = t0.elapsed();
    assert_ne!(r.code, Some(0));
    assert!(
        took < Duration::from_secs(5),
        "the job took {took:?} to end"
    );
    assert!(
        names.iter().any(|n| r.stderr.contains(n)),
        "no message names rank 1 ({names:?}):\n{}",
        r.stderr
    );
    assert_none_left(Duration::from_secs(1));
}

/// A short broadcast run (eight repetitions of the send-latency method):
/// enough to see a job of several ranks measure, under every launcher.
pub const SHORT_BCAST: [&str; 7] = [
    "bcast",
    "--reps",
    "8",
    "--max-measurements",
    "8",
    "--method",
    "send-latency",
];

/// `SHORT_BCAST` with `more` arguments after it.
pub fn short_bcast<'a>(more: &[&'a str]) -> Vec<&'a str> {
    SHORT_BCAST
        .iter()
        .copied()
        .chain(more.iter().copied())
        .collect()
}

/// Table rows in an ovbench JSON document, over all its tables.
pub fn table_rows(doc: &serde_json::Value) -> usize {
    doc["tables"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["rows"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0)
}

/// Reads the JSON document `path`.
pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ovbench-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Whether `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether this ovbench was built with `--transport mpi` (the `mpi`
/// feature): outside a launcher it then refuses for another reason than
/// "not compiled" or an unknown value.
pub fn has_mpi_transport() -> bool {
    let mut cmd = Command::new(exe());
    cmd.args(words("latency --transport mpi --sizes 8 --iters 1"))
        .env("OMPI_COMM_WORLD_SIZE", "1");
    let r = run(cmd, Duration::from_secs(20));
    !(r.stderr.contains("not compiled into this ovbench") || r.stderr.contains("invalid value"))
}

/// `mpirun.openmpi -np N ovbench ARGS`, as root, oversubscribed.
pub fn mpirun(np: u32, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun.openmpi");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", &np.to_string(), exe()])
        .args(args);
    c
}
