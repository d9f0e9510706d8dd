//! The environment every header and JSON file records (docs/architecture.md §
//! Conventions): command line, version and commit, date, hosts, CPU
//! model, core map, each rank's affinity, governor, kernel, library
//! versions and `UCX_*`/`FI_*` variables — and the warnings a careful
//! reader needs (oversubscription, shared physical cores, governor).

mod git;
mod libs;
mod system;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use git::git_commit;
pub use libs::{fabric_env, library_versions};
pub use system::{
    affinity, core_map, cpu_model, format_core_map, format_cpu_list, governors, hostname, kernel,
    parse_cpu_list, utc_from_unix, utc_now, CpuPlace,
};

/// What one rank reports about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankFacts {
    pub rank: u32,
    pub hostname: String,
    pub pid: u32,
    /// CPUs the rank may run on after pinning.
    pub affinity: Vec<usize>,
}

impl RankFacts {
    pub fn here(rank: u32) -> RankFacts {
        RankFacts {
            rank,
            hostname: hostname(),
            pid: std::process::id(),
            affinity: affinity(),
        }
    }
}

/// The environment of a run, captured on rank 0.
#[derive(Clone, Debug, Serialize)]
pub struct Environment {
    pub command_line: String,
    pub version: String,
    pub git_commit: String,
    pub date: String,
    pub hostname: String,
    pub cpu_model: String,
    pub cores: usize,
    pub core_map: Vec<CpuPlace>,
    /// Frequency governor → CPUs using it (empty where cpufreq is absent).
    pub governors: BTreeMap<String, Vec<usize>>,
    pub kernel: String,
    pub libraries: BTreeMap<String, String>,
    pub fabric_env: BTreeMap<String, String>,
    pub ranks: Vec<RankFacts>,
}

impl Environment {
    /// Capture this host's facts plus what every rank reported.
    pub fn capture(ranks: Vec<RankFacts>) -> Environment {
        let map = core_map();
        Environment {
            command_line: shell_words(std::env::args_os()),
            version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_commit().to_string(),
            date: utc_now(),
            hostname: hostname(),
            cpu_model: cpu_model(),
            cores: map.len(),
            governors: governors(&map),
            core_map: map,
            kernel: kernel(),
            libraries: library_versions(),
            fabric_env: fabric_env(),
            ranks,
        }
    }

    /// The header lines (without the leading `# `).
    pub fn lines(&self) -> Vec<String> {
        let mut l = vec![
            format!("command: {}", self.command_line),
            format!(
                "ovbench {} (commit {}), {}",
                self.version, self.git_commit, self.date
            ),
            format!("host: {}, kernel {}", self.hostname, self.kernel),
            format!("cpu: {}, {} online", self.cpu_model, self.cores),
            format!("core map: {}", format_core_map(&self.core_map)),
        ];
        let gov = if self.governors.is_empty() {
            "unavailable (no cpufreq)".to_string()
        } else {
            self.governors
                .iter()
                .map(|(g, cpus)| format!("{g} on cpu {}", format_cpu_list(cpus)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        l.push(format!("governor: {gov}"));
        for r in &self.ranks {
            l.push(format!(
                "rank {}: host {}, pid {}, cpus {}",
                r.rank,
                r.hostname,
                r.pid,
                format_cpu_list(&r.affinity)
            ));
        }
        let libs = if self.libraries.is_empty() {
            "none found".to_string()
        } else {
            self.libraries
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        l.push(format!("libraries: {libs}"));
        for (k, v) in &self.fabric_env {
            l.push(format!("env: {k}={v}"));
        }
        l
    }

    /// Warnings for this run; `progress_threads` per rank (0 or 1).
    pub fn warnings(&self, progress_threads: usize) -> Vec<String> {
        warnings(
            &self.ranks,
            &self.core_map,
            &self.governors,
            &self.hostname,
            progress_threads,
        )
    }
}

/// The checks of docs/architecture.md § Conventions, on facts passed in (pure).
pub fn warnings(
    ranks: &[RankFacts],
    map: &[CpuPlace],
    governors: &BTreeMap<String, Vec<usize>>,
    host: &str,
    progress_threads: usize,
) -> Vec<String> {
    let mut w = Vec::new();
    let local: Vec<&RankFacts> = ranks.iter().filter(|r| r.hostname == host).collect();
    let threads = local.len() * (1 + progress_threads);
    if !map.is_empty() && threads > map.len() {
        w.push(format!(
            "{} ranks{} on {host} but only {} cores: ranks will share CPUs and latencies include scheduling delays",
            local.len(),
            if progress_threads > 0 { " plus their progress threads" } else { "" },
            map.len()
        ));
    }
    // Ranks pinned to one CPU each: do two sit on the same physical core?
    let place = |cpu: usize| {
        map.iter()
            .find(|p| p.cpu == cpu)
            .map(|p| (p.package, p.core))
    };
    let mut seen: BTreeMap<(i64, i64), u32> = BTreeMap::new();
    for r in &local {
        if let [cpu] = r.affinity[..] {
            if let Some(pc) = place(cpu).filter(|pc| pc.1 >= 0) {
                if let Some(other) = seen.insert(pc, r.rank) {
                    w.push(format!(
                        "ranks {other} and {} share physical core {} of package {} (hyperthreads or the same CPU): their timings interfere",
                        r.rank, pc.1, pc.0
                    ));
                }
            }
        }
    }
    let slow: Vec<&String> = governors.keys().filter(|g| *g != "performance").collect();
    if !slow.is_empty() {
        w.push(format!(
            "frequency governor is {} rather than `performance`: clock speed may change during the run (cpupower frequency-set -g performance)",
            slow.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    w
}

/// The command line as a shell would need it (arguments with spaces or
/// quotes single-quoted; one that is no UTF-8, as a non-UTF-8 file name,
/// in bash's `$'…'` with its other bytes as `\xNN`).
fn shell_words(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    args.map(|a| match a.into_string() {
        Ok(a)
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+@%".contains(c)) =>
        {
            a
        }
        Ok(a) => format!("'{}'", a.replace('\'', "'\\''")),
        Err(raw) => {
            use std::os::unix::ffi::OsStrExt;
            let mut s = String::from("$'");
            for &b in raw.as_bytes() {
                match b {
                    b'\'' | b'\\' => s.push_str(&format!("\\{}", b as char)),
                    0x20..=0x7e => s.push(b as char),
                    _ => s.push_str(&format!("\\x{b:02x}")),
                }
            }
            s.push('\'');
            s
        }
    })
    .collect::<Vec<_>>()
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(r: u32, cpus: &[usize]) -> RankFacts {
        RankFacts {
            rank: r,
            hostname: "h".into(),
            pid: 1,
            affinity: cpus.to_vec(),
        }
    }
    fn smt_map() -> Vec<CpuPlace> {
        // 4 logical CPUs on 2 cores: cpu0/cpu2 on core 0, cpu1/cpu3 on core 1.
        (0..4)
            .map(|cpu| CpuPlace {
                cpu,
                package: 0,
                core: (cpu % 2) as i64,
            })
            .collect()
    }

    #[test]
    fn clean_run_has_no_warnings() {
        let mut g = BTreeMap::new();
        g.insert("performance".to_string(), vec![0, 1, 2, 3]);
        let w = warnings(&[rank(0, &[0]), rank(1, &[1])], &smt_map(), &g, "h", 0);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn oversubscription_shared_core_and_governor() {
        let mut g = BTreeMap::new();
        g.insert("powersave".to_string(), vec![0, 1, 2, 3]);
        let ranks = [rank(0, &[0]), rank(1, &[2]), rank(2, &[1])];
        let w = warnings(&ranks, &smt_map(), &g, "h", 1);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("3 ranks plus their progress threads") && w[0].contains("4 cores"));
        assert!(w[1].contains("ranks 0 and 1 share physical core 0"));
        assert!(w[2].contains("`powersave`"));
        // Ranks on other hosts do not count against this host's cores.
        let mut far = rank(3, &[3]);
        far.hostname = "other".into();
        let w = warnings(&[rank(0, &[0]), far], &smt_map(), &BTreeMap::new(), "h", 0);
        assert!(w.is_empty(), "{w:?}");
    }

    use std::ffi::OsString;

    #[test]
    fn command_line_quoting() {
        let args = ["ovbench", "latency", "--sim", "L=1us,os=300ns", "it's"].map(OsString::from);
        assert_eq!(
            shell_words(args.into_iter()),
            "ovbench latency --sim L=1us,os=300ns 'it'\\''s'"
        );
        // A file name that is no UTF-8 (the panic): bash's $'…'.
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"r\xe9s'\\.json".to_vec());
        assert_eq!(
            shell_words([OsString::from("--json"), odd].into_iter()),
            "--json $'r\\xe9s\\'\\\\.json'"
        );
    }

    #[test]
    fn capture_describes_this_host() {
        let env = Environment::capture(vec![RankFacts::here(0)]);
        assert!(env.cores >= 1);
        let lines = env.lines();
        assert!(lines.iter().any(|l| l.starts_with("rank 0: host ")));
        assert!(lines.iter().any(|l| l.starts_with("governor: ")));
        let v = serde_json::to_value(&env).unwrap();
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    }
}
