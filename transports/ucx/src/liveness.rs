//! Noticing a peer process that died without a goodbye (SIGKILL, crash).
//!
//! UCX's shared-memory transports (posix, sysv, cma) have no failure handler:
//! a read towards a dead peer never completes. Ranks on the same host
//! (ovbench's default launch) can do better: the address carries the
//! sender's pid and an identifier of its host and pid namespace, and
//! `poll` asks the kernel, at most every [`CHECK_EVERY`], whether those
//! pids still exist. Peers on other hosts are covered by the callers'
//! deadlines only.

use std::time::Duration;

/// How often `poll` checks peer processes.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);

/// This process's pid and the identity of its host and pid namespace
/// (boot id and pid-namespace inode): equal identities mean a pid names
/// the same process on both sides.
pub(crate) fn me() -> (u32, u64) {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in boot.trim().bytes().chain(ns.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (std::process::id(), h)
}

/// Whether process `pid` is gone: `kill(pid, 0)` says no such process,
/// or it is a zombie its parent (the launcher) has not reaped yet.
pub(crate) fn is_dead(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks existence and permission; nothing is sent.
    let rc = unsafe { libc::kill(p, 0) };
    if rc != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // "pid (comm) S ...": the state follows the last ')'.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_and_zombie_children_are_dead_and_we_are_alive() {
        assert!(!is_dead(std::process::id()));
        let mut c = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = c.id();
        // Not reaped yet: a zombie once it exited.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !is_dead(pid) {
            assert!(
                std::time::Instant::now() < end,
                "an exited child never looked dead"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        c.wait().expect("wait");
        assert!(is_dead(pid));
        assert_eq!(me().1, me().1);
    }
}
