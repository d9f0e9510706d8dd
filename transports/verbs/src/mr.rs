//! Memory regions (`ibv_reg_mr`); each keeps its protection domain alive.

use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::pd::PdInner;

/// A registered range.
pub struct MemoryRegion {
    raw: *mut sys::ibv_mr,
    _pd: Arc<PdInner>,
}

// SAFETY: an ibv_mr is immutable after registration; deregistration is thread-safe.
unsafe impl Send for MemoryRegion {}

impl MemoryRegion {
    /// # Safety
    /// `raw` must be an owned registration in `pd`.
    pub(crate) unsafe fn from_raw(raw: *mut sys::ibv_mr, pd: Arc<PdInner>) -> MemoryRegion {
        MemoryRegion { raw, _pd: pd }
    }
    fn mr(&self) -> &sys::ibv_mr {
        // SAFETY: raw stays valid until drop.
        unsafe { &*self.raw }
    }
    pub fn lkey(&self) -> u32 {
        self.mr().lkey
    }
    pub fn rkey(&self) -> u32 {
        self.mr().rkey
    }
    pub fn addr(&self) -> u64 {
        self.mr().addr as u64
    }
    pub fn len(&self) -> usize {
        self.mr().length
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: raw is owned and deregistered exactly once.
        unsafe { sys::ibv_dereg_mr(self.raw) };
    }
}
