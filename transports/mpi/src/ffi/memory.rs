//! The transport's memory: page-aligned heap blocks in core's region
//! table, each registration an attachment to the communicator's dynamic
//! window, its key the attached address as peers name it.

use ovbench_core::fabric::page_block::PageBlock;
use ovbench_core::fabric::regions::{Mr, Regions};
use ovbench_core::fabric::seal::KeySeal;
use ovbench_core::{LocalSlice, MrHandle, RemoteKey, TransportError};

/// The envelope of an MPI key: the blob carries the owner's rank, so a
/// key used towards another rank is refused before MPI sees it.
pub(crate) const SEAL: KeySeal = KeySeal {
    magic: *b"OVMk",
    library: "MPI",
};

/// One attachment: where it starts in this process (for the detach).
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) base: usize,
}

/// Regions and registrations.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pub(crate) table: Regions<PageBlock, Attached>,
    serial: u64,
}

impl Memory {
    /// The address of `s`'s first byte, after checking `s` lies in its
    /// region (the pointer is formed only here).
    pub(crate) fn ptr(&mut self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        Ok(self.table.slice_mut(s)?.as_mut_ptr())
    }

    /// Record a registration of `s` attached at `addr` (as peers name it).
    pub(crate) fn add_mr(
        &mut self,
        s: LocalSlice,
        base: usize,
        addr: u64,
        owner: u32,
    ) -> (MrHandle, RemoteKey) {
        self.serial += 1;
        let len = s.len as u64;
        let blob = SEAL.seal(addr, len, self.serial, &owner.to_le_bytes());
        let key = RemoteKey { addr, len, blob };
        let h = self.table.add_mr(Mr {
            handle: Attached { base },
            slice: s,
            key: key.clone(),
        });
        (h, key)
    }
}

/// Check a peer's key: its envelope, that it is `peer`'s, and that
/// `offset..offset+n` lies inside it; the target address.
pub(crate) fn target(key: &RemoteKey, peer: u32, offset: u64, n: u64) -> Result<u64, String> {
    let sealed = SEAL.unseal(key)?;
    if sealed.packed != peer.to_le_bytes() {
        return Err(format!(
            "the key belongs to another rank, not to rank {peer}"
        ));
    }
    key.check_range(offset, n)?;
    Ok(key.addr + offset)
}
