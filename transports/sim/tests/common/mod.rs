//! Helpers for driving the bare transport from rank closures.

#![allow(dead_code)]

use ovbench_core::{Completion, LocalSlice, MrHandle, Msg, RemoteKey, Transport};
use ovbench_sim::{run_raw, RankKit, SimParams};

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

/// Two ranks under the default parameters, each with a registered region
/// of `len` bytes: rank 1 sends its key to rank 0, then runs `target`;
/// rank 0 runs `initiator` with its own region and rank 1's key. Rank 0's
/// result.
pub fn with_peer_key<R: Send + Default>(
    len: usize,
    target: impl Fn(&mut RankKit, LocalSlice) + Sync,
    initiator: impl Fn(&mut RankKit, LocalSlice, MrHandle, RemoteKey) -> R + Sync,
) -> R {
    let (res, _) = run_raw(2, &SimParams::default(), |mut k| {
        let (s, mr, key) = registered(&mut k.transport, len);
        if k.rank == 1 {
            send_key(&mut k.transport, 0, &key);
            target(&mut k, s);
            R::default()
        } else {
            let key = recv_key(&mut k.transport);
            initiator(&mut k, s, mr, key)
        }
    })
    .unwrap();
    res.into_iter().next().unwrap()
}

/// Picoseconds of `ns` nanoseconds (closed forms read better in ns).
pub const fn ns(n: u64) -> u64 {
    n * 1000
}
