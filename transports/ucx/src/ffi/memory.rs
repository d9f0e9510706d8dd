//! Transport-owned memory, its UCX mappings (`ucp_mem_map`, unmapped on
//! drop), packed remote keys (`ucp_rkey_pack`) and the cache of unpacked
//! peer keys; and the buffer tokens ([`RegionBuf`], [`RmaBuf`]) through
//! which the rest of this layer hands the transport's memory to UCX.

use std::collections::HashMap;
use std::ptr;

use ovbench_core::fabric::aligned::AlignedBuf;
use ovbench_core::fabric::regions::{self, Regions};
use ovbench_core::{LocalSlice, MrHandle, OpKind, Rank, TransportError, MAX_KEY_BLOB};
use ovbench_ucx_sys as sys;

use super::context::Context;
use super::endpoint::Endpoint;
use super::rkey::Rkey;
use crate::seal::{Sealed, SEAL, SEAL_LEN};
use crate::status::local;

/// Unpacked peer keys kept before the cache is emptied (protocols that
/// register per fragment would otherwise grow it without bound).
const RKEY_CACHE_MAX: usize = 1024;

/// A range inside one of the transport's regions, checked when made (only
/// [`Memory`] makes them): what the posting calls of this layer hand to
/// UCX. The region stays allocated while an operation on it is in flight
/// (see `ffi`).
#[derive(Clone, Copy)]
pub(crate) struct RegionBuf {
    ptr: *mut u8,
    len: usize,
}

impl RegionBuf {
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

/// A [`RegionBuf`] inside a live registration, with its memory handle.
#[derive(Clone, Copy)]
pub(crate) struct RmaBuf {
    buf: RegionBuf,
    memh: sys::ucp_mem_h,
}

impl RmaBuf {
    pub(super) fn buf(&self) -> RegionBuf {
        self.buf
    }
    pub(super) fn memh(&self) -> sys::ucp_mem_h {
        self.memh
    }
}

/// A `ucp_mem_map`, unmapped on drop; keeps its context alive.
pub(crate) struct MemMap {
    memh: sys::ucp_mem_h,
    ctx: Context,
}

// SAFETY: a memory handle is used by one thread at a time (the transport's).
unsafe impl Send for MemMap {}

impl MemMap {
    /// Unmap now, reporting the status (drop unmaps silently).
    fn unmap(mut self) -> sys::ucs_status_t {
        let memh = std::mem::replace(&mut self.memh, ptr::null_mut());
        // SAFETY: memh is live and, taken out of self, unmapped once.
        unsafe { sys::ucp_mem_unmap(self.ctx.raw(), memh) }
    }
}

impl Drop for MemMap {
    fn drop(&mut self) {
        if !self.memh.is_null() {
            // SAFETY: memh is live and unmapped once; its context is held.
            unsafe { sys::ucp_mem_unmap(self.ctx.raw(), self.memh) };
        }
    }
}

/// A live `ucp_mem_map` of a slice, with its sealed packed key.
pub(crate) type Mr = regions::Mr<MemMap>;

/// All regions, registrations and unpacked peer keys of one transport.
#[derive(Default)]
pub(crate) struct Memory {
    /// The regions (the transport allocates and frees through it).
    pub(crate) table: Regions<AlignedBuf, MemMap>,
    /// Per peer: packed blob's checksum → unpacked key.
    rkeys: HashMap<Rank, HashMap<u64, Rkey>>,
    /// Keys revoked while one-sided operations were in flight (a get or
    /// put may still use its key): destroyed once none is.
    retired: Vec<Rkey>,
    /// Serial number of the next registration (part of its sealed key, so
    /// a re-registration of the same memory gets a key of its own).
    serial: u64,
    rkey_count: usize,
}

impl Memory {
    /// `s` as a buffer to hand to UCX, after checking it lies in its region.
    #[inline]
    pub fn buf(&self, s: LocalSlice) -> Result<RegionBuf, TransportError> {
        Ok(RegionBuf {
            ptr: self.table.ptr(s)?,
            len: s.len,
        })
    }

    /// Copy `src` into `dst` (checked to lie in its region), through the
    /// shared table: no Rust borrow of region bytes may exist meanwhile,
    /// which holds during a poll (the only caller, a lent taker).
    #[inline]
    pub fn place(&self, dst: LocalSlice, src: &[u8]) -> Result<(), TransportError> {
        let p = self.table.ptr(LocalSlice {
            len: src.len(),
            ..dst
        })?;
        // SAFETY: ptr() checked p..p+src.len() lies in a live region; no
        // Rust borrow of that region exists during a poll; src is UCX's
        // buffer, which cannot overlap transport memory.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
        Ok(())
    }

    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        let p = self.table.ptr(s)?;
        // SAFETY: ptr() checked the range; the region lives as long as &self.
        // Peers may write into registered memory concurrently (RDMA), which
        // is the nature of the contract: readers see bytes, never UB in Rust
        // terms beyond what a volatile device write is.
        Ok(unsafe { std::slice::from_raw_parts(p, s.len) })
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        let p = self.table.ptr(s)?;
        // SAFETY: as in slice(), and &mut self excludes other Rust borrows.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, s.len) })
    }

    /// `ucp_mem_map` the slice and pack its remote key.
    pub fn register(&mut self, ctx: &Context, s: LocalSlice) -> Result<MrHandle, TransportError> {
        let p = self.table.ptr(s)?;
        let params = sys::ucp_mem_map_params_t {
            field_mask: (sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH)
                as u64,
            address: p.cast(),
            length: s.len.max(1),
            ..Default::default()
        };
        let mut memh: sys::ucp_mem_h = ptr::null_mut();
        // SAFETY: ctx is live; the address range lies inside a live region,
        // which cannot be freed while a registration covers it.
        let st = unsafe { sys::ucp_mem_map(ctx.raw(), &params, &mut memh) };
        if st != sys::UCS_OK {
            return Err(local(
                OpKind::Register,
                &format!("ucp_mem_map of {} bytes", s.len),
                st,
                "; raise the locked-memory limit (ulimit -l) if the transport pins memory",
            ));
        }
        let map = MemMap {
            memh,
            ctx: ctx.clone(),
        };
        let mut buf: *mut libc::c_void = ptr::null_mut();
        let mut blen = 0usize;
        // SAFETY: memh was just mapped on ctx; buf/blen receive a UCX buffer.
        let st = unsafe { sys::ucp_rkey_pack(ctx.raw(), memh, &mut buf, &mut blen) };
        if st != sys::UCS_OK {
            return Err(local(OpKind::Register, "ucp_rkey_pack", st, ""));
        }
        // SAFETY: UCX returned blen readable bytes at buf.
        let blob = unsafe { std::slice::from_raw_parts(buf as *const u8, blen) }.to_vec();
        // SAFETY: buf came from ucp_rkey_pack and is released once.
        unsafe { sys::ucp_rkey_buffer_release(buf) };
        if blob.len() + SEAL_LEN > MAX_KEY_BLOB {
            return Err(TransportError::Local {
                op: OpKind::Register,
                detail: format!(
                    "UCX packed a {}-byte remote key, over ovbench's {}-byte cap; restrict --ucx-tls to the transports in use",
                    blob.len(),
                    MAX_KEY_BLOB - SEAL_LEN
                ),
            });
        }
        // A re-registration of the same memory (a pipelined fragment each
        // message) must not get the key a peer was told is revoked.
        self.serial += 1;
        Ok(self.table.add_mr(Mr {
            handle: map,
            slice: s,
            key: SEAL.key(p as u64, s.len as u64, self.serial, &blob),
        }))
    }

    pub fn mr(&self, h: MrHandle) -> Result<&Mr, TransportError> {
        self.table.mr(h)
    }

    pub fn deregister(&mut self, h: MrHandle) -> Result<(), TransportError> {
        let mr = self.table.take_mr(h)?;
        crate::status::check(OpKind::Register, "ucp_mem_unmap", mr.handle.unmap())
    }

    /// Check that `local` lies inside registration `h`; the buffer with
    /// its memory handle.
    pub fn local_rma(&self, h: MrHandle, local: LocalSlice) -> Result<RmaBuf, TransportError> {
        let mr = self.table.covering(h, local)?;
        Ok(RmaBuf {
            buf: self.buf(local)?,
            memh: mr.handle.memh,
        })
    }

    /// Make sure `peer`'s key is unpacked (on first use, through `ep`)
    /// and cached; [`cached_rkey`](Self::cached_rkey) then has it. The
    /// blob was checked ([`crate::seal::SEAL`]) before UCX parses it.
    pub fn rkey(
        &mut self,
        ep: &Endpoint,
        peer: Rank,
        sealed: &Sealed<'_>,
        rma_in_flight: usize,
    ) -> Result<(), TransportError> {
        if self.cached_rkey(peer, sealed.sum).is_some() {
            return Ok(());
        }
        if rma_in_flight == 0 {
            self.retired.clear();
            if self.rkey_count >= RKEY_CACHE_MAX {
                self.clear_rkeys();
            }
        }
        let rkey = Rkey::unpack(ep, sealed).map_err(|st| TransportError::BadKey {
            peer,
            detail: format!(
                "ucp_ep_rkey_unpack returned {}; the key was packed by a different UCX configuration",
                crate::status::status_str(st)
            ),
        })?;
        self.rkeys.entry(peer).or_default().insert(sealed.sum, rkey);
        self.rkey_count += 1;
        Ok(())
    }

    /// `peer`'s unpacked key with checksum `sum`, if cached.
    pub fn cached_rkey(&self, peer: Rank, sum: u64) -> Option<&Rkey> {
        self.rkeys.get(&peer).and_then(|m| m.get(&sum))
    }

    /// Forget `peer`'s key with checksum `sum` (revoked by its owner);
    /// with one-sided operations in flight it is destroyed only once none
    /// is.
    pub fn forget_rkey(&mut self, peer: Rank, sum: u64, rma_in_flight: usize) {
        if let Some(r) = self.rkeys.get_mut(&peer).and_then(|m| m.remove(&sum)) {
            self.rkey_count = self.rkey_count.saturating_sub(1);
            self.retired.push(r);
        }
        if rma_in_flight == 0 {
            self.retired.clear();
        }
    }

    /// Destroy every unpacked peer key (before the endpoints close).
    pub fn clear_rkeys(&mut self) {
        self.rkey_count = 0;
        self.rkeys.clear();
        self.retired.clear();
    }

    /// Unmap every registration.
    pub fn unmap_all(&mut self) {
        self.table.take_all_mrs().for_each(drop);
    }
}
