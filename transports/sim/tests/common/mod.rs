//! Helpers for driving the bare transport from rank closures.

#![allow(dead_code)]

use ovbench_core::{Completion, LocalSlice, MrHandle, Msg, RemoteKey, Transport};

/// Poll until a completion matching `pick` arrives; other completions are
/// dropped. Returns the matched value.
pub fn wait_for<T>(
    t: &mut dyn Transport,
    mut pick: impl FnMut(Completion) -> Option<T>,
) -> Result<T, String> {
    let mut out = Vec::new();
    loop {
        out.clear();
        t.poll(&mut out, None).map_err(|e| e.to_string())?;
        for c in out.drain(..) {
            if let Some(v) = pick(c) {
                return Ok(v);
            }
        }
    }
}

/// Wait for a two-sided message; returns (peer, bytes).
pub fn recv(t: &mut dyn Transport) -> Result<(u32, Vec<u8>), String> {
    wait_for(t, |c| match c {
        Completion::Recv { peer, data } => Some((peer, data)),
        _ => None,
    })
}

/// A fresh region of `len` bytes, registered: its slice, its handle and
/// the key a peer needs to reach it.
pub fn registered(t: &mut dyn Transport, len: usize) -> (LocalSlice, MrHandle, RemoteKey) {
    let region = t.alloc(len).unwrap();
    let s = LocalSlice::new(region, 0, len);
    let reg = t.register(s).unwrap();
    (s, reg.mr, reg.key)
}

/// Send `key` to `peer` as a two-sided message.
pub fn send_key(t: &mut dyn Transport, peer: u32, key: &RemoteKey) {
    let mut bytes = Vec::new();
    key.clone().encode(&mut bytes);
    t.post_send(peer, Msg::new(&bytes, None), 0).unwrap();
}

/// Wait for a key sent by [`send_key`].
pub fn recv_key(t: &mut dyn Transport) -> RemoteKey {
    let (_, bytes) = recv(t).unwrap();
    RemoteKey::decode(&bytes).unwrap().0
}

/// Picoseconds of `ns` nanoseconds (closed forms read better in ns).
pub const fn ns(n: u64) -> u64 {
    n * 1000
}
