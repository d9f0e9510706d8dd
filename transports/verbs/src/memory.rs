//! Page-aligned, zeroed memory owned by the transport (what regions,
//! receive rings and send slots live in), its registrations, and the
//! pointer arithmetic that hands checked slices of it to the NIC.

use ovbench_core::fabric::aligned::AlignedBuf;
use ovbench_core::fabric::regions::{Mr, Regions};
use ovbench_core::{LocalSlice, MrHandle, Registered, RemoteKey, TransportError};

use crate::error::{memlock_limit, register_failure};
use crate::pd::{Access, ProtectionDomain};
use crate::{MemoryRegion, VerbsError};

/// The user's regions and their registrations in the shared table, and
/// the bytes registered so far (rings included) for the memlock advice.
/// The table drops registrations before the memory they cover and refuses
/// to free a region one still covers: what keeps registering and posting
/// its slices sound.
#[derive(Default)]
pub(crate) struct Memory {
    /// The regions (the transport allocates and frees through it).
    pub(crate) table: Regions<AlignedBuf, MemoryRegion>,
    registered: u64,
}

impl Memory {
    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        self.table.slice(s)
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        self.table.slice_mut(s)
    }

    /// A receive ring or send-slot block of `len` bytes with its local-only
    /// registration; the peer that takes both drops the registration first.
    pub fn ring(
        &mut self,
        pd: &ProtectionDomain,
        len: usize,
    ) -> Result<(AlignedBuf, MemoryRegion), VerbsError> {
        let buf = AlignedBuf::new(len)
            .map_err(|_| VerbsError::Config(format!("cannot allocate {len} bytes")))?;
        let mr = self.register_ptr(pd, buf.as_ptr(), buf.len(), Access::Local)?;
        Ok((buf, mr))
    }

    /// Register `s` for remote read and write; its key (address, length,
    /// rkey) is built now, so handing it out later cannot fail.
    pub fn register(
        &mut self,
        pd: &ProtectionDomain,
        s: LocalSlice,
    ) -> Result<Registered, TransportError> {
        let ptr = self.table.ptr(s)?;
        let mr = self.register_ptr(pd, ptr, s.len.max(1), Access::Remote)?;
        let key = RemoteKey {
            addr: mr.addr(),
            len: s.len as u64,
            blob: mr.rkey().to_le_bytes().to_vec(),
        };
        let h = self.table.add_mr(Mr {
            handle: mr,
            slice: s,
            key: key.clone(),
        });
        Ok(Registered { mr: h, key })
    }

    fn register_ptr(
        &mut self,
        pd: &ProtectionDomain,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, VerbsError> {
        // SAFETY: every caller passes memory owned by this transport (a ring
        // handed over with its registration to the peer that drops the
        // registration first, or a region of the table, which cannot be
        // freed while registered), which outlives the returned registration.
        let mr = unsafe { pd.register(ptr, len, access) }.map_err(|e| {
            VerbsError::Register(register_failure(len, self.registered, memlock_limit(), &e))
        })?;
        self.registered += len as u64;
        Ok(mr)
    }

    /// Release registration `h` (dropping it deregisters).
    pub fn deregister(&mut self, h: MrHandle) -> Result<(), TransportError> {
        let m = self.table.take_mr(h)?;
        self.registered = self.registered.saturating_sub(m.handle.len() as u64);
        Ok(())
    }

    /// The address and lkey an RDMA operation on `local` uses, after
    /// checking `local` against its region and then registration `h`.
    pub fn rma_local(&self, h: MrHandle, local: LocalSlice) -> Result<(u64, u32), TransportError> {
        let ptr = self.table.ptr(local)?;
        let lkey = self.table.covering(h, local)?.handle.lkey();
        Ok((ptr as u64, lkey))
    }
}
