//! The one owner of a libfabric fabric, domain, address vector or
//! completion queue: its handle, closed once by `fi_close`, and what must
//! outlive it. Those resources were each a struct with the same
//! `Send`/`Sync`/`Drop` trio; the unsafe part now lives here once, and each
//! opening site says why its handle meets [`Owned::new`]'s contract.

use ovbench_ofi_sys as sys;

/// A libfabric object this crate opened and closes exactly once.
pub(crate) struct Owned<T, W> {
    pub(crate) raw: *mut T,
    /// What lives until after the close: the parent's owner (and, for the
    /// domain, the memory it must not see freed while open).
    pub(crate) with: W,
}

impl<T, W> Owned<T, W> {
    /// Owns `raw`.
    ///
    /// # Safety
    /// `raw` is an open libfabric object that begins with its `struct fid`
    /// (as every `fid_*` does), nothing else closes it, every use of it is
    /// serialised (`FI_THREAD_DOMAIN`, by its owners), and it needs nothing
    /// alive beyond `with` and the children that hold an `Arc` to this.
    pub(crate) unsafe fn new(raw: *mut T, with: W) -> Self {
        Owned { raw, with }
    }
}

// SAFETY: `new`'s contract: uses are serialised by the owners; `with`
// brings its own bounds.
unsafe impl<T, W: Send> Send for Owned<T, W> {}
// SAFETY: as above: shared only to keep it open.
unsafe impl<T, W: Sync> Sync for Owned<T, W> {}

impl<T, W> Drop for Owned<T, W> {
    fn drop(&mut self) {
        // SAFETY: raw is open and closed once, here, through its leading
        // fid (`new`'s contract); every child holds an Arc of this, so it
        // is closed by now, and `with` (the parent) drops only after this.
        unsafe { sys::fi_close(self.raw.cast::<sys::fid>()) };
    }
}
