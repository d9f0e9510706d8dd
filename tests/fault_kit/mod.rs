//! The fault-injection suite's parts (tests/faults.rs): a running job
//! with its stderr timed line by line, the replayable draws, the counts,
//! and the special cases beside the kill trials.

pub mod job;
pub mod special;

use std::collections::BTreeMap;
use std::time::Duration;

/// The deadline every run of the suite has.
pub const TIMEOUT: &str = "10";
/// How long the job may take to end after a fault.
pub const EXIT_BOUND: Duration = Duration::from_secs(5);
/// A job still running this long after the fault has hung.
pub const HANG: Duration = Duration::from_secs(30);

/// What the suite counts: per configuration (`local/tcp`, `srun/tcp`…)
/// its trials, where the kills landed and its longest exit.
#[derive(Default)]
pub struct Tally {
    pub configs: BTreeMap<String, ConfigCounts>,
    pub hangs: usize,
    pub left: usize,
    pub failures: Vec<String>,
}

/// One configuration's counts.
#[derive(Default)]
pub struct ConfigCounts {
    /// Trials run: a rank killed.
    pub trials: usize,
    /// How many kills landed in each phase (start-up, measuring, …).
    pub phases: BTreeMap<&'static str, usize>,
    /// The longest time from a kill to the last process of the job gone.
    pub exit_max: Duration,
    /// Kills only mpirun's own abort message reported (no rank's word).
    pub unnamed_by_mpirun: usize,
    /// Moments drawn past the rank's end (its run was quicker than the
    /// reference), drawn again.
    pub redrawn: usize,
    /// The suite's time budget ran out before this configuration's last
    /// trial.
    pub cut_short: bool,
    /// Kills after which mpirun itself never exited though every ovbench
    /// rank had ended (Open MPI's own teardown, not a rank waiting).
    pub mpirun_hung: usize,
}

impl Tally {
    pub fn config(&mut self, label: &str) -> &mut ConfigCounts {
        self.configs.entry(label.to_string()).or_default()
    }

    /// The counts as the suite prints them.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut by_transport: BTreeMap<&str, usize> = BTreeMap::new();
        let mut by_launcher: BTreeMap<&str, usize> = BTreeMap::new();
        let mut exit_max = Duration::ZERO;
        for (label, c) in &self.configs {
            let (launcher, transport) = label.split_once('/').unwrap_or((label, "?"));
            *by_transport.entry(transport).or_default() += c.trials;
            *by_launcher.entry(launcher).or_default() += c.trials;
            exit_max = exit_max.max(c.exit_max);
            let phases: Vec<String> = c.phases.iter().map(|(p, n)| format!("{p} {n}")).collect();
            let mut line = format!(
                "{label}: {} trials; kills hit: {}; exit time max {:.2?}",
                c.trials,
                phases.join(", "),
                c.exit_max
            );
            if c.redrawn > 0 {
                line += &format!(
                    "; {} moments drawn past the rank's end, drawn again",
                    c.redrawn
                );
            }
            if c.mpirun_hung > 0 {
                line += &format!(
                    "; {} after which mpirun hung with every ovbench rank gone (Open MPI's own teardown, killed after 30 s)",
                    c.mpirun_hung
                );
            }
            if c.cut_short {
                line += "; CUT SHORT by the suite's time budget";
            }
            if c.unnamed_by_mpirun > 0 {
                line += &format!(
                    "; {} reported only by mpirun's own abort message (no rank named)",
                    c.unnamed_by_mpirun
                );
            }
            out.push(line);
        }
        let join = |m: &BTreeMap<&str, usize>| {
            m.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!("trials per transport: {}", join(&by_transport)));
        out.push(format!("trials per launcher: {}", join(&by_launcher)));
        out.push(format!("exit time after a kill, max: {exit_max:.2?}"));
        out.push(format!("hangs: {}", self.hangs));
        out.push(format!("processes left: {}", self.left));
        out
    }
}

/// xorshift64*: the trials' draws, replayable from a printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
