//! Noticing a peer process that died without a goodbye (SIGKILL, crash).
//!
//! UCX's shared-memory transports (posix, sysv, cma) have no failure handler:
//! a read towards a dead peer never completes. Ranks on the same host
//! (ovbench's default launch) can do better: the address carries the
//! sender's pid and an identifier of its host and pid namespace, and
//! `poll` asks the kernel, at most every
//! [`CHECK_EVERY`](ovbench_core::fabric::peer_watch::CHECK_EVERY), whether
//! those pids still exist
//! ([`PeerWatch`](ovbench_core::fabric::peer_watch::PeerWatch)). Peers on
//! other hosts are covered by the callers' deadlines only.

/// The watch's [`Probe`](ovbench_core::fabric::peer_watch::Probe):
/// `kill(pid, 0)`, whose error (`ESRCH`) says no such process.
pub(crate) fn signal_zero(pid: libc::pid_t) -> std::io::Result<()> {
    // No signal (`None`) only checks existence and permission.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).map_err(std::io::Error::from)
}
