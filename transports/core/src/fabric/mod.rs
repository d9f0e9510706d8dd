//! Transport-independent run-time pieces shared by the fabric crates:
//! the sealed-key envelope ([`seal`]), the same-host peer-process watch
//! ([`peer_watch`]), the region/registration tables ([`regions`]) with
//! their safe page-aligned heap block ([`page_block`]), the raw one the
//! pinning fabrics hand to their libraries by address ([`aligned`]), and check-word
//! remote keys ([`check_word`]), the progress thread
//! ([`progress_thread`]), the first checks on peers ([`peers`]), the
//! native tagged paths' 64-bit tag ([`wire_tag`]), and the watchdog that
//! ends a blocking library call stuck past its deadline ([`watchdog`]).
//! All safe code but [`aligned`]'s allocation; what
//! touches raw memory or the libraries stays in the fabric crate. The test and bench harnesses
//! (pair, processes, pingpong, comm_cost) live in `ovbench-conformance`.

pub mod aligned;
pub mod check_word;
pub mod page_block;
pub mod peer_watch;
pub mod peers;
pub mod progress_thread;
pub mod regions;
pub mod seal;
pub mod watchdog;
pub mod wire_tag;

/// FNV-1a over the concatenation of `parts` (a checksum, not an
/// authenticator).
fn fnv1a<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.into_iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
