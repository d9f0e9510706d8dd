//! The faults beside the kill trials, each under the local launcher over
//! tcp: a SIGSTOPped peer, a transport connection destroyed from outside,
//! the bootstrap service dying at start-up.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::job::{rank_process, wait_all_gone, Running};
use super::{Tally, EXIT_BOUND, HANG, TIMEOUT};
use crate::cluster::{environ, exe};

/// A latency run long enough to be stopped or cut in the middle.
fn long_latency() -> Running {
    let mut c = Command::new(exe());
    c.args(["latency", "--sizes", "8", "--iters", "1000000000"])
        .args(["--timeout", TIMEOUT]);
    Running::start(c)
}

/// Rank 1's pid once it has run for a moment (in its ping-pong).
fn rank_1_measuring(job: &Running) -> Option<u32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if job.line_at("size").is_some() || Instant::now() > deadline {
            return rank_process("OVBENCH_RANK=1");
        }
        if let Some(p) = rank_process("OVBENCH_RANK=1") {
            std::thread::sleep(Duration::from_millis(1500));
            return Some(p);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A SIGSTOPped rank: the watchdog names it at about a quarter of
/// --timeout (2.5 s), the deadline ends the job (about 10 s), nothing is
/// left.
pub fn stopped_peer(tally: &mut Tally) {
    let mut job = long_latency();
    let Some(pid) = rank_1_measuring(&job) else {
        tally.failures.push("SIGSTOP: rank 1 never ran".into());
        return;
    };
    let stopped_at = Instant::now();
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGSTOP);
    let (code, hung) = job.wait(HANG);
    let stderr = job.stderr();
    let took = stopped_at.elapsed();
    let line = job.line_at("watchdog: rank 0 stuck on rank 1");
    eprintln!("SIGSTOP of rank 1: exit {code:?} after {took:.2?}\n{stderr}");
    tally.left += wait_all_gone(Duration::from_secs(2));
    let quarter = Duration::from_millis(2500);
    match line.map(|t| t - stopped_at) {
        // The wait may have begun a round trip before the stop.
        Some(at)
            if at + Duration::from_millis(500) >= quarter
                && at < quarter + Duration::from_secs(2) => {}
        Some(at) => tally.failures.push(format!(
            "SIGSTOP: the watchdog spoke at {at:.2?}, not at ~{quarter:?}"
        )),
        None => tally
            .failures
            .push(format!("SIGSTOP: no watchdog line names rank 1:\n{stderr}")),
    }
    if hung || code == Some(0) || took > Duration::from_secs(10) + EXIT_BOUND {
        tally.failures.push(format!(
            "SIGSTOP: the deadline did not end the job ({code:?} after {took:.2?})"
        ));
    }
}

/// Rank 1's transport connection destroyed from outside (`ss -K`, the
/// kernel's socket destroy: both ends see it reset) while it measures:
/// the job ends within 5 s naming the broken connection, nothing is left.
pub fn closed_connection(tally: &mut Tally) {
    let mut job = long_latency();
    let Some(pid) = rank_1_measuring(&job) else {
        tally
            .failures
            .push("closed connection: rank 1 never ran".into());
        return;
    };
    // Its sockets but the bootstrap connection (whose port its
    // environment names): the transport's connection to rank 0.
    let boot_port = environ(pid)
        .iter()
        .find_map(|v| {
            v.strip_prefix("OVBENCH_BOOTSTRAP=")
                .map(|a| a.rsplit(':').next().unwrap_or("").to_string())
        })
        .unwrap_or_default();
    let ss = Command::new("ss")
        .args(["-tnpH", "state", "established"])
        .output();
    let table = ss
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mine = format!("pid={pid},");
    let ports: Vec<String> = table
        .lines()
        .filter(|l| l.contains(&mine))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let local = cols.get(2)?.rsplit(':').next()?.to_string();
            let peer = cols.get(3)?.rsplit(':').next()?;
            (peer != boot_port).then_some(local)
        })
        .collect();
    if ports.is_empty() {
        tally.failures.push(format!(
            "closed connection: no transport socket of rank 1 in:\n{table}"
        ));
        return;
    }
    let closed_at = Instant::now();
    for p in &ports {
        let _ = Command::new("ss")
            .args(["-K", "-tn", &format!("( sport = :{p} )")])
            .stdout(Stdio::null())
            .status();
    }
    let (code, hung) = job.wait(HANG);
    tally.left += wait_all_gone(Duration::from_secs(2));
    let took = closed_at.elapsed();
    let stderr = job.stderr();
    eprintln!("closed connection of rank 1: exit {code:?} after {took:.2?}\n{stderr}");
    if hung || code == Some(0) || took > EXIT_BOUND {
        tally.failures.push(format!(
            "closed connection: {code:?} after {took:.2?}:\n{stderr}"
        ));
    }
    if !(stderr.contains("rank 1") && stderr.contains("rank 0")) {
        tally.failures.push(format!(
            "closed connection: the messages do not name both ends:\n{stderr}"
        ));
    }
}

/// The bootstrap service stops once both ranks joined (test hook): every
/// rank ends within 5 s naming the service, nothing is left.
pub fn service_dies(tally: &mut Tally) {
    let mut c = Command::new(exe());
    c.args(["latency", "--sizes", "8", "--timeout", TIMEOUT])
        .env("OVBENCH_TEST_SERVICE_DIE", "2");
    let mut job = Running::start(c);
    let (code, hung) = job.wait(HANG);
    tally.left += wait_all_gone(Duration::from_secs(2));
    let took = job.started.elapsed();
    let stderr = job.stderr();
    eprintln!("bootstrap service dying: exit {code:?} after {took:.2?}\n{stderr}");
    if hung || code == Some(0) || took > EXIT_BOUND {
        tally.failures.push(format!(
            "service dying: {code:?} after {took:.2?}:\n{stderr}"
        ));
    }
    if !stderr.contains("bootstrap service") {
        tally.failures.push(format!(
            "service dying: no message names the bootstrap service:\n{stderr}"
        ));
    }
}

/// SIGTERM to every rank of a job another launcher started (`label`:
/// srun or mpirun; what scancel or a batch system's teardown sends):
/// each rank unwinds and exits 128 + SIGTERM (srun reports each task's
/// status, mpirun the first one's), the JSON so far is valid and says
/// complete: false, and nothing is left within 5 s. The launcher's own
/// exit code is its own (docs/exit-codes.md).
pub fn ranks_terminated(
    label: &str,
    cmd: Command,
    rank_var: &dyn Fn(u32) -> String,
    json: &std::path::Path,
    tally: &mut Tally,
) {
    let _ = std::fs::remove_file(json);
    let mut job = Running::start(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    let pids = loop {
        let p: Vec<Option<u32>> = (0..2).map(|r| rank_process(&rank_var(r))).collect();
        if p.iter().all(Option::is_some) {
            break p.into_iter().flatten().collect::<Vec<u32>>();
        }
        if Instant::now() > deadline || job.over() {
            tally.failures.push(format!(
                "{label} SIGTERM: the ranks never ran:\n{}",
                job.stderr()
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Into the measurement, with some rows written.
    std::thread::sleep(Duration::from_millis(2500));
    let sent_at = Instant::now();
    for p in &pids {
        let _ = kill(Pid::from_raw(*p as i32), Signal::SIGTERM);
    }
    let (code, hung) = job.wait(HANG);
    let left = wait_all_gone(EXIT_BOUND);
    tally.left += left;
    let took = sent_at.elapsed();
    let stderr = job.stderr();
    eprintln!("{label}: SIGTERM to both ranks: launcher exit {code:?}, all gone after {took:.2?}\n{stderr}");
    let mut bad = Vec::new();
    if hung || left > 0 || took > EXIT_BOUND {
        bad.push(format!(
            "the job took {took:.2?} to end ({left} processes left)"
        ));
    }
    let reported = match label {
        // "task 0: Exited with exit code 143", or "tasks 0-1: …" for both.
        "srun" => {
            stderr.contains("tasks 0-1: Exited with exit code 143")
                || (0..2).all(|r| stderr.contains(&format!("task {r}: Exited with exit code 143")))
        }
        // mpirun names only the first rank to fail, by its exit code.
        _ => stderr.contains("Exit code:    143"),
    };
    if !reported {
        bad.push("the ranks' exit status 143 (128 + SIGTERM) is not reported".into());
    }
    match super::job::json_rows(json) {
        Some((_, doc)) if doc["complete"] == false => {}
        Some((_, doc)) => bad.push(format!("the JSON says complete: {}", doc["complete"])),
        None => bad.push("no valid JSON was left".into()),
    }
    if !bad.is_empty() {
        tally
            .failures
            .push(format!("{label} SIGTERM: {}:\n{stderr}", bad.join("; ")));
    }
}
