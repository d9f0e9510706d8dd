//! ovbench's envelope around UCX's packed rkey.
//!
//! `ucp_ep_rkey_unpack` takes no length and trusts its input, so a damaged
//! key from the wire must never reach it. The envelope carries the base
//! address and length of the registration, a registration serial number,
//! the packed length and a checksum over everything; [`KeySeal::unseal`] checks all
//! of them. The checksum (FNV-1a) catches corruption, truncation and
//! mix-ups; it is not an authenticator — UCX offers no target-side check
//! that one could back.

use ovbench_core::fabric::seal::KeySeal;
pub(crate) use ovbench_core::fabric::seal::{sum_of, Sealed, SEAL_LEN};

/// UCX's envelope: every key this crate seals starts with `OVUK`.
pub(crate) const SEAL: KeySeal = KeySeal {
    magic: *b"OVUK",
    library: "UCX",
};
