//! Helpers for driving the bare transport from rank closures.

#![allow(dead_code)]

use ovbench_core::{Completion, Transport};

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

/// Picoseconds of `ns` nanoseconds (closed forms read better in ns).
pub const fn ns(n: u64) -> u64 {
    n * 1000
}
