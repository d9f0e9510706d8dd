//! Page-aligned, zeroed memory owned by the transport (what regions,
//! receive rings and send slots live in).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

const PAGE: usize = 4096;

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
    pub fn new(len: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1).next_multiple_of(PAGE), PAGE).ok()?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(raw).map(|ptr| AlignedBuf { ptr, len, layout })
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

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new(10_000).unwrap();
        assert_eq!(b.as_ptr() as usize % PAGE, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
        assert_eq!(AlignedBuf::new(0).unwrap().len(), 0);
    }
}
