//! Transport-owned memory and its libfabric registrations (`fi_mr_reg`).
//!
//! Providers whose `mr_mode` lacks `FI_MR_PROV_KEY` (tcp, sockets, shm in
//! 1.17) take the key from the caller, and two live registrations may not
//! share one (the second gets `-FI_ENOKEY`, -266): every registration asks
//! for its own key from a counter. With `FI_MR_VIRT_ADDR` a peer addresses
//! the region by virtual address, otherwise by offset from its start.

use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

use ovbench_core::fabric::regions::{self, Regions};
use ovbench_core::{LocalSlice, MrHandle, OpKind, RegionId, RemoteKey, TransportError};
use ovbench_ofi_sys as sys;

use crate::error::local;
use crate::seal::SEAL;

/// A zeroed, page-aligned allocation.
struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A live `fi_mr_reg` of a slice, with its sealed key.
pub(crate) type Mr = regions::Mr<*mut sys::fid_mr>;

/// All regions and registrations of one transport.
pub(crate) struct Memory {
    table: Regions<Region, *mut sys::fid_mr>,
    next_key: u64,
    /// Serial number of the next registration, sealed into its key.
    serial: u64,
    prov_key: bool,
    pub virt_addr: bool,
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

    pub fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        let layout = regions::page_layout(len)?;
        // SAFETY: layout has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| regions::out_of_memory(len))?;
        Ok(self.table.add(Region { ptr, layout }, len))
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
        Ok(unsafe { std::slice::from_raw_parts(p, s.len) })
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        let p = self.ptr(s)?;
        // SAFETY: as in slice(); &mut self excludes other Rust borrows.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, s.len) })
    }

    pub fn register(
        &mut self,
        domain: *mut sys::fid_domain,
        s: LocalSlice,
    ) -> Result<MrHandle, TransportError> {
        let p = self.ptr(s)?;
        let requested = if self.prov_key { 0 } else { self.next_key };
        let access = u64::from(
            sys::FI_SEND
                | sys::FI_RECV
                | sys::FI_READ
                | sys::FI_WRITE
                | sys::FI_REMOTE_READ
                | sys::FI_REMOTE_WRITE,
        );
        let mut mr: *mut sys::fid_mr = ptr::null_mut();
        // SAFETY: domain is open; the range lies inside a live region; mr
        // receives the handle.
        let rc = unsafe {
            sys::fi_mr_reg(
                domain,
                p.cast(),
                s.len.max(1),
                access,
                0,
                requested,
                0,
                &mut mr,
                ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(local(
                OpKind::Register,
                &format!("fi_mr_reg of {} bytes (requested key {requested})", s.len),
                i64::from(rc),
                "; raise the locked-memory limit (ulimit -l) if the provider pins memory",
            ));
        }
        self.next_key += 1;
        self.serial += 1;
        // SAFETY: mr is a live registration.
        let key = unsafe { sys::fi_mr_key(mr) };
        Ok(self.table.add_mr(Mr {
            handle: mr,
            slice: s,
            key: RemoteKey {
                addr: p as u64,
                len: s.len as u64,
                blob: SEAL.seal(p as u64, s.len as u64, self.serial, &key.to_le_bytes()),
            },
        }))
    }

    pub fn mr(&self, h: MrHandle) -> Result<&Mr, TransportError> {
        self.table.mr(h)
    }

    pub fn deregister(&mut self, h: MrHandle) -> Result<(), TransportError> {
        let m = self.table.take_mr(h)?;
        // SAFETY: m.handle is live and closed once (taken out of the table).
        let rc = unsafe { sys::fi_close(&mut (*m.handle).fid) };
        crate::error::check(OpKind::Register, "fi_close(mr)", rc)
    }

    /// Check that `local` lies inside registration `h`; returns its
    /// descriptor and pointer.
    pub fn local_rma(
        &self,
        h: MrHandle,
        local: LocalSlice,
    ) -> Result<(*mut libc::c_void, *mut u8), TransportError> {
        let m = self.table.covering(h, local)?;
        // SAFETY: m.handle is a live registration.
        let desc = unsafe { sys::fi_mr_desc(m.handle) };
        Ok((desc, self.ptr(local)?))
    }

    /// Close every registration (before the domain goes).
    pub fn close_all(&mut self) {
        for m in self.table.take_all_mrs() {
            // SAFETY: each mr is live and closed once.
            unsafe { sys::fi_close(&mut (*m.handle).fid) };
        }
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
