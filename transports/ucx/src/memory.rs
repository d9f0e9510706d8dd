//! Transport-owned memory, its UCX mappings (`ucp_mem_map`), packed
//! remote keys (`ucp_rkey_pack`) and the cache of unpacked peer keys.

use std::alloc::{self, Layout};
use std::collections::HashMap;
use std::ptr::{self, NonNull};

use ovbench_core::fabric::regions::{self, Regions};
use ovbench_core::{
    LocalSlice, MrHandle, OpKind, Rank, RegionId, RemoteKey, TransportError, MAX_KEY_BLOB,
};
use ovbench_ucx_sys as sys;

use crate::seal::{Sealed, SEAL, SEAL_LEN};
use crate::status::local;

/// Unpacked peer keys kept before the cache is emptied (protocols that
/// register per fragment would otherwise grow it without bound).
const RKEY_CACHE_MAX: usize = 1024;

/// A zeroed, page-aligned allocation.
pub(crate) struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Region {
    fn new(len: usize) -> Result<Region, TransportError> {
        let layout = regions::page_layout(len)?;
        // SAFETY: layout has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| regions::out_of_memory(len))?;
        Ok(Region { ptr, layout })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A live `ucp_mem_map` of a slice, with its sealed packed key.
pub(crate) type Mr = regions::Mr<sys::ucp_mem_h>;

/// All regions, registrations and unpacked peer keys of one transport.
#[derive(Default)]
pub(crate) struct Memory {
    table: Regions<Region, sys::ucp_mem_h>,
    /// Per peer: packed blob → unpacked key.
    rkeys: HashMap<Rank, HashMap<u64, sys::ucp_rkey_h>>,
    /// Serial number of the next registration (part of its sealed key, so
    /// a re-registration of the same memory gets a key of its own).
    serial: u64,
    rkey_count: usize,
}

impl Memory {
    pub fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        Ok(self.table.add(Region::new(len)?, len))
    }

    pub fn free(&mut self, id: RegionId) -> Result<(), TransportError> {
        self.table.free(id)
    }

    /// Pointer to the start of `s`, after checking it lies in its region.
    /// Inlined: on the native path's every send and receive, the slice
    /// passed through memory stalled store forwarding (`perf annotate`).
    #[inline]
    pub fn ptr(&self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        let r = self.table.holding(s)?;
        // SAFETY: offset is within the allocation (checked by holding).
        Ok(unsafe { r.ptr.as_ptr().add(s.offset) })
    }

    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        let p = self.ptr(s)?;
        // SAFETY: ptr() checked the range; the region lives as long as &self.
        // Peers may write into registered memory concurrently (RDMA), which
        // is the nature of the contract: readers see bytes, never UB in Rust
        // terms beyond what a volatile device write is.
        Ok(unsafe { std::slice::from_raw_parts(p, s.len) })
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        let p = self.ptr(s)?;
        // SAFETY: as in slice(), and &mut self excludes other Rust borrows.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, s.len) })
    }

    /// `ucp_mem_map` the slice and pack its remote key.
    pub fn register(
        &mut self,
        ctx: sys::ucp_context_h,
        s: LocalSlice,
    ) -> Result<MrHandle, TransportError> {
        let p = self.ptr(s)?;
        let params = sys::ucp_mem_map_params_t {
            field_mask: (sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH)
                as u64,
            address: p.cast(),
            length: s.len.max(1),
            ..Default::default()
        };
        let mut memh: sys::ucp_mem_h = ptr::null_mut();
        // SAFETY: ctx is live; the address range lies inside a live region.
        let st = unsafe { sys::ucp_mem_map(ctx, &params, &mut memh) };
        if st != sys::UCS_OK {
            return Err(local(
                OpKind::Register,
                &format!("ucp_mem_map of {} bytes", s.len),
                st,
                "; raise the locked-memory limit (ulimit -l) if the transport pins memory",
            ));
        }
        let mut buf: *mut libc::c_void = ptr::null_mut();
        let mut blen = 0usize;
        // SAFETY: memh was just mapped on ctx; buf/blen receive a UCX buffer.
        let st = unsafe { sys::ucp_rkey_pack(ctx, memh, &mut buf, &mut blen) };
        if st != sys::UCS_OK {
            // SAFETY: memh is live and unmapped once here.
            unsafe { sys::ucp_mem_unmap(ctx, memh) };
            return Err(local(OpKind::Register, "ucp_rkey_pack", st, ""));
        }
        // SAFETY: UCX returned blen readable bytes at buf.
        let blob = unsafe { std::slice::from_raw_parts(buf as *const u8, blen) }.to_vec();
        // SAFETY: buf came from ucp_rkey_pack and is released once.
        unsafe { sys::ucp_rkey_buffer_release(buf) };
        if blob.len() + SEAL_LEN > MAX_KEY_BLOB {
            // SAFETY: as above.
            unsafe { sys::ucp_mem_unmap(ctx, memh) };
            return Err(TransportError::Local {
                op: OpKind::Register,
                detail: format!(
                    "UCX packed a {}-byte remote key, over ovbench's {}-byte cap; restrict --ucx-tls to the transports in use",
                    blob.len(),
                    MAX_KEY_BLOB - SEAL_LEN
                ),
            });
        }
        Ok(self.table.add_mr(Mr {
            handle: memh,
            slice: s,
            key: RemoteKey {
                addr: p as u64,
                len: s.len as u64,
                blob: SEAL.seal(p as u64, s.len as u64, self.serial, &blob),
            },
        }))
    }

    pub fn mr(&self, h: MrHandle) -> Result<&Mr, TransportError> {
        self.table.mr(h)
    }

    pub fn deregister(
        &mut self,
        ctx: sys::ucp_context_h,
        h: MrHandle,
    ) -> Result<(), TransportError> {
        let mr = self.table.take_mr(h)?;
        // SAFETY: memh is live (taken out of the table, so unmapped once).
        let st = unsafe { sys::ucp_mem_unmap(ctx, mr.handle) };
        crate::status::check(OpKind::Register, "ucp_mem_unmap", st)
    }

    /// Check that `local` lies inside registration `h`; returns its memh
    /// and pointer.
    pub fn local_rma(
        &self,
        h: MrHandle,
        local: LocalSlice,
    ) -> Result<(sys::ucp_mem_h, *mut u8), TransportError> {
        let mr = self.table.covering(h, local)?;
        Ok((mr.handle, self.ptr(local)?))
    }

    /// The unpacked form of `peer`'s key, unpacked on first use and cached.
    /// The blob was checked ([`crate::seal::SEAL`]) before UCX parses it.
    pub fn rkey(
        &mut self,
        ep: sys::ucp_ep_h,
        peer: Rank,
        sealed: &Sealed<'_>,
        rma_in_flight: usize,
    ) -> Result<sys::ucp_rkey_h, TransportError> {
        let (sum, packed) = (sealed.sum, sealed.packed);
        if let Some(r) = self.rkeys.get(&peer).and_then(|m| m.get(&sum)) {
            return Ok(*r);
        }
        if self.rkey_count >= RKEY_CACHE_MAX && rma_in_flight == 0 {
            self.clear_rkeys();
        }
        let mut rkey: sys::ucp_rkey_h = ptr::null_mut();
        // SAFETY: ep is a live endpoint to `peer`; `packed` passed the seal
        // check (exact length and checksum of what ucp_rkey_pack produced),
        // so UCX parses bytes it wrote itself and reads none past the end.
        let st = unsafe { sys::ucp_ep_rkey_unpack(ep, packed.as_ptr().cast(), &mut rkey) };
        if st != sys::UCS_OK {
            return Err(TransportError::BadKey {
                peer,
                detail: format!(
                    "ucp_ep_rkey_unpack returned {}; the key was packed by a different UCX configuration",
                    crate::status::status_str(st)
                ),
            });
        }
        self.rkeys.entry(peer).or_default().insert(sum, rkey);
        self.rkey_count += 1;
        Ok(rkey)
    }

    /// Forget `peer`'s key with checksum `sum` (revoked by its owner).
    pub fn forget_rkey(&mut self, peer: Rank, sum: u64) {
        if let Some(r) = self.rkeys.get_mut(&peer).and_then(|m| m.remove(&sum)) {
            self.rkey_count = self.rkey_count.saturating_sub(1);
            // SAFETY: r was unpacked by ucp_ep_rkey_unpack and is destroyed
            // once; no operation is posted through a revoked key.
            unsafe { sys::ucp_rkey_destroy(r) };
        }
    }

    /// Destroy every unpacked peer key.
    pub fn clear_rkeys(&mut self) {
        self.rkey_count = 0;
        for (_, r) in self.rkeys.drain().flat_map(|(_, m)| m) {
            // SAFETY: r was unpacked by ucp_ep_rkey_unpack and is destroyed
            // once, with no operation in flight using it.
            unsafe { sys::ucp_rkey_destroy(r) };
        }
    }

    /// Unmap every registration (before the context goes).
    pub fn unmap_all(&mut self, ctx: sys::ucp_context_h) {
        for mr in self.table.take_all_mrs() {
            // SAFETY: each memh is live and unmapped once.
            unsafe { sys::ucp_mem_unmap(ctx, mr.handle) };
        }
    }
}
