//! The stall watchdog over the bootstrap connection. A rank's wait loops
//! call `ovbench_core::watch::waiting`; with a [`BootstrapWatch`]
//! installed, a wait that lasts a quarter of `--timeout` sends a
//! [`Request::Stall`] over the rank's open bootstrap connection, and the
//! service (in the launcher, or in rank 0 under srun/mpirun) prints which
//! rank is stuck, where and on whom ([`print_stall`]) while the deadline
//! still runs. The same wait loops see the connection close — the
//! launcher or the rank hosting the service is gone — and stop the rank.
//! Ranks that exchange through PMIx or PMI-2 have no such connection:
//! [`StderrWatch`] prints their stall themselves (mpirun and srun forward
//! it).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};
use ovbench_core::watch::{Observer, Stall};

use crate::wire::Request;

/// A rank's watchdog on its bootstrap connection.
pub struct BootstrapWatch {
    /// A second handle on the rank's connection (same socket).
    stream: TcpStream,
    addr: SocketAddr,
    rank: u32,
    /// Held by the client for each request, so a report never lands in
    /// the middle of one.
    io: Arc<Mutex<()>>,
}

impl BootstrapWatch {
    pub(crate) fn new(
        stream: TcpStream,
        addr: SocketAddr,
        rank: u32,
        io: Arc<Mutex<()>>,
    ) -> BootstrapWatch {
        BootstrapWatch {
            stream,
            addr,
            rank,
            io,
        }
    }
}

impl Observer for BootstrapWatch {
    fn alive(&self) -> Result<(), String> {
        // A peek that does not block: end of stream means the service
        // closed its end (its process is gone); queued bytes (a reply the
        // client will read) stay where they are.
        let mut byte = [0u8; 1];
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        match recv(self.stream.as_raw_fd(), &mut byte, flags) {
            Ok(0) | Err(Errno::ECONNRESET | Errno::EPIPE) => Err(format!(
                "rank {}: the bootstrap service at {} closed this rank's connection: the launcher (or the rank hosting the service) is gone; this rank stops",
                self.rank, self.addr
            )),
            _ => Ok(()),
        }
    }

    fn stalled(&self, s: &Stall<'_>) {
        let Ok(_held) = self.io.try_lock() else {
            return;
        };
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let req = Request::Stall {
            waited_ms: ms(s.waited),
            timeout_ms: ms(s.timeout),
            peer: s.peer,
            text: stall_text(s),
        };
        let body = req.encode();
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        if (&self.stream).write_all(&frame).is_err() {
            // The service is gone; alive() says so at the next look.
            StderrWatch { rank: self.rank }.stalled(s);
        }
    }
}

/// The watchdog of a rank with no bootstrap connection: it prints its
/// own stall line.
pub struct StderrWatch {
    pub rank: u32,
}

impl Observer for StderrWatch {
    fn alive(&self) -> Result<(), String> {
        Ok(())
    }

    fn stalled(&self, s: &Stall<'_>) {
        print_stall(self.rank, s.waited, s.timeout, s.peer, &stall_text(s));
    }
}

/// "phase: operation" (the phase may be empty before any is set).
fn stall_text(s: &Stall<'_>) -> String {
    if s.phase.is_empty() {
        s.what.to_string()
    } else {
        format!("{}: {}", s.phase, s.what)
    }
}

/// The one line that tells the user a rank is stuck.
pub(crate) fn stall_line(
    rank: u32,
    waited: Duration,
    timeout: Duration,
    peer: Option<u32>,
    text: &str,
) -> String {
    let on = peer.map_or_else(String::new, |p| format!(" on rank {p}"));
    format!(
        "ovbench: watchdog: rank {rank} stuck{on} for {:.1} s (the job ends at --timeout {:.0} s): {text}",
        waited.as_secs_f64(),
        timeout.as_secs_f64()
    )
}

/// Prints [`stall_line`] on stderr; never panics when stderr is gone.
pub(crate) fn print_stall(
    rank: u32,
    waited: Duration,
    timeout: Duration,
    peer: Option<u32>,
    text: &str,
) {
    let line = stall_line(rank, waited, timeout, peer, text);
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_rank_peer_phase_and_deadline() {
        let l = stall_line(
            1,
            Duration::from_millis(2600),
            Duration::from_secs(10),
            Some(0),
            "latency, 8 B, measuring: rank 1: receive of 8 bytes from rank 0",
        );
        assert_eq!(l, "ovbench: watchdog: rank 1 stuck on rank 0 for 2.6 s (the job ends at --timeout 10 s): latency, 8 B, measuring: rank 1: receive of 8 bytes from rank 0");
    }
}
