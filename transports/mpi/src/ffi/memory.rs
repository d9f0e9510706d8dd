//! The transport's memory: page-aligned heap blocks in core's region
//! table. A registration is an attachment to the communicator's dynamic
//! window; its key is the slice's address as peers name it.
//!
//! An attachment covers a whole region and is shared by every
//! registration in it: Open MPI 4.1's osc rdma looks a target address up
//! in the first attached range starting below it, so overlapping
//! attachments (a registration cache's 64 KiB and 1 MiB slices of one
//! buffer) made its writes fail with MPI_ERR_RMA_RANGE.
//!
//! Deregistering revokes the key at every peer by a control message:
//! MPICH and Open MPI's osc pt2pt check a target address against nothing,
//! so a write through a dropped key would land. A peer refuses a revoked
//! key at the post; an access racing the revocation is performed.

use ovbench_core::fabric::page_block::PageBlock;
use ovbench_core::fabric::regions::{Mr, Regions};
use ovbench_core::fabric::seal::{sum_of, KeySeal};
use ovbench_core::{LocalSlice, MrHandle, RegionId, RemoteKey, TransportError};

/// The envelope of an MPI key: the blob carries the owner's rank, so a
/// key used towards another rank is refused before MPI sees it.
pub(crate) const SEAL: KeySeal = KeySeal {
    magic: *b"OVMk",
    library: "MPI",
};

/// A registration's region (the attachment is the region's).
#[derive(Debug)]
pub(crate) struct Attached {
    region: RegionId,
}

/// An attached region.
#[derive(Debug)]
struct Attachment {
    region: RegionId,
    /// Registrations in it.
    users: usize,
    /// Its start in this process (for the detach).
    base: usize,
    /// Its start as peers name it (`MPI_Get_address`).
    addr: u64,
}

/// Regions, registrations and attachments.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pub(crate) table: Regions<PageBlock, Attached>,
    attached: Vec<Attachment>,
    serial: u64,
}

impl Memory {
    /// The address of `s`'s first byte, after checking `s` lies in its
    /// region (the pointer is formed only here).
    pub(crate) fn ptr(&mut self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        Ok(self.table.slice_mut(s)?.as_mut_ptr())
    }

    /// The whole region `s` lies in when no registration has attached it
    /// yet (it is then to be attached), else `None`.
    pub(crate) fn unattached_region(
        &mut self,
        s: LocalSlice,
    ) -> Result<Option<LocalSlice>, TransportError> {
        self.table.slice(s)?;
        if self.attached.iter().any(|a| a.region == s.region) {
            return Ok(None);
        }
        let len = self.table.holding(LocalSlice::new(s.region, 0, 0))?.len();
        Ok(Some(LocalSlice::new(s.region, 0, len.max(1))))
    }

    /// Record a registration of `s` by `owner`; `new` is its region's
    /// fresh attachment (start here, address for peers), if it made one.
    pub(crate) fn add_mr(
        &mut self,
        s: LocalSlice,
        new: Option<(usize, u64)>,
        owner: u32,
    ) -> Result<(MrHandle, RemoteKey), TransportError> {
        if let Some((base, addr)) = new {
            self.attached.push(Attachment {
                region: s.region,
                users: 0,
                base,
                addr,
            });
        }
        let a = self
            .attached
            .iter_mut()
            .find(|a| a.region == s.region)
            .ok_or_else(|| {
                TransportError::Invalid("a registration in an unattached region".into())
            })?;
        a.users += 1;
        let addr = a.addr + s.offset as u64;
        self.serial += 1;
        let key = SEAL.key(addr, s.len as u64, self.serial, &owner.to_le_bytes());
        let h = self.table.add_mr(Mr {
            handle: Attached { region: s.region },
            slice: s,
            key: key.clone(),
        });
        Ok((h, key))
    }

    /// Drop registration `mr`: its key's checksum (which names it to
    /// peers, for the revocation) and, where it was its region's last
    /// registration, the region's start, to detach.
    pub(crate) fn remove_mr(
        &mut self,
        mr: MrHandle,
    ) -> Result<(u64, Option<usize>), TransportError> {
        let m = self.table.take_mr(mr)?;
        let sum = sum_of(&m.key.blob);
        let Some(i) = self
            .attached
            .iter()
            .position(|a| a.region == m.handle.region)
        else {
            return Ok((sum, None));
        };
        self.attached[i].users -= 1;
        if self.attached[i].users > 0 {
            return Ok((sum, None));
        }
        Ok((sum, Some(self.attached.swap_remove(i).base)))
    }
}

/// The control message that revokes a key: [`REVOKE_MAGIC`] then the
/// key's checksum. Engine messages begin with the protocol's magic
/// (`VO`), never with this.
pub(crate) const REVOKE_MAGIC: &[u8; 8] = b"OVMRevok";

/// The revocation of the key whose checksum is `sum`.
pub(crate) fn revocation(sum: u64) -> Vec<u8> {
    let mut m = REVOKE_MAGIC.to_vec();
    m.extend_from_slice(&sum.to_le_bytes());
    m
}

/// The checksum a control message revokes, if it is a revocation.
pub(crate) fn revoked_by(msg: &[u8]) -> Option<u64> {
    if msg.len() == 16 && msg[..8] == REVOKE_MAGIC[..] {
        Some(u64::from_le_bytes(msg[8..].try_into().ok()?))
    } else {
        None
    }
}

/// Check a peer's key: its envelope, that it is `peer`'s and not revoked
/// (`revoked` holds `(owner, checksum)` of the keys dropped), and that
/// `offset..offset+n` lies inside it; the target address.
pub(crate) fn target(
    key: &RemoteKey,
    peer: u32,
    offset: u64,
    n: u64,
    revoked: &std::collections::HashSet<(u32, u64)>,
) -> Result<u64, String> {
    let sealed = SEAL.unseal(key)?;
    if sealed.packed != peer.to_le_bytes() {
        return Err(format!(
            "the key belongs to another rank, not to rank {peer}"
        ));
    }
    if revoked.contains(&(peer, sealed.sum)) {
        return Err(format!(
            "rank {peer} deregistered that memory (its key was revoked)"
        ));
    }
    key.check_range(offset, n)?;
    Ok(key.addr + offset)
}
