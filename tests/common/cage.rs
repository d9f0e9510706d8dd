//! A cage for one run: a child of the test's own cgroup with a memory or
//! task limit (cgroup v1 or v2, whichever is writable), else `prlimit`.
//! The run enters it through `sh -c 'echo $$ > …/cgroup.procs; exec …'`,
//! so nothing but the caged command is inside, and the cgroup is removed
//! when the cage is dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a cage limits.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// Bytes of memory.
    Memory(u64),
    /// Tasks (processes and threads).
    Tasks(u64),
}

/// Where the limit lives.
#[derive(Debug)]
pub enum Cage {
    /// A cgroup directory made for the run (`v2` or v1).
    Cgroup { dir: PathBuf, v2: bool },
    /// `prlimit` options, where no cgroup could be made.
    Prlimit(String),
}

impl Cage {
    /// A cage for `limit`, or `None` (with the reason) where neither a
    /// cgroup nor prlimit can impose it.
    pub fn new(limit: Limit) -> Result<Cage, String> {
        let controller = match limit {
            Limit::Memory(_) => "memory",
            Limit::Tasks(_) => "pids",
        };
        let mut tried = Vec::new();
        for v2 in [false, true] {
            match own_cgroup(controller, v2).and_then(|d| make(&d, limit, v2)) {
                Ok(dir) => return Ok(Cage::Cgroup { dir, v2 }),
                Err(e) => tried.push(e),
            }
        }
        match limit {
            // RLIMIT_AS stands in for a memory limit.
            Limit::Memory(b) => Ok(Cage::Prlimit(format!("--as={b}"))),
            // RLIMIT_NPROC does not bind root, so it cannot stand in.
            Limit::Tasks(_) => Err(format!("no writable pids cgroup: {}", tried.join("; "))),
        }
    }

    /// `program args…`, to run inside the cage (stdio piped as
    /// [`super::command`]'s).
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, program: &Path, args: &[S]) -> Command {
        let mut cmd = match self {
            Cage::Cgroup { dir, .. } => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!(
                        "echo $$ > '{}/cgroup.procs' && exec \"$@\"",
                        dir.display()
                    ))
                    .arg("sh");
                c
            }
            Cage::Prlimit(opts) => {
                let mut c = Command::new("prlimit");
                c.arg(opts).arg("--");
                c
            }
        };
        cmd.arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Which cage this is, for the test's output.
    pub fn describe(&self) -> String {
        match self {
            Cage::Cgroup { dir, v2 } => {
                format!("cgroup {} {}", if *v2 { "v2" } else { "v1" }, dir.display())
            }
            Cage::Prlimit(o) => format!("prlimit {o}"),
        }
    }
}

impl Drop for Cage {
    fn drop(&mut self) {
        if let Cage::Cgroup { dir, .. } = self {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The directory of this process's cgroup that holds `controller` (v1),
/// or of its v2 cgroup.
fn own_cgroup(controller: &str, v2: bool) -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if v2 {
                id == "0" && ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == controller)
            };
            hit.then(|| path.to_string())
        })
        .ok_or(format!(
            "no {} {controller} cgroup",
            if v2 { "v2" } else { "v1" }
        ))?;
    let (root, point) = mounts
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split_whitespace().collect();
            let post: Vec<&str> = post.split_whitespace().collect();
            let ok = if v2 {
                post.first() == Some(&"cgroup2")
            } else {
                post.first() == Some(&"cgroup") && post.get(2)?.split(',').any(|o| o == controller)
            };
            if !ok {
                return None;
            }
            Some((pre.get(3)?.to_string(), pre.get(4)?.to_string()))
        })
        .ok_or(format!("no mount for {controller}"))?;
    let rel = Path::new(&path)
        .strip_prefix(&root)
        .map_err(|_| format!("{path} is outside its mount's root {root}"))?;
    Ok(Path::new(&point).join(rel))
}

/// Make a child of `parent` with `limit` set.
fn make(parent: &Path, limit: Limit, v2: bool) -> Result<PathBuf, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = parent.join(format!("ovbench-cage-{}-{n}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let (file, value) = match (limit, v2) {
        (Limit::Memory(b), false) => ("memory.limit_in_bytes", b),
        (Limit::Memory(b), true) => ("memory.max", b),
        (Limit::Tasks(t), _) => ("pids.max", t),
    };
    if let Err(e) = std::fs::write(dir.join(file), value.to_string()) {
        let _ = std::fs::remove_dir(&dir);
        return Err(format!("{}/{file}: {e}", dir.display()));
    }
    Ok(dir)
}
