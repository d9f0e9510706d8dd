//! Facts about this host read from /proc and /sys: CPU model, core map,
//! affinity, frequency governor, kernel, hostname, and the date.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Where a logical CPU sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub cpu: usize,
    /// Physical package (socket).
    pub package: i64,
    /// Physical core id within the package.
    pub core: i64,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The CPU model name (first `model name` of /proc/cpuinfo).
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Processor" | "cpu model")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Parse a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// Format CPUs as a compact list (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Online CPUs with their package and core ids.
pub fn core_map() -> Vec<CpuPlace> {
    let online = read_trim("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    online
        .into_iter()
        .map(|cpu| {
            let topo = |f: &str| {
                read_trim(&format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(-1)
            };
            CpuPlace {
                cpu,
                package: topo("physical_package_id"),
                core: topo("core_id"),
            }
        })
        .collect()
}

/// The core map in one line: the whole map while it is short (up to 16
/// CPUs: `cpu0=s0c0 cpu1=s0c1 ...`), else a count of packages, physical
/// cores and CPUs (the JSON always has the whole map).
pub fn format_core_map(map: &[CpuPlace]) -> String {
    if map.len() <= 16 {
        return map
            .iter()
            .map(|p| format!("cpu{}=s{}c{}", p.cpu, p.package, p.core))
            .collect::<Vec<_>>()
            .join(" ");
    }
    let mut packages: Vec<i64> = map.iter().map(|p| p.package).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut cores: Vec<(i64, i64)> = map.iter().map(|p| (p.package, p.core)).collect();
    cores.sort_unstable();
    cores.dedup();
    format!(
        "{} CPUs on {} physical cores in {} package(s){}",
        map.len(),
        cores.len(),
        packages.len(),
        if cores.len() < map.len() {
            " (SMT)"
        } else {
            ""
        }
    )
}

/// The CPUs this process may run on.
pub fn affinity() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The frequency governor of every CPU that has one (`None` where cpufreq
/// is absent, as in most VMs), as governor → CPUs.
pub fn governors(map: &[CpuPlace]) -> BTreeMap<String, Vec<usize>> {
    let mut g: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for p in map {
        if let Some(name) = read_trim(&format!(
            "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
            p.cpu
        )) {
            g.entry(name).or_default().push(p.cpu);
        }
    }
    g
}

pub fn kernel() -> String {
    let release = read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
    let os = read_trim("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into());
    format!("{os} {release}")
}

pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// The current UTC time as ISO 8601 (`2026-11-22T12:55:08Z`).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_from_unix(secs)
}

/// Format seconds since the epoch as ISO 8601 UTC (Hinnant's
/// civil-from-days algorithm).
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn core_map_line_stays_short() {
        let small: Vec<CpuPlace> = (0..2)
            .map(|cpu| CpuPlace {
                cpu,
                package: 0,
                core: cpu as i64,
            })
            .collect();
        assert_eq!(format_core_map(&small), "cpu0=s0c0 cpu1=s0c1");
        let big: Vec<CpuPlace> = (0..128)
            .map(|cpu| CpuPlace {
                cpu,
                package: (cpu / 64) as i64,
                core: (cpu % 32) as i64,
            })
            .collect();
        assert_eq!(
            format_core_map(&big),
            "128 CPUs on 64 physical cores in 2 package(s) (SMT)"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(utc_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_from_unix(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn this_host_has_cpus_and_an_affinity() {
        let map = core_map();
        assert!(!map.is_empty());
        let aff = affinity();
        assert!(!aff.is_empty());
        assert!(aff.iter().all(|c| map.iter().any(|p| p.cpu == *c)));
        assert!(kernel().starts_with("Linux "));
        assert_ne!(hostname(), "");
    }
}
