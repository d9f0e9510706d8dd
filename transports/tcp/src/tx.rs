//! The send path: queued frames leave with one `writev` per batch, data
//! taken straight out of registered regions (no staging copy).

use std::io::{ErrorKind, IoSlice};
use std::os::fd::AsRawFd;

use nix::sys::socket::{sendmsg, MsgFlags, SockaddrStorage};

use ovbench_core::{Completion, LocalSlice, Rank};

use crate::engine::Engine;
use crate::wire::{Header, HDR_LEN};

/// Frames gathered into one `writev`.
const BATCH: usize = 32;
/// Stand-in bytes for a region freed while its data was queued (the
/// header already promised them; the peer's request fails its check).
static ZEROS: [u8; 65536] = [0; 65536];

/// What follows a frame header.
pub enum TxData {
    None,
    /// A two-sided message, copied at post time.
    Owned(Vec<u8>),
    /// Write or read-response data, sent from the region itself.
    Region(LocalSlice),
}

/// One queued frame.
pub struct TxItem {
    hdr: [u8; HDR_LEN],
    data: TxData,
    /// Bytes of header plus data already handed to the kernel.
    sent: usize,
    /// Reported once the whole frame has left.
    pub done: Option<Completion>,
}

impl TxItem {
    pub fn new(h: Header, data: TxData, done: Option<Completion>) -> TxItem {
        TxItem {
            hdr: h.encode(),
            data,
            sent: 0,
            done,
        }
    }

    fn data_len(&self) -> usize {
        match &self.data {
            TxData::None => 0,
            TxData::Owned(v) => v.len(),
            TxData::Region(s) => s.len,
        }
    }

    fn total(&self) -> usize {
        HDR_LEN + self.data_len()
    }
}

impl Engine {
    /// Hand as much of `peer`'s queue to the kernel as it takes.
    pub fn flush(&mut self, peer: Rank) {
        let mut failure = None;
        {
            let Engine {
                peers, mem, done, ..
            } = self;
            let Some(p) = peers[peer as usize].as_mut() else {
                return;
            };
            while !p.tx.is_empty() {
                let mut iov = [IoSlice::new(&[]); 2 * BATCH];
                let mut n = 0;
                for item in p.tx.iter().take(BATCH) {
                    if item.sent < HDR_LEN {
                        iov[n] = IoSlice::new(&item.hdr[item.sent..]);
                        n += 1;
                    }
                    let off = item.sent.saturating_sub(HDR_LEN);
                    let left = item.data_len() - off;
                    if left == 0 {
                        continue;
                    }
                    let bytes: &[u8] = match &item.data {
                        TxData::None => &[],
                        TxData::Owned(v) => &v[off..],
                        TxData::Region(s) => match mem.slice(s.sub(off, left)) {
                            Ok(b) => b,
                            Err(_) => &ZEROS[..left.min(ZEROS.len())],
                        },
                    };
                    iov[n] = IoSlice::new(bytes);
                    n += 1;
                }
                // MSG_NOSIGNAL: a peer that vanished is an error, not SIGPIPE.
                let sent = sendmsg::<SockaddrStorage>(
                    p.sock.as_raw_fd(),
                    &iov[..n],
                    &[],
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(std::io::Error::from);
                match sent {
                    Ok(0) => {
                        failure = Some("the socket accepted no bytes".to_string());
                        break;
                    }
                    Ok(mut k) => {
                        while k > 0 {
                            let front = p.tx.front_mut().expect("bytes were sent from it");
                            let rem = front.total() - front.sent;
                            if k < rem {
                                front.sent += k;
                                break;
                            }
                            k -= rem;
                            let item = p.tx.pop_front().expect("non-empty");
                            if let Some(c) = item.done {
                                done.push_back(c);
                            }
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        failure = Some(format!("sending failed: {e}"));
                        break;
                    }
                }
            }
        }
        match failure {
            Some(why) => self.drop_peer(
                peer,
                format!(
                    "connection to rank {peer} broke ({why}): did rank {peer} exit or get killed?"
                ),
            ),
            None => self.update_interest(peer),
        }
    }
}
