//! A one-node Slurm cluster made by the test: munged with a key the test
//! writes, slurmctld and slurmd configured for a root-run CI (SlurmUser
//! root, proctrack/linuxproc, task/none, 4 CPUs declared over the
//! machine's 2 with config_overrides), on ports of their own, started and
//! stopped here. Runs `srun -n 2 ovbench latency`, `srun -n 4 ovbench
//! bcast`, `srun --mpi=pmi2` (PMI-2 wire protocol), `srun --mpi=pmix`
//! (PMIx), `--transport mpi` under srun when this ovbench has it, an
//! ovbench started in an `salloc` shell launching locally, and a rank
//! killed under srun. Prints `scontrol show step` for each run.
//!
//! Needs slurmctld, slurmd, slurm-client and munge (ci/deps).

// Run by ci/test's cluster stage, which builds with pmix (the tool-tests
// stage, without it, leaves them out rather than run them twice).
#![cfg(feature = "pmix")]

mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{assert_none_left, exe, json, scratch, serial, Job, Run};

const LIMIT: Duration = Duration::from_secs(120);

struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

fn daemon(dir: &Path, name: &str, prog: &str, args: &[&str]) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.out"))).expect("log file");
    Command::new(prog)
        .args(args)
        .env("SLURM_CONF", dir.join("slurm.conf"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {prog}: {e} (run ci/deps)"))
}

impl Slurm {
    fn up() -> Slurm {
        let dir = scratch("slurm");
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).expect("slurm dirs");
        }
        let mut key = vec![0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").expect("urandom"),
            &mut key,
        )
        .expect("a random munge key");
        let keyf = dir.join("munge.key");
        std::fs::write(&keyf, key).expect("munge key");
        std::fs::set_permissions(&keyf, std::os::unix::fs::PermissionsExt::from_mode(0o400))
            .expect("chmod key");
        let host = nix::unistd::gethostname()
            .expect("hostname")
            .to_string_lossy()
            .into_owned();
        let port = 26000 + 2 * (std::process::id() % 1000);
        let d = dir.display();
        let conf = format!(
            "ClusterName=ovbtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={port}\nSlurmdPort={p2}\nAuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=socket={d}/munge.sock\nMpiDefault=none\nProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\nSlurmdParameters=config_overrides\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
             ReturnToService=2\nNodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n\
             PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n",
            p2 = port + 1
        );
        let conf_path = dir.join("slurm.conf");
        std::fs::write(&conf_path, conf).expect("slurm.conf");
        let mut s = Slurm {
            dir: dir.clone(),
            conf: conf_path.clone(),
            daemons: Vec::new(),
        };
        let k = keyf.to_string_lossy().into_owned();
        let sock = format!("--socket={d}/munge.sock");
        s.daemons.push(daemon(
            &dir,
            "munged",
            "munged",
            &[
                "-F",
                "-f",
                &format!("--key-file={k}"),
                &sock,
                &format!("--pid-file={d}/munged.pid"),
                &format!("--log-file={d}/munged.log"),
                &format!("--seed-file={d}/munge.seed"),
            ],
        ));
        s.wait_for("munged", || dir.join("munge.sock").exists());
        let c = conf_path.to_string_lossy().into_owned();
        s.daemons
            .push(daemon(&dir, "slurmctld", "slurmctld", &["-D", "-f", &c]));
        s.daemons
            .push(daemon(&dir, "slurmd", "slurmd", &["-D", "-f", &c]));
        s.wait_for("an idle node", || s.sinfo().trim() == "idle");
        s
    }

    fn wait_for(&self, what: &str, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() {
            if Instant::now() > deadline {
                let logs: Vec<String> = [
                    "munged.out",
                    "slurmctld.out",
                    "slurmd.out",
                    "slurmctld.log",
                    "slurmd.log",
                ]
                .iter()
                .map(|f| {
                    format!(
                        "--- {f}\n{}",
                        std::fs::read_to_string(self.dir.join(f)).unwrap_or_default()
                    )
                })
                .collect();
                panic!("Slurm: no {what} within 30 s\n{}", logs.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn sinfo(&self) -> String {
        self.cmd("sinfo")
            .args(["-h", "-o", "%t"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Runs `srun ARGS exe OVBENCH_ARGS`, printing `scontrol show step`
    /// once the step runs.
    fn srun(&self, srun_args: &[&str], ovbench_args: &[&str]) -> Run {
        let mut c = self.cmd("srun");
        c.args(srun_args).arg(exe()).args(ovbench_args);
        let mut job = Job::start(c);
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(job.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            let out = self.cmd("scontrol").args(["show", "step"]).output();
            let text = out
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if text.contains("StepId=") {
                eprintln!("scontrol show step:\n{text}");
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        job.wait(LIMIT)
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // slurmd first (it tears down what still runs), then the others.
        for c in self.daemons.iter_mut().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn launch_of(path: &Path) -> serde_json::Value {
    json(path)["header"]["launch"].clone()
}

/// One cluster for every case: starting Slurm costs seconds.
#[test]
fn ovbench_under_slurm() {
    let _g = serial();
    let slurm = Slurm::up();
    let out = slurm.dir.join("run.json");
    let out_s = out.to_string_lossy().into_owned();
    let lat = [
        "latency", "--sizes", "8,64K", "--iters", "200", "--verify", "--json", &out_s,
    ];

    // srun without an MPI plugin: rank 0's bootstrap service.
    slurm
        .srun(&["-n", "2"], &lat)
        .expect_ok("srun -n 2 ovbench latency");
    let l = launch_of(&out);
    assert_eq!(
        (l["launcher"].as_str(), l["exchange"].as_str()),
        (Some("srun"), Some("bootstrap")),
        "{l}"
    );

    let bc = cluster::short_bcast(&["--json", &out_s]);
    slurm
        .srun(&["-n", "4"], &bc)
        .expect_ok("srun -n 4 ovbench bcast");
    assert_eq!(launch_of(&out)["launcher"], "srun");

    slurm
        .srun(&["--mpi=pmi2", "-n", "2"], &lat)
        .expect_ok("srun --mpi=pmi2 -n 2 ovbench latency");
    let l = launch_of(&out);
    assert_eq!(l["exchange"], "pmi2", "{l}");

    #[cfg(feature = "pmix")]
    {
        slurm
            .srun(&["--mpi=pmix", "-n", "2"], &lat)
            .expect_ok("srun --mpi=pmix -n 2 ovbench latency");
        let l = launch_of(&out);
        assert_eq!(l["exchange"], "pmix", "{l}");
    }

    if cluster::has_mpi_transport() {
        slurm
            .srun(
                &["--mpi=pmix", "-n", "2"],
                &[
                    "latency",
                    "--transport",
                    "mpi",
                    "--sizes",
                    "8,64K",
                    "--iters",
                    "200",
                ],
            )
            .expect_ok("srun --mpi=pmix -n 2 ovbench latency --transport mpi");
    } else {
        eprintln!("skipped: srun --mpi=pmix -n 2 ovbench latency --transport mpi (this ovbench has no mpi feature)");
    }

    // An allocation's shell is no step: ovbench launches its ranks itself.
    let mut c = slurm.cmd("salloc");
    c.args(["-n", "2", exe()]).args(lat);
    cluster::run(c, LIMIT).expect_ok("salloc -n 2 ovbench latency");
    assert_eq!(launch_of(&out)["launcher"], "ovbench (local)");
    assert_none_left(Duration::from_secs(5));

    // Rank 1 killed: the step ends within 5 s, a message names rank 1.
    let mut c = slurm.cmd("srun");
    c.args([
        "-n",
        "2",
        exe(),
        "latency",
        "--sizes",
        "8",
        "--iters",
        "1000000000",
    ]);
    let job = Job::start(c);
    cluster::kill_rank_1(job, "SLURM_PROCID=1", &["rank 1", "task 1"]);
}
