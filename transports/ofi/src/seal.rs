//! ovbench's envelope around a libfabric MR key.
//!
//! A libfabric key is a bare 64-bit number. tcp;ofi_rxm checks it at the
//! target, but shm in 1.17 never answers an access through a wrong or
//! dropped key, so the initiator would wait forever. The envelope carries
//! the key, the base address and length of the registration, a
//! registration serial number and a checksum over everything; [`KeySeal::unseal`]
//! checks all of them before anything is posted. The checksum (FNV-1a)
//! catches corruption, truncation and mix-ups; it is not an authenticator.

pub(crate) use ovbench_core::fabric::seal::sum_of;
use ovbench_core::fabric::seal::KeySeal;

/// libfabric's envelope: every key this crate seals starts with `OVFK`.
pub(crate) const SEAL: KeySeal = KeySeal {
    magic: *b"OVFK",
    library: "libfabric",
};
