//! Page-aligned, zeroed memory owned by the transport (what regions,
//! receive rings and send slots live in), its registrations, and the
//! pointer arithmetic that hands checked slices of it to the NIC.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use ovbench_core::fabric::regions::{self, Bytes, Mr, Regions, Zeroed};
use ovbench_core::{LocalSlice, MrHandle, Registered, RemoteKey, TransportError};

use crate::error::{memlock_limit, register_failure};
use crate::pd::{Access, ProtectionDomain};
use crate::{MemoryRegion, VerbsError};

/// A page-aligned, zero-initialised heap block.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the block is plain memory exclusively owned by this value;
// moving it to another thread moves that ownership.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Allocate `len` zeroed bytes (at least one page is reserved so a
    /// zero-length buffer still has a valid address to register).
    pub fn new(len: usize) -> Result<AlignedBuf, TransportError> {
        let layout = regions::page_layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| regions::out_of_memory(len))?;
        Ok(AlignedBuf { ptr, len, layout })
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Zeroed for AlignedBuf {
    fn zeroed(len: usize) -> Result<AlignedBuf, TransportError> {
        AlignedBuf::new(len)
    }
}

/// Safe code reaches a region's bytes through the shared table's checked
/// slices.
impl Bytes for AlignedBuf {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

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

    /// Pointer to the start of `s`, after checking it lies in its region.
    fn ptr(&self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        let buf = self.table.holding(s)?;
        // SAFETY: offset + len is within the buffer (checked by holding).
        Ok(unsafe { buf.as_ptr().add(s.offset) })
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
        let ptr = self.ptr(s)?;
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
        let ptr = self.ptr(local)?;
        let lkey = self.table.covering(h, local)?.handle.lkey();
        Ok((ptr as u64, lkey))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovbench_core::fabric::regions::PAGE;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new(10_000).unwrap();
        assert_eq!(b.as_ptr() as usize % PAGE, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
        assert_eq!(AlignedBuf::new(0).unwrap().len(), 0);
    }

    // Registration needs a device (the soft-RoCE VM); the table's checked
    // slices do not.
    #[test]
    fn regions_slice_through_the_table() {
        let mut m = Memory::default();
        let r = m.table.alloc(100).unwrap();
        m.slice_mut(LocalSlice::new(r, 98, 2))
            .unwrap()
            .copy_from_slice(&[1, 2]);
        assert_eq!(m.slice(LocalSlice::new(r, 97, 3)).unwrap(), &[0, 1, 2]);
        assert!(m.slice(LocalSlice::new(r, 99, 2)).is_err());
        let p = m.ptr(LocalSlice::new(r, 4, 0)).unwrap();
        assert_eq!(p as usize % PAGE, 4);
        m.table.free(r).unwrap();
        assert!(m.table.free(r).is_err());
    }
}
