//! The one owner of a libibverbs object: its pointer, the call that
//! destroys it, and what must outlive it. The resource files (context,
//! channel, PD) were each a struct with the same `Send`/`Sync`/`Drop`
//! trio; the unsafe part now lives here once, and each creation site says
//! why its object meets [`Owned::new`]'s contract.

use std::os::raw::c_int;

/// A libibverbs object this crate created and destroys exactly once.
pub(crate) struct Owned<T, W> {
    pub(crate) raw: *mut T,
    destroy: unsafe extern "C" fn(*mut T) -> c_int,
    /// What lives and dies with the object: its parent's owner (dropped
    /// after the object is destroyed) or its name.
    pub(crate) with: W,
}

impl<T, W> Owned<T, W> {
    /// Owns `raw`.
    ///
    /// # Safety
    /// `raw` is a live object that nothing else destroys, `destroy` is its
    /// destructor, its calls are thread-safe, and it needs nothing alive
    /// beyond `with` and the children that hold an `Arc` to this owner.
    pub(crate) unsafe fn new(
        raw: *mut T,
        destroy: unsafe extern "C" fn(*mut T) -> c_int,
        with: W,
    ) -> Self {
        Owned { raw, destroy, with }
    }
}

// SAFETY: `new`'s contract: the object's calls are thread-safe (libibverbs
// locks internally); `with` brings its own bounds.
unsafe impl<T, W: Send> Send for Owned<T, W> {}
// SAFETY: as above.
unsafe impl<T, W: Sync> Sync for Owned<T, W> {}

impl<T, W> Drop for Owned<T, W> {
    fn drop(&mut self) {
        // SAFETY: raw is owned (`new`'s contract) and destroyed once, here;
        // every child holds an Arc to this, so none is left, and `with`
        // (the parent) is dropped only after this returns.
        unsafe { (self.destroy)(self.raw) };
    }
}
