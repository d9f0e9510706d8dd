//! A job under test: started in its own process group, its stderr read
//! line by line with each line's arrival time, waited on with a limit,
//! killed whole when dropped; and what is left of it afterwards.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::cluster::{environ, ovbench_pids};

/// A running job: its stderr lines with the time each arrived.
pub struct Running {
    pub child: Child,
    pub started: Instant,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: Option<JoinHandle<()>>,
    /// What was still running when [`Running::wait`] gave up: the
    /// launcher and every ovbench process, with its rank and where the
    /// kernel has it waiting.
    pub at_hang: String,
    /// How many of those were ovbench processes.
    pub ovbench_at_hang: usize,
}

impl Running {
    pub fn start(mut cmd: Command) -> Running {
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
            at_hang: String::new(),
            ovbench_at_hang: 0,
        }
    }

    /// Whether the launcher process has exited.
    pub fn over(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits until `limit`; the exit code (None: killed by a signal, or
    /// still running at `limit`, then killed here) and whether it hung.
    pub fn wait(&mut self, limit: Duration) -> (Option<i32>, bool) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                if let Some(h) = self.reader.take() {
                    let _ = h.join();
                }
                return (s.code(), false);
            }
            if Instant::now() > deadline {
                self.ovbench_at_hang = ovbench_pids().len();
                self.at_hang = survivors(self.child.id());
                let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
                let _ = self.child.wait();
                return (None, true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stderr(&self) -> String {
        let l = self.lines.lock().expect("lines");
        l.iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// When a stderr line containing `text` arrived.
    pub fn line_at(&self, text: &str) -> Option<Instant> {
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

/// The launcher `launcher` and every ovbench process still running, one
/// a line: pid, rank variables, state and kernel wait channel.
fn survivors(launcher: u32) -> String {
    let mut pids = vec![launcher];
    pids.extend(ovbench_pids());
    pids.iter()
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            let wchan = std::fs::read_to_string(format!("/proc/{p}/wchan")).unwrap_or_default();
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            let ranks: Vec<String> = environ(*p)
                .into_iter()
                .filter(|v| {
                    ["OVBENCH_RANK=", "OMPI_COMM_WORLD_RANK=", "SLURM_PROCID="]
                        .iter()
                        .any(|k| v.starts_with(k))
                })
                .collect();
            format!(
                "  pid {p} {} {} state {} wchan {wchan}",
                comm.trim(),
                ranks.join(" "),
                state.unwrap_or("gone")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The pid of the process of rank `var` (`OVBENCH_RANK=1`), if running.
pub fn rank_process(var: &str) -> Option<u32> {
    ovbench_pids()
        .into_iter()
        .find(|&p| environ(p).iter().any(|v| v == var))
}

/// The rows of the JSON at `path` and the document; `None` when absent
/// or unreadable.
pub fn json_rows(path: &Path) -> Option<(usize, serde_json::Value)> {
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

/// Waits up to `grace` for every ovbench process to be gone (the ranks
/// of srun and mpirun are no children of the job's launcher, and may
/// outlive it); then kills what is left and says how many there were.
pub fn wait_all_gone(grace: Duration) -> usize {
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
        std::thread::sleep(Duration::from_millis(10));
    }
}
