//! A zeroed, page-aligned heap block behind a raw pointer: the memory of
//! the fabrics that hand regions to their library by address (verbs, UCX,
//! libfabric), where the NIC or library may write while Rust holds no
//! borrow. The one allocation and free of such memory; the pointer
//! arithmetic and the library calls on it stay in each fabric's memory
//! module. Fabrics that need no pinning use the safe
//! [`super::page_block::PageBlock`].

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use super::regions::{self, Bytes, Regions, Zeroed};
use crate::{LocalSlice, TransportError};

/// A page-aligned, zero-initialised heap block of `len` usable bytes.
#[derive(Debug)]
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
    /// zero-length buffer still has a valid address to register); an
    /// error, not an abort, where the system refuses the memory.
    pub fn new(len: usize) -> Result<AlignedBuf, TransportError> {
        let layout = regions::page_layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| regions::out_of_memory(len))?;
        Ok(AlignedBuf { ptr, len, layout })
    }

    /// Usable bytes (what was asked for).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block has no usable bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block's first byte, for a library to read or write through.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The usable bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The usable bytes, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Zeroed for AlignedBuf {
    fn zeroed(len: usize) -> Result<AlignedBuf, TransportError> {
        AlignedBuf::new(len)
    }
}

/// Safe code reaches a region's bytes through the shared table's checked
/// slices.
impl Bytes for AlignedBuf {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    #[inline]
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

impl<H> Regions<AlignedBuf, H> {
    /// Pointer to the start of `s`, after checking it lies in its region:
    /// what a fabric hands its library. Inlined: on the native paths'
    /// every send and receive, the slice passed through memory stalled
    /// store forwarding (`perf annotate`).
    #[inline]
    pub fn ptr(&self, s: LocalSlice) -> Result<*mut u8, TransportError> {
        let buf = self.holding(s)?;
        // SAFETY: offset + len is within the buffer (checked by holding).
        Ok(unsafe { buf.as_ptr().add(s.offset) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::regions::PAGE;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 10_000] {
            let mut b = AlignedBuf::new(len).unwrap();
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % PAGE, 0, "{len}");
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice().fill(7);
            assert!(b.bytes().iter().all(|&x| x == 7));
        }
    }

    /// What the pinning fabrics' memory modules reach regions through:
    /// pointers and byte slices, both checked by the table.
    #[test]
    fn regions_are_reached_through_the_table_checks() {
        let mut t: Regions<AlignedBuf, ()> = Regions::default();
        let r = t.alloc(100).unwrap();
        let p = t.ptr(LocalSlice::new(r, 4, 96)).unwrap();
        assert_eq!(p as usize % PAGE, 4);
        assert!(t.ptr(LocalSlice::new(r, 5, 96)).is_err());
        assert!(t.ptr(LocalSlice::new(r, usize::MAX, 2)).is_err());
        t.slice_mut(LocalSlice::new(r, 98, 2))
            .unwrap()
            .copy_from_slice(&[1, 2]);
        assert_eq!(t.slice(LocalSlice::new(r, 97, 3)).unwrap(), &[0, 1, 2]);
        assert!(t.slice(LocalSlice::new(r, 99, 2)).is_err());
        t.free(r).unwrap();
        assert!(t.ptr(LocalSlice::new(r, 0, 1)).is_err());
    }

    #[test]
    fn absurd_sizes_are_errors() {
        assert!(AlignedBuf::new(usize::MAX).is_err());
    }
}
