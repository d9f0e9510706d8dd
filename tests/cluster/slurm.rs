//! A one-node Slurm cluster made by a test: munged with a key the test
//! writes, slurmctld and slurmd configured for a root-run CI (SlurmUser
//! root, proctrack/linuxproc, task/none, 4 CPUs declared over the
//! machine's 2 with config_overrides), on ports of their own, started and
//! stopped by the test (tests/cluster_slurm.rs, tests/faults.rs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{exe, scratch, Job, Run};

const LIMIT: Duration = Duration::from_secs(120);

/// A one-node Slurm cluster; dropped: its daemons stopped, its files removed.
pub struct Slurm {
    pub dir: PathBuf,
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
    pub fn up() -> Slurm {
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

    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    pub fn sinfo(&self) -> String {
        self.cmd("sinfo")
            .args(["-h", "-o", "%t"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Runs `srun ARGS exe OVBENCH_ARGS`, printing `scontrol show step`
    /// once the step runs.
    pub fn srun(&self, srun_args: &[&str], ovbench_args: &[&str]) -> Run {
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
