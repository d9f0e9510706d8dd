//! Noticing a peer process that died without a goodbye (SIGKILL, crash).
//!
//! libfabric's tcp;ofi_rxm and shm report nothing when a peer process
//! dies: a read towards it simply never completes. Ranks on the same host
//! (ovbench's default launch) can do better: the hello carries the
//! sender's pid and an identifier of its host and pid namespace, and
//! `poll` asks the kernel, at most every
//! [`CHECK_EVERY`](ovbench_core::fabric::peer_watch::CHECK_EVERY), whether
//! those pids still exist
//! ([`PeerWatch`](ovbench_core::fabric::peer_watch::PeerWatch)). Peers on
//! other hosts are covered by the callers' deadlines only.

/// The watch's [`Probe`](ovbench_core::fabric::peer_watch::Probe):
/// `kill(pid, 0)`, whose error (`ESRCH`) says no such process.
pub(crate) fn signal_zero(pid: libc::pid_t) -> std::io::Result<()> {
    // No signal: only existence and permission are checked.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).map_err(std::io::Error::from)
}
