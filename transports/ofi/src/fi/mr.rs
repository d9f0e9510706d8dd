//! Memory registrations (`fi_mr_reg`); each keeps its domain open.

use std::ptr;
use std::sync::Arc;

use ovbench_ofi_sys as sys;

use super::domain::{Domain, DomainInner};

/// A registration's local descriptor (`fi_mr_desc`), as a post takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Desc(pub(super) *mut libc::c_void);

impl Desc {
    /// No descriptor (memory the provider needs none for).
    pub const NONE: Desc = Desc(ptr::null_mut());
}

/// A live registration of a memory range.
pub(crate) struct MemoryRegion {
    raw: *mut sys::fid_mr,
    _domain: Arc<DomainInner>,
}

// SAFETY: a registration is immutable once made; closing it is
// serialised by its owner.
unsafe impl Send for MemoryRegion {}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        self.close_once();
    }
}

impl MemoryRegion {
    /// Register `[addr, addr + len)` for local and remote read and write,
    /// asking for key `requested` (ignored with `FI_MR_PROV_KEY`).
    ///
    /// # Safety
    /// The range must be allocated memory that stays allocated until the
    /// returned registration is dropped, and until every operation posted
    /// on it has completed or its endpoint has closed.
    pub unsafe fn register(
        domain: &Domain,
        addr: *mut u8,
        len: usize,
        requested: u64,
    ) -> Result<MemoryRegion, i32> {
        let access = u64::from(
            sys::FI_SEND
                | sys::FI_RECV
                | sys::FI_READ
                | sys::FI_WRITE
                | sys::FI_REMOTE_READ
                | sys::FI_REMOTE_WRITE,
        );
        let mut raw = ptr::null_mut();
        // SAFETY: the domain is open; the caller vouches for the range; raw
        // receives the handle.
        let rc = unsafe {
            sys::fi_mr_reg(
                domain.inner.raw,
                addr.cast(),
                len,
                access,
                0,
                requested,
                0,
                &mut raw,
                ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(rc);
        }
        Ok(MemoryRegion {
            raw,
            _domain: Arc::clone(&domain.inner),
        })
    }

    /// Close the registration now: what `fi_close` returned.
    pub fn close(mut self) -> i32 {
        self.close_once()
    }

    fn close_once(&mut self) -> i32 {
        if self.raw.is_null() {
            return 0;
        }
        // SAFETY: raw is live and closed once (nulled here); the domain is
        // open (we hold it).
        let rc = unsafe { sys::fi_close(&mut (*self.raw).fid) };
        self.raw = ptr::null_mut();
        rc
    }

    /// The key a peer names this registration by (`fi_mr_key`).
    pub fn key(&self) -> u64 {
        // SAFETY: raw is a live registration.
        unsafe { sys::fi_mr_key(self.raw) }
    }

    /// The local descriptor posts from this registration pass.
    #[inline]
    pub fn desc(&self) -> Desc {
        // SAFETY: raw is a live registration.
        Desc(unsafe { sys::fi_mr_desc(self.raw) })
    }
}
