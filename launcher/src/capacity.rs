//! Whether this host can start `np` more processes, checked before the
//! first is forked: a job that cannot start all its ranks would fork
//! thousands of them before the kernel said no, and leave the host
//! starved while it tore them down.

use std::os::unix::fs::MetadataExt;

use nix::sys::resource::{getrlimit, Resource};

/// Threads one rank may run (its main thread, a progress thread, the
/// libraries' own), reserved for each rank of the job.
const THREADS_PER_RANK: u64 = 4;
/// Tasks left for everything else on the host.
const SPARE_TASKS: u64 = 256;

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
    let free = limit.saturating_sub(now + SPARE_TASKS);
    Some((
        free / THREADS_PER_RANK,
        format!("{why}, {now} tasks running"),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_job_fits_and_a_huge_one_does_not() {
        assert!(check_local(2).is_ok());
        let e = check_local(u32::MAX).unwrap_err();
        assert!(
            e.contains("--np 4294967295") && e.contains("fewer ranks"),
            "{e}"
        );
    }
}
