//! `poll` with arrivals on UCX: the caller's taker is lent to the active-message
//! callback for the length of one poll (`Worker::lending`), so an in-order
//! message goes from UCX's receive buffer straight to the protocol engine,
//! and its payload straight to the user's buffer, with no owned copy and
//! no queue. This is the placement half: where a taker's answer lands.

use ovbench_core::{Placement, TransportError};

use crate::ffi::memory::Memory;

/// Copy `data[p.src_start..][..p.dst.len]` to `p.dst`, both checked.
#[inline]
pub(crate) fn place(mem: &Memory, p: &Placement, data: &[u8]) -> Result<(), TransportError> {
    let src = p
        .src_start
        .checked_add(p.dst.len)
        .and_then(|end| data.get(p.src_start..end))
        .ok_or_else(|| {
            TransportError::Invalid(format!(
                "a placement of {} bytes from offset {} of a {}-byte message",
                p.dst.len,
                p.src_start,
                data.len()
            ))
        })?;
    mem.place(p.dst, src)
}
