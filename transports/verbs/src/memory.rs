//! Page-aligned, zeroed memory owned by the transport (what regions,
//! receive rings and send slots live in).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use ovbench_core::fabric::regions::{self, Bytes};
use ovbench_core::TransportError;

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
    pub fn new(len: usize) -> Result<AlignedBuf, TransportError> {
        let layout = regions::page_layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| regions::out_of_memory(len))?;
        Ok(AlignedBuf { ptr, len, layout })
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

/// Safe code reaches a region's bytes through the shared table's checked
/// slices.
impl Bytes for AlignedBuf {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
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
    use ovbench_core::fabric::regions::PAGE;

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
