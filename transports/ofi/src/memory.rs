//! Transport-owned memory and its libfabric registrations (`fi_mr_reg`).
//!
//! Providers whose `mr_mode` lacks `FI_MR_PROV_KEY` (tcp, sockets, shm in
//! 1.17) take the key from the caller, and two live registrations may not
//! share one (the second gets `-FI_ENOKEY`, -266): every registration asks
//! for its own key from a counter. With `FI_MR_VIRT_ADDR` a peer addresses
//! the region by virtual address, otherwise by offset from its start.

use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

use ovbench_core::{LocalSlice, MrHandle, OpKind, RegionId, RemoteKey, TransportError};
use ovbench_ofi_sys as sys;

use crate::error::local;
use crate::seal::SEAL;

const PAGE: usize = 4096;

struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
    len: usize,
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

pub(crate) struct Mr {
    pub mr: *mut sys::fid_mr,
    pub slice: LocalSlice,
    pub key: RemoteKey,
}

/// All regions and registrations of one transport.
pub(crate) struct Memory {
    regions: Vec<Option<Region>>,
    mrs: Vec<Option<Mr>>,
    next_key: u64,
    /// Serial number of the next registration, sealed into its key.
    serial: u64,
    prov_key: bool,
    pub virt_addr: bool,
}

impl Memory {
    pub fn new(mr_mode: u32) -> Memory {
        Memory {
            regions: Vec::new(),
            mrs: Vec::new(),
            next_key: 1,
            serial: 0,
            prov_key: mr_mode & sys::FI_MR_PROV_KEY != 0,
            virt_addr: mr_mode & sys::FI_MR_VIRT_ADDR != 0,
        }
    }

    pub fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        let size = len.max(1).div_ceil(PAGE) * PAGE;
        let layout = Layout::from_size_align(size, PAGE)
            .map_err(|e| TransportError::Invalid(format!("cannot allocate {len} bytes: {e}")))?;
        // SAFETY: layout has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| TransportError::Local {
            op: OpKind::Register,
            detail: format!("out of memory allocating {len} bytes"),
        })?;
        let id = self
            .regions
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.regions.push(None);
                self.regions.len() - 1
            });
        self.regions[id] = Some(Region { ptr, layout, len });
        Ok(RegionId(id as u32))
    }

    pub fn free(&mut self, id: RegionId) -> Result<(), TransportError> {
        self.region(id)?;
        if self.mrs.iter().flatten().any(|m| m.slice.region == id) {
            return Err(TransportError::Invalid(format!(
                "region {} still has registrations; deregister them before freeing it",
                id.0
            )));
        }
        self.regions[id.0 as usize] = None;
        Ok(())
    }

    fn region(&self, id: RegionId) -> Result<&Region, TransportError> {
        self.regions
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| TransportError::Invalid(format!("region {} does not exist", id.0)))
    }

    /// Pointer to the start of `s`, after checking it lies in its region.
    pub fn ptr(&self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        let r = self.region(s.region)?;
        match s.offset.checked_add(s.len) {
            Some(end) if end <= r.len => {}
            _ => {
                return Err(TransportError::Invalid(format!(
                    "slice {}+{} is outside region {} of {} bytes",
                    s.offset, s.len, s.region.0, r.len
                )))
            }
        }
        // SAFETY: offset is within the allocation (checked above).
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
        let m = Mr {
            mr,
            slice: s,
            key: RemoteKey {
                addr: p as u64,
                len: s.len as u64,
                blob: SEAL.seal(p as u64, s.len as u64, self.serial, &key.to_le_bytes()),
            },
        };
        let id = self
            .mrs
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.mrs.push(None);
                self.mrs.len() - 1
            });
        self.mrs[id] = Some(m);
        Ok(MrHandle(id as u32))
    }

    pub fn mr(&self, h: MrHandle) -> Result<&Mr, TransportError> {
        self.mrs
            .get(h.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                TransportError::Invalid(format!("memory registration {} does not exist", h.0))
            })
    }

    pub fn deregister(&mut self, h: MrHandle) -> Result<(), TransportError> {
        self.mr(h)?;
        let m = self.mrs[h.0 as usize].take().expect("checked above");
        // SAFETY: m.mr is live and closed once (taken out of the table).
        let rc = unsafe { sys::fi_close(&mut (*m.mr).fid) };
        crate::error::check(OpKind::Register, "fi_close(mr)", rc)
    }

    /// Check that `local` lies inside registration `h`; returns its
    /// descriptor and pointer.
    pub fn local_rma(
        &self,
        h: MrHandle,
        local: LocalSlice,
    ) -> Result<(*mut libc::c_void, *mut u8), TransportError> {
        let m = self.mr(h)?;
        let r = m.slice;
        let inside = local.region == r.region
            && local.offset >= r.offset
            && local
                .offset
                .checked_add(local.len)
                .is_some_and(|e| e <= r.offset + r.len);
        if !inside {
            return Err(TransportError::Invalid(format!(
                "local slice {}+{} of region {} is not inside registration {} ({}+{})",
                local.offset, local.len, local.region.0, h.0, r.offset, r.len
            )));
        }
        // SAFETY: m.mr is a live registration.
        let desc = unsafe { sys::fi_mr_desc(m.mr) };
        Ok((desc, self.ptr(local)?))
    }

    /// Close every registration (before the domain goes).
    pub fn close_all(&mut self) {
        for m in self.mrs.iter_mut().filter_map(Option::take) {
            // SAFETY: each mr is live and closed once.
            unsafe { sys::fi_close(&mut (*m.mr).fid) };
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
