//! Noticing a peer process that died without a goodbye (SIGKILL, crash).
//!
//! Shared-memory paths of UCX and libfabric report nothing when a peer
//! process dies: an operation towards it simply never completes. Ranks on
//! the same host (ovbench's default launch) can do better: each rank sends
//! its [`identity`] (pid plus an identifier of its host and pid namespace)
//! while connecting, and a [`PeerWatch`] asks the kernel, at most every
//! [`CHECK_EVERY`], whether those pids still exist. Peers on other hosts
//! are covered by the callers' deadlines only.
//!
//! The kernel question itself (`kill(pid, 0)`) is the fabric crate's
//! [`Probe`]: it is a raw libc call, so it stays in the fabric crate's safe layer.

use std::time::{Duration, Instant};

use super::fnv1a;
use crate::{Completion, OpKind, Rank};

/// How often a [`PeerWatch`] checks peer processes.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Calls of [`PeerWatch::check`] between two reads of the clock: a busy
/// poll loop calls it millions of times a second and reading the clock
/// each time costs several percent of a small-message round trip. A
/// blocking wait calls [`PeerWatch::soon`] so slow polls still check in
/// time.
pub const POLLS_PER_CLOCK: u32 = 1024;

/// Bytes of an [`identity`]: the pid (4, little-endian) then the host and
/// pid-namespace identity (8, little-endian).
pub const IDENTITY_LEN: usize = 12;

/// Signal 0 to a process: `Ok` when it exists (or cannot be signalled),
/// the OS error otherwise (`ESRCH`: no such process).
pub type Probe = fn(libc::pid_t) -> std::io::Result<()>;

/// This process's pid and the identity of its host and pid namespace
/// (boot id and pid-namespace inode): equal identities mean a pid names
/// the same process on both sides.
pub fn me() -> (u32, u64) {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    (
        std::process::id(),
        fnv1a([boot.trim().as_bytes(), ns.as_bytes()]),
    )
}

/// [`me`] as the bytes a rank sends its peers.
pub fn identity() -> [u8; IDENTITY_LEN] {
    let (pid, ns) = me();
    let mut b = [0; IDENTITY_LEN];
    b[..4].copy_from_slice(&pid.to_le_bytes());
    b[4..].copy_from_slice(&ns.to_le_bytes());
    b
}

/// Whether process `pid` is gone: `probe` says no such process, or it is
/// a zombie its parent (the launcher) has not reaped yet.
pub fn is_dead(pid: u32, probe: Probe) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if let Err(e) = probe(p) {
        return e.raw_os_error() == Some(libc::ESRCH);
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

/// The same-host peer processes of one transport and when they were last
/// checked.
#[derive(Debug)]
pub struct PeerWatch {
    pids: Vec<Option<u32>>,
    last: Instant,
    /// Calls of `check` left before the clock is read again.
    skip: u32,
    probe: Probe,
}

impl PeerWatch {
    /// Watch nobody yet among `size` ranks; `probe` asks the kernel.
    pub fn new(size: u32, probe: Probe) -> PeerWatch {
        PeerWatch {
            pids: vec![None; size as usize],
            last: Instant::now(),
            skip: 0,
            probe,
        }
    }

    /// `peer` sent `identity` (the bytes of [`identity`], possibly
    /// followed by more): watch its pid if it runs on this host and pid
    /// namespace and is not this process. Too few bytes: not watched.
    pub fn note(&mut self, peer: Rank, identity: &[u8]) {
        let (Some(pid), Some(ns)) = (identity.get(..4), identity.get(4..IDENTITY_LEN)) else {
            return;
        };
        let pid = u32::from_le_bytes(pid.try_into().expect("4 bytes"));
        let ns = u64::from_le_bytes(ns.try_into().expect("8 bytes"));
        let (me_pid, me_ns) = me();
        if ns == me_ns && pid != me_pid {
            if let Some(p) = self.pids.get_mut(peer as usize) {
                *p = Some(pid);
            }
        }
    }

    /// The caller is about to sleep (or just did): let the next `check`
    /// read the clock rather than wait out [`POLLS_PER_CLOCK`] calls.
    pub fn soon(&mut self) {
        self.skip = 0;
    }

    /// At most every [`CHECK_EVERY`] (the clock is read every
    /// [`POLLS_PER_CLOCK`] calls, or on the first call after
    /// [`soon`](Self::soon)): a watched peer not yet `gone` whose process
    /// has died is marked gone and reported once, naming it.
    #[inline]
    pub fn check(&mut self, gone: &mut [bool], report: impl FnMut(Completion)) {
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.skip = POLLS_PER_CLOCK - 1;
        self.check_now(gone, report);
    }

    #[inline(never)]
    fn check_now(&mut self, gone: &mut [bool], mut report: impl FnMut(Completion)) {
        if self.last.elapsed() < CHECK_EVERY {
            return;
        }
        self.last = Instant::now();
        for (peer, pid) in self.pids.iter().enumerate() {
            let Some(pid) = *pid else {
                continue;
            };
            if !gone[peer] && is_dead(pid, self.probe) {
                gone[peer] = true;
                report(Completion::Error {
                    ctx: None,
                    peer: peer as Rank,
                    op: OpKind::Connect,
                    status: format!(
                        "rank {peer} (pid {pid}) died without closing its transport; its operations will never complete"
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe without a libc call: `/proc/<pid>` exists.
    fn proc_probe(p: libc::pid_t) -> std::io::Result<()> {
        if std::path::Path::new(&format!("/proc/{p}")).exists() {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(libc::ESRCH))
        }
    }

    #[test]
    fn dead_and_zombie_children_are_dead_and_we_are_alive() {
        assert!(!is_dead(std::process::id(), proc_probe));
        let mut c = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = c.id();
        // Not reaped yet: a zombie once it exited.
        let end = Instant::now() + Duration::from_secs(10);
        while !is_dead(pid, proc_probe) {
            assert!(Instant::now() < end, "an exited child never looked dead");
            std::thread::sleep(Duration::from_millis(5));
        }
        c.wait().expect("wait");
        assert!(is_dead(pid, proc_probe));
        assert_eq!(me().1, me().1);
    }

    /// Our own identity with the pid of a child that has exited and been
    /// reaped: a same-host peer that is gone.
    fn dead_child_identity() -> [u8; IDENTITY_LEN] {
        let mut c = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let mut id = identity();
        id[..4].copy_from_slice(&c.id().to_le_bytes());
        c.wait().expect("wait");
        id
    }

    #[test]
    fn a_dead_same_host_peer_is_reported_once() {
        let id = dead_child_identity();
        let mut w = PeerWatch::new(3, proc_probe);
        w.note(1, &id);
        w.note(2, &identity()); // ourselves: not watched
        w.note(0, &id[..8]); // too short: not watched
        let mut gone = vec![false; 3];
        let mut got = Vec::new();
        w.last -= CHECK_EVERY;
        w.check(&mut gone, |c| got.push(c));
        assert_eq!(gone, [false, true, false]);
        assert!(matches!(&got[..], [Completion::Error { peer: 1, .. }]));
        w.last -= CHECK_EVERY;
        w.soon();
        w.check(&mut gone, |c| got.push(c));
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn the_clock_is_read_every_polls_per_clock_calls_or_after_soon() {
        let id = dead_child_identity();
        let mut w = PeerWatch::new(2, proc_probe);
        w.note(1, &id);
        let mut gone = vec![false; 2];
        w.check(&mut gone, |_| {}); // reads the clock: too early
        w.last -= CHECK_EVERY;
        for _ in 1..POLLS_PER_CLOCK {
            w.check(&mut gone, |_| {});
        }
        assert_eq!(gone, [false, false], "checked between clock reads");
        w.check(&mut gone, |_| {});
        assert_eq!(gone, [false, true]);
        let mut w = PeerWatch::new(2, proc_probe);
        w.note(1, &id);
        let mut gone = vec![false; 2];
        w.check(&mut gone, |_| {});
        w.last -= CHECK_EVERY;
        w.soon();
        w.check(&mut gone, |_| {});
        assert_eq!(gone, [false, true]);
    }
}
