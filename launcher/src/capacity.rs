//! Whether this host can start `np` more processes, checked before the
//! first is forked: a job that cannot start all its ranks would fork
//! thousands of them before the kernel said no, and leave the host
//! starved while it tore them down.

#![deny(clippy::arithmetic_side_effects)]

use std::os::unix::fs::MetadataExt;

use nix::sys::resource::{getrlimit, Resource};

/// Threads one rank may run (its main thread, a progress thread, the
/// libraries' own), reserved for each rank of the job.
const THREADS_PER_RANK: u64 = 4;
/// Tasks left for everything else on the host.
const SPARE_TASKS: u64 = 256;
/// Tasks of the launching process itself (its threads) inside a pids
/// cgroup, beside its ranks.
const SELF_TASKS: u64 = 8;

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Tasks (threads) running on the host now: the fourth field of
/// /proc/loadavg is `runnable/total`.
fn tasks_now() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// The most ranks this host can start now, and the limit that sets it;
/// `None` where the limits cannot be read.
pub fn max_local_ranks() -> Option<(u64, String)> {
    let now = tasks_now()?;
    let mut limits: Vec<(u64, String)> = Vec::new();
    if let Some(t) = read_u64("/proc/sys/kernel/threads-max") {
        limits.push((t, format!("kernel.threads-max is {t}")));
    }
    if let Some(p) = read_u64("/proc/sys/kernel/pid_max") {
        limits.push((p, format!("kernel.pid_max is {p}")));
    }
    // RLIMIT_NPROC binds unprivileged users (root is exempt).
    // The owner of /proc/self is the effective user.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NPROC) {
            limits.push((soft, format!("the process limit (ulimit -u) is {soft}")));
        }
    }
    let (limit, why) = limits.into_iter().min_by_key(|l| l.0)?;
    let free = limit.saturating_sub(now.saturating_add(SPARE_TASKS));
    let host = (
        free / THREADS_PER_RANK,
        format!("{why}, {now} tasks running"),
    );
    // A pids cgroup (a batch job's, a container's) binds its own tasks:
    // what is left of it is all the ranks get, less this process's own.
    let cgroup = ovbench_core::host_limits::HostLimits::default()
        .tasks()
        .map(|l| (l.left.saturating_sub(SELF_TASKS) / THREADS_PER_RANK, l.what));
    Some(match cgroup {
        Some(c) if c.0 < host.0 => c,
        _ => host,
    })
}

/// An error naming the limit when `np` local ranks do not fit.
pub fn check_local(np: u32) -> Result<(), String> {
    match max_local_ranks() {
        Some((max, why)) if u64::from(np) > max => Err(format!(
            "--np {np}: this host can start about {max} more ranks ({why}, {THREADS_PER_RANK} threads reserved per rank); use fewer ranks, or --transport sim for a model of many"
        )),
        _ => Ok(()),
    }
}

/// Most ranks per core a local job may have without `--oversubscribe`:
/// far past what the tests use (4 ranks on 2 cores), well short of a
/// typo's `--np 100000`.
pub const MAX_RANKS_PER_CORE: u64 = 64;

/// An error when `np` ranks would put more than [`MAX_RANKS_PER_CORE`]
/// on each of `cpus` cores and the user did not say `--oversubscribe`.
pub fn check_per_core(np: u32, cpus: usize, oversubscribe: bool) -> Result<(), String> {
    let cpus = cpus.max(1) as u64;
    if oversubscribe || u64::from(np) <= MAX_RANKS_PER_CORE.saturating_mul(cpus) {
        return Ok(());
    }
    Err(format!(
        "--np {np}: {} ranks per core on this host's {cpus} usable CPUs (more than {MAX_RANKS_PER_CORE}); add --oversubscribe if that is meant, or use --transport sim for a model of many ranks",
        u64::from(np).div_ceil(cpus)
    ))
}

/// An error when `need` bytes of shared memory do not fit in the free
/// space of `dir` (/dev/shm); `what` says who needs them.
pub fn check_shm_space(dir: &std::path::Path, need: u64, what: &str) -> Result<(), String> {
    let Ok(st) = nix::sys::statvfs::statvfs(dir) else {
        return Ok(());
    };
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    if need <= free {
        return Ok(());
    }
    Err(format!(
        "{what} need about {} MiB in {} and {} MiB are free: remove stale files there (ls -l {}), enlarge it (mount -o remount,size=…), or use fewer ranks",
        need >> 20,
        dir.display(),
        free >> 20,
        dir.display()
    ))
}

/// An error when `need` bytes cannot be locked (registered for RDMA)
/// under this process's `ulimit -l`; root (CAP_IPC_LOCK) is exempt.
pub fn check_memlock(need: u64) -> Result<(), String> {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let Ok((soft, _)) = getrlimit(Resource::RLIMIT_MEMLOCK) else {
        return Ok(());
    };
    memlock_verdict(need, soft, root)
}

fn memlock_verdict(need: u64, soft: u64, root: bool) -> Result<(), String> {
    if root || soft == nix::libc::RLIM_INFINITY || need <= soft {
        return Ok(());
    }
    Err(format!(
        "verbs registers about {} KiB per rank and the locked-memory limit (ulimit -l) is {} KiB: raise it (ulimit -l unlimited; for services LimitMEMLOCK=infinity), or use smaller sizes",
        need.div_ceil(1024),
        soft / 1024
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `checked` is a refusal naming every one of `wanted`.
    #[track_caller]
    fn refused(checked: Result<(), String>, wanted: &[&str]) {
        let e = checked.expect_err("refused");
        assert!(wanted.iter().all(|w| e.contains(w)), "{wanted:?} in {e}");
    }

    #[test]
    fn more_than_64_ranks_a_core_need_oversubscribe() {
        assert!(check_per_core(4, 2, false).is_ok());
        assert!(check_per_core(128, 2, false).is_ok());
        refused(
            check_per_core(129, 2, false),
            &["--np 129", "--oversubscribe"],
        );
        assert!(check_per_core(100_000, 2, true).is_ok());
    }

    #[test]
    fn shm_space_and_locked_memory_are_judged_against_their_limits() {
        let dir = std::path::Path::new("/dev/shm");
        assert!(check_shm_space(dir, 1, "2 ranks").is_ok());
        refused(
            check_shm_space(dir, u64::MAX / 2, "2 ranks of libfabric shm"),
            &["/dev/shm", "MiB are free"],
        );
        assert!(memlock_verdict(1 << 20, 64 << 10, true).is_ok());
        assert!(memlock_verdict(1 << 20, nix::libc::RLIM_INFINITY, false).is_ok());
        refused(
            memlock_verdict(1 << 20, 64 << 10, false),
            &["ulimit -l", "64 KiB"],
        );
    }

    #[test]
    fn a_small_job_fits_and_a_huge_one_does_not() {
        assert!(check_local(2).is_ok());
        refused(check_local(u32::MAX), &["--np 4294967295", "fewer ranks"]);
    }
}
