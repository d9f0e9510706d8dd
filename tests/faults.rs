//! Fault injection (issue 18, item 4), run by ci/test's `faults` stage
//! with `--timeout 10`. For each launcher (local, mpirun, srun, ssh) and
//! each transport this build has (tcp; UCX and libfabric locally), trials
//! rotate over latency, bw and overhead; each `kill -9`s a random rank at
//! a moment drawn uniformly over the run, start-up included (the run's
//! length is measured by an unkilled reference run first). Every trial
//! must end the whole job within 5 s of the kill, naming the dead rank,
//! leave no ovbench process, and keep a valid JSON with every row it held
//! before the kill. Then the special cases: a SIGSTOPped peer (the
//! watchdog names it at a quarter of --timeout, the deadline ends the
//! job), a transport connection destroyed from outside (`ss -K`), and the
//! bootstrap service dying during start-up (a test hook).
//!
//! The suite prints its counts (trials per transport and launcher, the
//! phase each kill hit, the longest exit, hangs, processes left) and the
//! command that replays it from its seed: `OVBENCH_FAULT_SEED=S`.
//! `OVBENCH_FAULT_TRIALS=N` sets the trials per configuration (default
//! 10: the 20 per transport and launcher do not fit the stage's
//! 8 minutes on a 2-core CI machine running debug builds).
//!
//! Needs the test-hooks feature (the service hook), and for the cluster
//! launchers what tests/cluster_*.rs need (ci/deps); a launcher whose
//! programs are missing is skipped and said so.

#![cfg(feature = "test-hooks")]

mod cluster;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cluster::slurm::Slurm;
use cluster::ssh_net::Net;
use cluster::{environ, exe, have, mpirun, ovbench_pids, scratch, serial};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// The deadline every trial runs under.
const TIMEOUT: &str = "10";
/// How long the job may take to end after a rank died.
const EXIT_BOUND: Duration = Duration::from_secs(5);
/// A job still running this long after the kill has hung.
const HANG: Duration = Duration::from_secs(30);

/// The commands the trials rotate over: small sweeps, so a trial takes
/// seconds and its JSON gains rows along the way.
const COMMANDS: [&[&str]; 3] = [
    &[
        "latency", "--sizes", "1:1K", "--iters", "20", "--warmup", "2",
    ],
    &["bw", "--sizes", "1:1K", "--iters", "4", "--warmup", "1"],
    &[
        "overhead",
        "--msgsize",
        "8",
        "--iterations",
        "20",
        "--repeats",
        "1",
    ],
];

/// xorshift64*: the trials' draws, replayable from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn seed() -> u64 {
    std::env::var("OVBENCH_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (t.as_nanos() as u64) | 1
        })
}

fn trials_per_config() -> usize {
    std::env::var("OVBENCH_FAULT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

/// Who starts the ranks, and how a rank's process is recognised.
enum Launch<'a> {
    Local,
    Mpirun,
    Srun(&'a Slurm),
    Ssh(&'a Net),
}

impl Launch<'_> {
    fn name(&self) -> &'static str {
        match self {
            Launch::Local => "local",
            Launch::Mpirun => "mpirun",
            Launch::Srun(_) => "srun",
            Launch::Ssh(_) => "ssh",
        }
    }

    /// The environment entry that marks rank `r`'s process.
    fn rank_var(&self, r: u32) -> String {
        match self {
            Launch::Local | Launch::Ssh(_) => format!("OVBENCH_RANK={r}"),
            Launch::Mpirun => format!("OMPI_COMM_WORLD_RANK={r}"),
            Launch::Srun(_) => format!("SLURM_PROCID={r}"),
        }
    }

    /// The command that runs `args` on 2 ranks.
    fn command(&self, args: &[&str]) -> Command {
        match self {
            Launch::Local => {
                let mut c = Command::new(exe());
                c.args(args);
                c
            }
            Launch::Mpirun => mpirun(2, args),
            Launch::Srun(s) => {
                let mut c = s.cmd("srun");
                // Without --kill-on-bad-exit srun lets the other task run
                // on after one died; a rank that dies before its peer
                // joined is then only ended by --timeout (docs/exit-codes.md).
                c.args(["-n", "2", "--overcommit", "--kill-on-bad-exit=1", exe()])
                    .args(args);
                c
            }
            Launch::Ssh(net) => {
                let hosts = format!("{},{}", net.a, net.b);
                let mut c = net.ovbench(args);
                c.args(["--hosts", &hosts]);
                c
            }
        }
    }
}

/// A running job: its stderr lines with the time each arrived.
struct Running {
    child: Child,
    started: Instant,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: Option<JoinHandle<()>>,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("start the job");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let err = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push((Instant::now(), l));
            }
        });
        Running {
            child,
            started: Instant::now(),
            lines,
            reader: Some(reader),
        }
    }

    /// Waits until `limit`; the exit code (None: killed by a signal, or
    /// still running at `limit`, then killed here) and whether it hung.
    fn wait(&mut self, limit: Duration) -> (Option<i32>, bool) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                if let Some(h) = self.reader.take() {
                    let _ = h.join();
                }
                return (s.code(), false);
            }
            if Instant::now() > deadline {
                let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
                let _ = self.child.wait();
                return (None, true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stderr(&self) -> String {
        let l = self.lines.lock().expect("lines");
        l.iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// When a stderr line containing `text` arrived.
    fn line_at(&self, text: &str) -> Option<Instant> {
        let l = self.lines.lock().expect("lines");
        l.iter().find(|(_, s)| s.contains(text)).map(|(t, _)| *t)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The pid of the process of rank `var` (`OVBENCH_RANK=1`), if running.
fn rank_process(var: &str) -> Option<u32> {
    ovbench_pids()
        .into_iter()
        .find(|&p| environ(p).iter().any(|v| v == var))
}

/// The rows of the JSON at `path`; `None` when absent or unreadable.
fn json_rows(path: &Path) -> Option<(usize, serde_json::Value)> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let n = doc["tables"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["rows"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    Some((n, doc))
}

/// Kills every ovbench process left; how many there were.
fn reap_leftovers(grace: Duration) -> usize {
    let deadline = Instant::now() + grace;
    loop {
        let left = ovbench_pids();
        if left.is_empty() {
            return 0;
        }
        if Instant::now() > deadline {
            for p in &left {
                let _ = kill(Pid::from_raw(*p as i32), Signal::SIGKILL);
            }
            return left.len();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the suite counts.
#[derive(Default)]
struct Tally {
    trials: BTreeMap<String, usize>,
    phases: BTreeMap<String, usize>,
    exit_max: Duration,
    hangs: usize,
    left: usize,
    unnamed_by_mpirun: usize,
    failures: Vec<String>,
}

/// One configuration: a launcher, a transport and its options.
struct Config<'a> {
    launch: Launch<'a>,
    transport: &'static [&'static str],
}

impl Config<'_> {
    fn label(&self) -> String {
        format!("{} {}", self.launch.name(), self.transport.join(" "))
    }

    fn args<'b>(&'b self, cmd: &[&'b str], json: &'b str) -> Vec<&'b str> {
        let mut v = cmd.to_vec();
        v.extend_from_slice(self.transport);
        v.extend_from_slice(&["--timeout", TIMEOUT, "--json", json]);
        v
    }
}

/// Runs `cfg`'s trials: per command an unkilled reference run (its
/// length is the range the kill moments are drawn from), then the kills.
fn run_config(cfg: &Config<'_>, rng: &mut Rng, dir: &Path, tally: &mut Tally) {
    let label = cfg.label();
    let json = dir.join("fault.json");
    let json_s = json.to_string_lossy().into_owned();
    let mut length: [Option<Duration>; 3] = [None; 3];
    for (i, cmd) in COMMANDS.iter().enumerate() {
        let _ = std::fs::remove_file(&json);
        let mut job = Running::start(cfg.launch.command(&cfg.args(cmd, &json_s)));
        let (code, hung) = job.wait(Duration::from_secs(120));
        if code != Some(0) || hung {
            tally.failures.push(format!(
                "{label}: reference run of {} failed ({code:?}):\n{}",
                cmd[0],
                job.stderr()
            ));
            continue;
        }
        length[i] = Some(job.started.elapsed());
        tally.left += reap_leftovers(Duration::from_secs(2));
    }
    for t in 0..trials_per_config() {
        let ci = t % COMMANDS.len();
        let Some(len) = length[ci] else { continue };
        let cmd = COMMANDS[ci];
        let at = len.mul_f64(rng.fraction());
        let victim = rng.below(2) as u32;
        let _ = std::fs::remove_file(&json);
        let what = format!("{label}: {} killing rank {victim} at {at:.2?}", cmd[0]);
        *tally.trials.entry(label.clone()).or_default() += 1;
        let mut job = Running::start(cfg.launch.command(&cfg.args(cmd, &json_s)));
        std::thread::sleep(at);
        // At start-up the rank may not be running yet: the kill waits
        // for it (still start-up), unless the job ends first.
        let var = cfg.launch.rank_var(victim);
        let pid = loop {
            if let Some(p) = rank_process(&var) {
                break Some(p);
            }
            if matches!(job.child.try_wait(), Ok(Some(_))) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let before = json_rows(&json);
        let phase = match &before {
            None => "start-up".to_string(),
            Some((n, _)) => format!("after {n} rows"),
        };
        let Some(pid) = pid else {
            *tally.phases.entry("job over first".into()).or_default() += 1;
            let _ = job.wait(HANG);
            continue;
        };
        let killed_at = Instant::now();
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        let (code, hung) = job.wait(HANG);
        let took = killed_at.elapsed();
        let stderr = job.stderr();
        tally.left += reap_leftovers(Duration::from_secs(2));
        if hung {
            tally.hangs += 1;
            tally.failures.push(format!(
                "{what}: still running {HANG:?} later (hang):\n{stderr}"
            ));
            continue;
        }
        if code == Some(0) {
            // The rank had finished its work; the job ended normally.
            *tally
                .phases
                .entry("finished before the kill".into())
                .or_default() += 1;
            continue;
        }
        *tally.phases.entry(phase).or_default() += 1;
        tally.exit_max = tally.exit_max.max(took);
        if took > EXIT_BOUND {
            tally
                .failures
                .push(format!("{what}: the job took {took:.2?} to end:\n{stderr}"));
        }
        let named = [format!("rank {victim}"), format!("task {victim}")];
        if !named.iter().any(|n| stderr.contains(n.as_str())) {
            if matches!(cfg.launch, Launch::Mpirun) && !stderr.contains("ovbench:") {
                // mpirun killed the job before any ovbench rank could say
                // a word, and its own abort message names no rank: counted
                // and shown, not blamed on ovbench.
                tally.unnamed_by_mpirun += 1;
            } else {
                tally
                    .failures
                    .push(format!("{what}: no message names rank {victim}:\n{stderr}"));
            }
        }
        match (before, json_rows(&json)) {
            (_, None) if json.exists() => {
                tally
                    .failures
                    .push(format!("{what}: the JSON is unreadable after the kill"));
            }
            (Some((n, _)), after) if after.as_ref().map_or(0, |a| a.0) < n => {
                tally
                    .failures
                    .push(format!("{what}: the JSON lost rows ({n} before the kill)"));
            }
            // A JSON already complete before the kill (the rank was killed
            // in its teardown, after writing it) rightly stays complete.
            (Some((_, was)), _) if was["complete"] == true => {}
            (_, Some((_, doc))) if doc["complete"] != false => {
                tally.failures.push(format!(
                    "{what}: the JSON of a killed job says complete: {}",
                    doc["complete"]
                ));
            }
            _ => {}
        }
    }
}

/// A SIGSTOPped rank: the watchdog names it at about a quarter of
/// --timeout (2.5 s), the deadline ends the job (about 10 s), nothing is
/// left.
fn stopped_peer(tally: &mut Tally) {
    let mut job = Running::start({
        let mut c = Command::new(exe());
        c.args(["latency", "--sizes", "8", "--iters", "1000000000"])
            .args(["--timeout", TIMEOUT]);
        c
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        // Measuring once the table starts: rank 1 is in its ping-pong.
        if job.line_at("size").is_some() || Instant::now() > deadline {
            break rank_process("OVBENCH_RANK=1");
        }
        if let Some(p) = rank_process("OVBENCH_RANK=1") {
            std::thread::sleep(Duration::from_millis(1500));
            break Some(p);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(pid) = pid else {
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
    tally.left += reap_leftovers(Duration::from_secs(2));
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
fn closed_connection(tally: &mut Tally) {
    let mut job = Running::start({
        let mut c = Command::new(exe());
        c.args(["latency", "--sizes", "8", "--iters", "1000000000"])
            .args(["--timeout", TIMEOUT]);
        c
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Some(p) = rank_process("OVBENCH_RANK=1") {
            std::thread::sleep(Duration::from_millis(1500));
            break Some(p);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(pid) = pid else {
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
    let took = closed_at.elapsed();
    let stderr = job.stderr();
    eprintln!("closed connection of rank 1: exit {code:?} after {took:.2?}\n{stderr}");
    tally.left += reap_leftovers(Duration::from_secs(2));
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
fn service_dies(tally: &mut Tally) {
    let mut c = Command::new(exe());
    c.args(["latency", "--sizes", "8", "--timeout", TIMEOUT])
        .env("OVBENCH_TEST_SERVICE_DIE", "2");
    let mut job = Running::start(c);
    let (code, hung) = job.wait(HANG);
    let took = job.started.elapsed();
    let stderr = job.stderr();
    eprintln!("bootstrap service dying: exit {code:?} after {took:.2?}\n{stderr}");
    tally.left += reap_leftovers(Duration::from_secs(2));
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

#[test]
fn every_fault_ends_the_job_at_once_naming_it() {
    let _g = serial();
    let seed = seed();
    let mut rng = Rng(seed);
    let dir: PathBuf = scratch("faults");
    let mut tally = Tally::default();
    eprintln!(
        "fault injection: seed {seed}, {} trials per configuration",
        trials_per_config()
    );

    let mut local: Vec<&'static [&'static str]> = vec![&["--transport", "tcp"]];
    #[cfg(feature = "ucx")]
    local.push(&["--transport", "ucx"]);
    #[cfg(feature = "ofi")]
    local.push(&["--transport", "ofi"]);
    for transport in local {
        run_config(
            &Config {
                launch: Launch::Local,
                transport,
            },
            &mut rng,
            &dir,
            &mut tally,
        );
    }
    // Under mpirun: through PMIx with this build's pmix, else the
    // bootstrap service rank 0 runs.
    if have("mpirun.openmpi") {
        let cfg = Config {
            launch: Launch::Mpirun,
            transport: &["--transport", "tcp"],
        };
        run_config(&cfg, &mut rng, &dir, &mut tally);
        // The MPI backend (feature mpi): its ranks die as any other's.
        if cluster::has_mpi_transport() {
            let cfg = Config {
                launch: Launch::Mpirun,
                transport: &["--transport", "mpi"],
            };
            run_config(&cfg, &mut rng, &dir, &mut tally);
        } else {
            eprintln!("skipped: mpirun --transport mpi (this ovbench has no mpi feature)");
        }
    } else {
        eprintln!("skipped: mpirun (no mpirun.openmpi; run ci/deps)");
    }
    if have("slurmctld") && have("munged") {
        let slurm = Slurm::up();
        let cfg = Config {
            launch: Launch::Srun(&slurm),
            transport: &["--transport", "tcp"],
        };
        run_config(&cfg, &mut rng, &dir, &mut tally);
    } else {
        eprintln!("skipped: srun (no slurmctld/munged; run ci/deps)");
    }
    if have("/usr/sbin/sshd") && have("ip") {
        let net = Net::up("fault");
        let cfg = Config {
            launch: Launch::Ssh(&net),
            transport: &["--transport", "tcp"],
        };
        run_config(&cfg, &mut rng, &dir, &mut tally);
    } else {
        eprintln!("skipped: ssh (no sshd or iproute2; run ci/deps)");
    }
    stopped_peer(&mut tally);
    if have("ss") {
        closed_connection(&mut tally);
    } else {
        eprintln!("skipped: closed connection (no ss; run ci/deps)");
    }
    service_dies(&mut tally);

    eprintln!("=== fault injection, seed {seed}");
    for (cfg, n) in &tally.trials {
        eprintln!("trials: {cfg}: {n}");
    }
    for (phase, n) in &tally.phases {
        eprintln!("kills hit: {phase}: {n}");
    }
    eprintln!("exit time after a kill, max: {:.2?}", tally.exit_max);
    eprintln!("hangs: {}", tally.hangs);
    eprintln!("processes left: {}", tally.left);
    eprintln!(
        "kills only mpirun's own abort message reported (naming no rank): {}",
        tally.unnamed_by_mpirun
    );
    eprintln!(
        "replay: OVBENCH_FAULT_SEED={seed} OVBENCH_FAULT_TRIALS={} cargo test -p ovbench --features ucx,ofi,pmix,test-hooks --test faults -- --nocapture",
        trials_per_config()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        tally.failures.is_empty() && tally.hangs == 0 && tally.left == 0,
        "{} failures (seed {seed}):\n{}",
        tally.failures.len(),
        tally.failures.join("\n\n")
    );
}
