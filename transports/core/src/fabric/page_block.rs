//! A zeroed, page-aligned heap block in safe code, for fabrics whose
//! memory needs no pinning (TCP): the vector is over-allocated by a page
//! and the region starts at the first page boundary inside it, so callers
//! get the alignment the `Transport::alloc` contract promises with no raw
//! pointers and no allocator of its own.

use super::regions::{Bytes, Zeroed, PAGE};
use crate::{OpKind, TransportError};

/// `buf[start..start + len]` is the page-aligned region.
#[derive(Debug)]
pub struct PageBlock {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Zeroed for PageBlock {
    /// A zeroed block of `len` usable bytes starting on a page boundary;
    /// an error (not an abort) when the system refuses the memory.
    fn zeroed(len: usize) -> Result<PageBlock, TransportError> {
        let total = len.checked_add(PAGE).ok_or_else(|| {
            TransportError::Invalid(format!("allocation of {len} bytes is too large"))
        })?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(total)
            .map_err(|e| TransportError::Local {
                op: OpKind::Register,
                detail: format!("cannot allocate {len} bytes ({e}): reduce --sizes or free memory"),
            })?;
        buf.resize(total, 0);
        // The vector never grows again, so its start (and this offset) holds.
        let misalign = buf.as_ptr() as usize % PAGE;
        let start = if misalign == 0 { 0 } else { PAGE - misalign };
        Ok(PageBlock { buf, start, len })
    }
}

impl PageBlock {
    /// Usable bytes (what was asked for).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block has no usable bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Bytes for PageBlock {
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_zeroed_aligned_and_sized() {
        for len in [0, 1, 100, PAGE, 10_000] {
            let mut b = PageBlock::zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert_eq!(b.is_empty(), len == 0);
            assert_eq!(b.bytes().as_ptr() as usize % PAGE, 0, "{len}");
            assert!(b.bytes().iter().all(|&x| x == 0));
            b.bytes_mut().fill(7);
            assert_eq!(b.bytes().len(), len);
        }
    }

    #[test]
    fn absurd_sizes_are_errors() {
        let e = PageBlock::zeroed(usize::MAX).unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
        let e = PageBlock::zeroed(usize::MAX - PAGE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot allocate"), "{e}");
    }
}
