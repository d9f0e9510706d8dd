//! Protection domains: the parent of memory regions and queue pairs.

use std::io;
use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::context::ContextInner;
use crate::owned::Owned;
use crate::{Context, MemoryRegion, VerbsError};

/// The PD, kept with its device (every MR and QP holds an Arc to it).
pub(crate) type PdInner = Owned<sys::ibv_pd, Arc<ContextInner>>;

/// A protection domain.
#[derive(Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

/// What a registration lets the local NIC and peers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Local writes only (send slots, receive rings).
    Local,
    /// Local write plus remote read and write (RMA targets).
    Remote,
}

impl ProtectionDomain {
    pub(crate) fn new(ctx: &Context) -> Result<ProtectionDomain, VerbsError> {
        // SAFETY: live context; result owned or NULL.
        let raw = unsafe { sys::ibv_alloc_pd(ctx.inner.raw) };
        let raw = VerbsError::created(raw, "ibv_alloc_pd", ctx.name())?;
        // SAFETY: a fresh PD, deallocated only by this owner; PDs are
        // thread-safe libibverbs objects.
        let inner = unsafe { Owned::new(raw, sys::ibv_dealloc_pd, ctx.inner.clone()) };
        Ok(ProtectionDomain {
            inner: Arc::new(inner),
        })
    }

    /// The device name, for messages.
    pub fn device(&self) -> &str {
        self.inner.with.name()
    }

    /// Register `len` bytes at `addr`.
    ///
    /// # Safety
    /// `[addr, addr+len)` must be memory this process owns that stays
    /// allocated until the returned region is dropped.
    pub unsafe fn register(
        &self,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, io::Error> {
        let flags = match access {
            Access::Local => sys::IBV_ACCESS_LOCAL_WRITE,
            Access::Remote => {
                sys::IBV_ACCESS_LOCAL_WRITE
                    | sys::IBV_ACCESS_REMOTE_WRITE
                    | sys::IBV_ACCESS_REMOTE_READ
            }
        };
        // SAFETY: live PD; the caller guarantees the range outlives the MR.
        let raw = unsafe { sys::ibv_reg_mr(self.inner.raw, addr.cast(), len, flags as i32) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh, owned registration in this PD.
        Ok(unsafe { MemoryRegion::from_raw(raw, self.inner.clone()) })
    }
}
