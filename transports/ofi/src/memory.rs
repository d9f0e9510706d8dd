//! Transport-owned memory and its libfabric registrations (`fi_mr_reg`).
//!
//! Providers whose `mr_mode` lacks `FI_MR_PROV_KEY` (tcp, sockets, shm in
//! 1.17) take the key from the caller, and two live registrations may not
//! share one (the second gets `-FI_ENOKEY`, -266): every registration asks
//! for its own key from a counter. With `FI_MR_VIRT_ADDR` a peer addresses
//! the region by virtual address, otherwise by offset from its start.
//!
//! Teardown: [`Memory`] closes its registrations before it frees the
//! regions they cover (its `Drop`; the last registration closes the
//! domain); the transport drops it right after the endpoint, queue and
//! address vector have closed.

use ovbench_core::fabric::aligned::AlignedBuf;
use ovbench_core::fabric::regions::{self, Regions};
use ovbench_core::{LocalSlice, MrHandle, OpKind, RemoteKey, TransportError};
use ovbench_ofi_sys as sys;

use crate::error::local;
use crate::fi::mr::Desc;
use crate::fi::{Domain, MemoryRegion};
use crate::seal::SEAL;

/// A checked range of one of this transport's regions, for a post to
/// read or write (with its registration's descriptor, for RMA). Only
/// [`Memory`] makes one. The region stays allocated until the user frees
/// it, which the transport contract forbids while an operation on it is in
/// flight, or until the transport drops, after its endpoint has closed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalBuf {
    ptr: *mut u8,
    len: usize,
    desc: Desc,
}

// SAFETY: an address and a length; the memory belongs to the transport
// that made it and moves with it.
unsafe impl Send for LocalBuf {}

impl LocalBuf {
    #[inline]
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline]
    pub fn desc(&self) -> Desc {
        self.desc
    }
}

/// A live `fi_mr_reg` of a slice, with its sealed key.
pub(crate) type Mr = regions::Mr<MemoryRegion>;

/// All regions and registrations of one transport.
pub(crate) struct Memory {
    /// The regions (the transport allocates and frees through it).
    pub(crate) table: Regions<AlignedBuf, MemoryRegion>,
    next_key: u64,
    /// Serial number of the next registration, sealed into its key.
    serial: u64,
    prov_key: bool,
    pub virt_addr: bool,
}

impl Drop for Memory {
    fn drop(&mut self) {
        // Registrations first, while the memory they cover is mapped.
        self.table.take_all_mrs().for_each(drop);
    }
}

impl Memory {
    pub fn new(mr_mode: u32) -> Memory {
        Memory {
            table: Regions::default(),
            next_key: 1,
            serial: 0,
            prov_key: mr_mode & sys::FI_MR_PROV_KEY != 0,
            virt_addr: mr_mode & sys::FI_MR_VIRT_ADDR != 0,
        }
    }

    /// `s` for a two-sided post (no registration needed).
    #[inline]
    pub fn buf(&self, s: LocalSlice) -> Result<LocalBuf, TransportError> {
        Ok(LocalBuf {
            ptr: self.table.ptr(s)?,
            len: s.len,
            desc: Desc::NONE,
        })
    }

    #[inline]
    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        let p = self.table.ptr(s)?;
        // SAFETY: ptr() checked the range; the region lives as long as &self.
        Ok(unsafe { std::slice::from_raw_parts(p, s.len) })
    }

    #[inline]
    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        let p = self.table.ptr(s)?;
        // SAFETY: as in slice(); &mut self excludes other Rust borrows.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, s.len) })
    }

    pub fn register(&mut self, domain: &Domain, s: LocalSlice) -> Result<MrHandle, TransportError> {
        let p = self.table.ptr(s)?;
        let requested = if self.prov_key { 0 } else { self.next_key };
        // SAFETY: the range lies inside a live region, which the table
        // refuses to free while a registration covers it, and which Drop
        // frees only after closing every registration.
        let mr = unsafe { MemoryRegion::register(domain, p, s.len.max(1), requested) }.map_err(
            |rc| {
                local(
                    OpKind::Register,
                    &format!("fi_mr_reg of {} bytes (requested key {requested})", s.len),
                    i64::from(rc),
                    "; raise the locked-memory limit (ulimit -l) if the provider pins memory",
                )
            },
        )?;
        self.next_key += 1;
        self.serial += 1;
        let key = mr.key();
        Ok(self.table.add_mr(Mr {
            handle: mr,
            slice: s,
            key: SEAL.key(p as u64, s.len as u64, self.serial, &key.to_le_bytes()),
        }))
    }

    pub fn mr(&self, h: MrHandle) -> Result<&Mr, TransportError> {
        self.table.mr(h)
    }

    pub fn deregister(&mut self, h: MrHandle) -> Result<(), TransportError> {
        let rc = self.table.take_mr(h)?.handle.close();
        crate::error::check(OpKind::Register, "fi_close(mr)", rc)
    }

    /// `local` for an RMA post, after checking it lies inside
    /// registration `h`.
    #[inline]
    pub fn local_rma(&self, h: MrHandle, local: LocalSlice) -> Result<LocalBuf, TransportError> {
        let m = self.table.covering(h, local)?;
        Ok(LocalBuf {
            ptr: self.table.ptr(local)?,
            len: local.len,
            desc: m.handle.desc(),
        })
    }
}
/// A checked peer key: its checksum (for revocations), the MR key and the
/// remote address of `[offset, offset+len)`. Nothing from the wire is
/// trusted: envelope, range and length are all checked.
pub(crate) struct Target {
    pub sum: u64,
    pub key: u64,
    pub addr: u64,
}

pub(crate) fn remote_target(
    peer: u32,
    key: &RemoteKey,
    offset: u64,
    len: usize,
    virt_addr: bool,
) -> Result<Target, TransportError> {
    let sealed = SEAL
        .unseal(key)
        .map_err(|detail| TransportError::BadKey { peer, detail })?;
    let raw: [u8; 8] = sealed
        .packed
        .try_into()
        .map_err(|_| TransportError::BadKey {
            peer,
            detail: format!("libfabric key of {} bytes (must be 8)", sealed.packed.len()),
        })?;
    key.check_range(offset, len as u64)
        .map_err(|detail| TransportError::BadKey { peer, detail })?;
    let addr = if virt_addr { key.addr + offset } else { offset };
    Ok(Target {
        sum: sealed.sum,
        key: u64::from_le_bytes(raw),
        addr,
    })
}
