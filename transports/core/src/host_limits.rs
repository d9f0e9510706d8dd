//! The memory and task limits this process really has, and which one
//! binds: the host's MemAvailable is only one of them. A batch job or a
//! container runs in a cgroup whose `memory.max` (v2) or
//! `memory.limit_in_bytes` (v1) is far below it, the cgroup or one of its
//! parents may cap the tasks (`pids.max`), and the shell may set
//! RLIMIT_AS. A preflight that reads MemAvailable alone
//! lets the kernel kill the run half-way instead.
//!
//! Everything is read from files (`/proc/self/cgroup`, `/proc/self/mountinfo`,
//! the cgroup files, `/proc/self/limits`), below a root that tests point
//! at fixture trees.

#![deny(clippy::arithmetic_side_effects)]

use std::path::{Path, PathBuf};

/// A limit and where it comes from, for the message that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// What is left under the limit (bytes, or tasks).
    pub left: u64,
    /// Where it comes from, e.g. `cgroup v1 memory.limit_in_bytes of /job (8192 MiB, 6000 MiB in use)`.
    pub what: String,
}

impl Limit {
    fn tighter(a: Option<Limit>, b: Option<Limit>) -> Option<Limit> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.left < a.left { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// The limits as seen below `root` (`/` for this process).
#[derive(Debug, Clone)]
pub struct HostLimits {
    root: PathBuf,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits::at("/")
    }
}

/// A cgroup hierarchy this process is in: where its directory is mounted,
/// and the directories from the process's own cgroup up to that mount.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    v2: bool,
    /// The process's own cgroup directory first, then each parent up to
    /// the mount's root.
    dirs: Vec<PathBuf>,
    /// The cgroup paths of `dirs` (for the message).
    names: Vec<String>,
}

const MIB: u64 = 1 << 20;
/// cgroup v1's "no limit": the largest page-aligned i64.
const V1_UNLIMITED: u64 = 0x7FFF_FFFF_FFFF_F000;

impl HostLimits {
    /// The limits of a tree rooted at `root` (a fixture in tests).
    pub fn at(root: impl Into<PathBuf>) -> HostLimits {
        HostLimits { root: root.into() }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn read(&self, p: &Path) -> Option<String> {
        std::fs::read_to_string(p).ok()
    }

    /// The memory this process may still take, and the limit that binds:
    /// the least of MemAvailable and, in every memory cgroup from its own
    /// up, the limit less what is in use (page cache that can be dropped
    /// counted as free).
    pub fn memory(&self) -> Option<Limit> {
        let mut best = self.mem_available();
        for h in self.hierarchies("memory") {
            for (dir, name) in h.dirs.iter().zip(&h.names) {
                best = Limit::tighter(best, self.cgroup_memory(dir, name, h.v2));
            }
        }
        best
    }

    /// The address space one process may still map (RLIMIT_AS less what
    /// it maps now), where set: it binds each rank process alone.
    pub fn address_space(&self) -> Option<Limit> {
        let soft = self.rlimit("Max address space")?;
        let used = self
            .read(&self.path("/proc/self/status"))
            .and_then(|s| kib_field(&s, "VmSize:"))
            .unwrap_or(0);
        Some(Limit {
            left: soft.saturating_sub(used),
            what: format!(
                "RLIMIT_AS (ulimit -v) of {} MiB, {} MiB mapped",
                soft / MIB,
                used / MIB
            ),
        })
    }

    /// The tasks (processes and threads) this process may still start
    /// under `pids.max`, in every pids cgroup from its own up, and the
    /// cgroup that binds. (RLIMIT_NPROC and the kernel's own task limits
    /// are the launcher's capacity check's.)
    pub fn tasks(&self) -> Option<Limit> {
        let mut best = None;
        for h in self.hierarchies("pids") {
            for (dir, name) in h.dirs.iter().zip(&h.names) {
                best = Limit::tighter(best, self.cgroup_pids(dir, name, h.v2));
            }
        }
        best
    }

    fn mem_available(&self) -> Option<Limit> {
        let text = self.read(&self.path("/proc/meminfo"))?;
        let b = kib_field(&text, "MemAvailable:")?;
        Some(Limit {
            left: b,
            what: format!("the host's MemAvailable of {} MiB", b / MIB),
        })
    }

    fn cgroup_memory(&self, dir: &Path, name: &str, v2: bool) -> Option<Limit> {
        let (max_f, cur_f, cache) = if v2 {
            ("memory.max", "memory.current", "inactive_file")
        } else {
            (
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        };
        let max = parse_limit(&self.read(&dir.join(max_f))?)?;
        let cur: u64 = self.read(&dir.join(cur_f))?.trim().parse().ok()?;
        let cache = self
            .read(&dir.join("memory.stat"))
            .and_then(|s| stat_field(&s, cache))
            .unwrap_or(0);
        let used = cur.saturating_sub(cache);
        Some(Limit {
            left: max.saturating_sub(used),
            what: format!(
                "cgroup {} {max_f} of {name} ({} MiB, {} MiB in use)",
                if v2 { "v2" } else { "v1" },
                max / MIB,
                used / MIB
            ),
        })
    }

    fn cgroup_pids(&self, dir: &Path, name: &str, v2: bool) -> Option<Limit> {
        let max = parse_limit(&self.read(&dir.join("pids.max"))?)?;
        let cur: u64 = self.read(&dir.join("pids.current"))?.trim().parse().ok()?;
        Some(Limit {
            left: max.saturating_sub(cur),
            what: format!(
                "cgroup {} pids.max of {name} ({max} tasks, {cur} running)",
                if v2 { "v2" } else { "v1" }
            ),
        })
    }

    /// The soft limit of `/proc/self/limits`'s row `row`, where set.
    fn rlimit(&self, row: &str) -> Option<u64> {
        let text = self.read(&self.path("/proc/self/limits"))?;
        let rest = text.lines().find_map(|l| l.strip_prefix(row))?;
        rest.split_whitespace().next()?.parse().ok()
    }

    /// The hierarchies that hold `controller` (a v1 mount naming it, and
    /// the v2 mount, where this process's cgroup there has the file).
    fn hierarchies(&self, controller: &str) -> Vec<Hierarchy> {
        let Some(cgroups) = self.read(&self.path("/proc/self/cgroup")) else {
            return Vec::new();
        };
        let Some(mounts) = self.read(&self.path("/proc/self/mountinfo")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for line in cgroups.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let v2 = id == "0" && ctrls.is_empty();
            if !v2 && !ctrls.split(',').any(|c| c == controller) {
                continue;
            }
            let Some((mount_root, mount_point)) = find_mount(&mounts, v2, controller) else {
                continue;
            };
            let Some(rel) = Path::new(path).strip_prefix(&mount_root).ok() else {
                continue;
            };
            let mut dirs = Vec::new();
            let mut names = Vec::new();
            let mut cur = Some(rel);
            while let Some(r) = cur {
                dirs.push(self.path(&mount_point).join(r));
                names.push(format!(
                    "/{}",
                    mount_root.join(r).strip_prefix("/").unwrap_or(r).display()
                ));
                cur = r.parent();
            }
            out.push(Hierarchy { v2, dirs, names });
        }
        out
    }
}

/// The (root, mount point) of the cgroup mount for `controller` (v1) or
/// the cgroup2 mount.
fn find_mount(mountinfo: &str, v2: bool, controller: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let pre: Vec<&str> = pre.split_whitespace().collect();
        let post: Vec<&str> = post.split_whitespace().collect();
        let (fstype, opts) = (*post.first()?, *post.get(2).unwrap_or(&""));
        let ok = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && opts.split(',').any(|o| o == controller)
        };
        if !ok {
            return None;
        }
        Some((PathBuf::from(unescape(pre.get(3)?)), unescape(pre.get(4)?)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// A limit file's value: `max` (v2) or v1's huge value mean none.
fn parse_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    let v: u64 = t.parse().ok()?;
    (v < V1_UNLIMITED).then_some(v)
}

/// A `Key:  N kB` field in bytes.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    let rest = text.lines().find_map(|l| l.strip_prefix(key))?;
    let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// A `key N` line of memory.stat.
fn stat_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests;
