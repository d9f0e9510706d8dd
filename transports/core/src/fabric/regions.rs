//! The bookkeeping of a fabric transport's own memory: regions by
//! [`RegionId`] and registrations by [`MrHandle`] (freed slots are reused),
//! and the range checks every access goes through before a pointer is
//! formed. The memory itself (allocation, pointers) and the library's
//! registration handle stay in the fabric crate; an allocation safe code
//! can read ([`Bytes`], e.g. [`super::page_block::PageBlock`]) gets
//! checked [`Regions::slice`]/[`Regions::slice_mut`] here too.

use std::alloc::Layout;

use crate::{LocalSlice, MrHandle, OpKind, RegionId, RemoteKey, TransportError};

/// Regions are whole pages, aligned to a page.
pub const PAGE: usize = 4096;

/// The layout of a zeroed region of `len` bytes: page-aligned, rounded up
/// to whole pages, at least one.
pub fn page_layout(len: usize) -> Result<Layout, TransportError> {
    let refused = |why: &dyn std::fmt::Display| {
        TransportError::Invalid(format!("cannot allocate {len} bytes: {why}"))
    };
    // Checked: rounding a length near usize::MAX up would wrap to 0.
    let size = len
        .max(1)
        .div_ceil(PAGE)
        .checked_mul(PAGE)
        .ok_or_else(|| refused(&"larger than the address space"))?;
    Layout::from_size_align(size, PAGE).map_err(|e| refused(&e))
}

/// The error for an allocation of `len` bytes the system refused.
pub fn out_of_memory(len: usize) -> TransportError {
    TransportError::Local {
        op: OpKind::Register,
        detail: format!("out of memory allocating {len} bytes"),
    }
}

/// An allocation whose bytes safe code can reach: the fabrics that own
/// plain heap memory (TCP, the simulator) rather than raw pointers.
pub trait Bytes {
    /// The region's usable bytes.
    fn bytes(&self) -> &[u8];
    /// The region's usable bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// An allocation a table makes for itself ([`Regions::alloc`]): `len`
/// zeroed bytes, page-aligned (what `Transport::alloc` promises); an error,
/// not an abort, where the system refuses the memory.
pub trait Zeroed: Sized {
    /// A new allocation of `len` usable zeroed bytes.
    fn zeroed(len: usize) -> Result<Self, TransportError>;
}

/// A plain vector is its own region (the simulator's: no alignment to
/// keep, and `vec![0; n]` leaves untouched pages unmapped).
impl Bytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// A live registration: the library's handle, the slice it covers and
/// its sealed key.
#[derive(Debug)]
pub struct Mr<H> {
    /// The library's registration handle (released by the fabric crate).
    pub handle: H,
    /// The local range the registration covers.
    pub slice: LocalSlice,
    /// The key peers use to reach it, its blob sealed ([`super::seal`]).
    pub key: RemoteKey,
}

/// All regions (an allocation `A` and the bytes the user asked for) and
/// registrations (library handle `H`) of one transport.
#[derive(Debug)]
pub struct Regions<A, H> {
    // Fields drop in order: a registration handle that releases itself
    // on drop goes before the memory it covers.
    mrs: Vec<Option<Mr<H>>>,
    regions: Vec<Option<(A, usize)>>,
}

impl<A, H> Default for Regions<A, H> {
    fn default() -> Self {
        Regions {
            mrs: Vec::new(),
            regions: Vec::new(),
        }
    }
}

/// The first free slot of `slots` (a new one at the end if none).
fn free_slot<T>(slots: &mut Vec<Option<T>>) -> usize {
    slots.iter().position(Option::is_none).unwrap_or_else(|| {
        slots.push(None);
        slots.len() - 1
    })
}

/// Put `v` in the first free slot of `slots`; its index.
fn put<T>(slots: &mut Vec<Option<T>>, v: T) -> usize {
    let id = free_slot(slots);
    slots[id] = Some(v);
    id
}

impl<A, H> Regions<A, H> {
    /// Hold allocation `a` of `len` usable bytes as a new region.
    pub fn add(&mut self, a: A, len: usize) -> RegionId {
        RegionId(put(&mut self.regions, (a, len)) as u32)
    }

    /// Drop region `id`, which no registration may cover any more.
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

    #[inline(always)]
    fn region(&self, id: RegionId) -> Result<&(A, usize), TransportError> {
        self.regions
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| no_region(id))
    }

    /// The allocation holding `s`, after checking `s` lies inside it.
    #[inline]
    pub fn holding(&self, s: LocalSlice) -> Result<&A, TransportError> {
        let (a, len) = self.region(s.region)?;
        check_inside(s, *len)?;
        Ok(a)
    }

    /// As [`Self::holding`], the allocation writable.
    #[inline]
    pub fn holding_mut(&mut self, s: LocalSlice) -> Result<&mut A, TransportError> {
        let (a, len) = self
            .regions
            .get_mut(s.region.0 as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_region(s.region))?;
        check_inside(s, *len)?;
        Ok(a)
    }

    /// Hold a new registration.
    pub fn add_mr(&mut self, mr: Mr<H>) -> MrHandle {
        MrHandle(put(&mut self.mrs, mr) as u32)
    }

    /// Hold a new registration made from the handle it will get (for keys
    /// that name their own registration).
    pub fn add_mr_with(&mut self, make: impl FnOnce(MrHandle) -> Mr<H>) -> MrHandle {
        let id = free_slot(&mut self.mrs);
        let h = MrHandle(id as u32);
        self.mrs[id] = Some(make(h));
        h
    }

    /// The key of registration `h`; for a dead handle an empty key, which
    /// every target refuses (`Transport::remote_key` cannot fail).
    pub fn remote_key(&self, h: MrHandle) -> RemoteKey {
        self.mr(h).map(|m| m.key.clone()).unwrap_or_default()
    }

    /// The live registration `h`; an error naming it when there is none
    /// (never registered, or already taken out).
    pub fn mr(&self, h: MrHandle) -> Result<&Mr<H>, TransportError> {
        self.mrs
            .get(h.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                TransportError::Invalid(format!("memory registration {} does not exist", h.0))
            })
    }

    /// Take registration `h` out of the table (to release it once).
    pub fn take_mr(&mut self, h: MrHandle) -> Result<Mr<H>, TransportError> {
        self.mr(h)?;
        Ok(self.mrs[h.0 as usize].take().expect("checked above"))
    }

    /// Take every registration out of the table (before the library goes).
    pub fn take_all_mrs(&mut self) -> impl Iterator<Item = Mr<H>> + '_ {
        self.mrs.iter_mut().filter_map(Option::take)
    }

    /// Registration `h`, after checking `local` lies inside it.
    pub fn covering(&self, h: MrHandle, local: LocalSlice) -> Result<&Mr<H>, TransportError> {
        let mr = self.mr(h)?;
        let m = mr.slice;
        let inside = local.region == m.region
            && local.offset >= m.offset
            && local
                .offset
                .checked_add(local.len)
                .is_some_and(|e| e <= m.offset + m.len);
        if !inside {
            return Err(TransportError::Invalid(format!(
                "local slice {}+{} of region {} is not inside registration {} ({}+{})",
                local.offset, local.len, local.region.0, h.0, m.offset, m.len
            )));
        }
        Ok(mr)
    }
}

impl<A: Zeroed, H> Regions<A, H> {
    /// A new zeroed region of `len` bytes: the transport's `alloc`.
    pub fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        Ok(self.add(A::zeroed(len)?, len))
    }
}

impl<A: Bytes, H> Regions<A, H> {
    /// The bytes of `s`, after checking it lies inside its region.
    #[inline(always)]
    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        Ok(&self.holding(s)?.bytes()[s.offset..s.offset + s.len])
    }

    /// The bytes of `s`, writable, after checking it lies inside its region.
    #[inline(always)]
    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        Ok(&mut self.holding_mut(s)?.bytes_mut()[s.offset..s.offset + s.len])
    }
}

#[cold]
#[inline(never)]
fn no_region(id: RegionId) -> TransportError {
    TransportError::Invalid(format!("region {} does not exist", id.0))
}

/// `s` lies inside a region of `len` bytes (no overflow). Inlined into
/// every message's path, its error built out of line.
#[inline(always)]
fn check_inside(s: LocalSlice, len: usize) -> Result<(), TransportError> {
    match s.offset.checked_add(s.len) {
        Some(end) if end <= len => Ok(()),
        _ => Err(outside(s, len)),
    }
}

#[cold]
#[inline(never)]
fn outside(s: LocalSlice, len: usize) -> TransportError {
    TransportError::Invalid(format!(
        "slice {}+{} is outside region {} of {} bytes",
        s.offset, s.len, s.region.0, len
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RemoteKey {
        RemoteKey {
            addr: 0,
            len: 0,
            blob: Vec::new(),
        }
    }

    #[test]
    fn slots_are_reused_and_ranges_checked() {
        let mut t: Regions<&str, u8> = Regions::default();
        let a = t.add("a", 100);
        let b = t.add("b", 10);
        assert_eq!(*t.holding(LocalSlice::new(a, 90, 10)).unwrap(), "a");
        assert!(t.holding(LocalSlice::new(a, 91, 10)).is_err());
        assert!(t.holding(LocalSlice::new(a, usize::MAX, 2)).is_err());
        let h = t.add_mr(Mr {
            handle: 7,
            slice: LocalSlice::new(b, 2, 6),
            key: key(),
        });
        assert_eq!(t.covering(h, LocalSlice::new(b, 2, 6)).unwrap().handle, 7);
        assert!(t.covering(h, LocalSlice::new(b, 1, 6)).is_err());
        assert!(t.covering(h, LocalSlice::new(a, 2, 6)).is_err());
        assert!(t.free(b).unwrap_err().to_string().contains("deregister"));
        assert_eq!(t.take_mr(h).unwrap().handle, 7);
        assert!(t.mr(h).is_err());
        t.free(b).unwrap();
        assert!(t.holding(LocalSlice::new(b, 0, 1)).is_err());
        assert_eq!(t.add("c", 1), b);
        t.add_mr(Mr {
            handle: 8,
            slice: LocalSlice::new(a, 0, 1),
            key: key(),
        });
        assert_eq!(t.take_all_mrs().map(|m| m.handle).collect::<Vec<_>>(), [8]);
    }

    #[test]
    fn slices_of_byte_regions_are_checked() {
        let mut t: Regions<Vec<u8>, ()> = Regions::default();
        let r = t.add(vec![0; 8], 8);
        t.slice_mut(LocalSlice::new(r, 6, 2))
            .unwrap()
            .copy_from_slice(&[1, 2]);
        assert_eq!(t.slice(LocalSlice::new(r, 5, 3)).unwrap(), &[0, 1, 2]);
        assert!(t.slice(LocalSlice::new(r, 7, 2)).is_err());
        assert!(t.slice_mut(LocalSlice::new(r, usize::MAX, 2)).is_err());
        assert!(t.slice(LocalSlice::new(RegionId(9), 0, 0)).is_err());
    }

    #[test]
    fn keys_may_name_their_own_handle() {
        let mut t: Regions<(), ()> = Regions::default();
        let r = t.add((), 4);
        let mk = |h: MrHandle| Mr {
            handle: (),
            slice: LocalSlice::new(r, 0, 4),
            key: RemoteKey {
                addr: 0,
                len: 4,
                blob: h.0.to_le_bytes().to_vec(),
            },
        };
        let a = t.add_mr_with(mk);
        let b = t.add_mr_with(mk);
        assert_eq!(t.remote_key(b).blob, 1u32.to_le_bytes());
        t.take_mr(a).unwrap();
        assert_eq!(t.add_mr_with(mk), a, "the freed slot is reused");
        assert_eq!(t.remote_key(a).blob, 0u32.to_le_bytes());
        t.take_mr(b).unwrap();
        assert_eq!(t.remote_key(b), RemoteKey::default());
    }

    #[test]
    fn registrations_drop_before_their_memory() {
        use std::cell::RefCell;
        use std::rc::Rc;
        struct Noisy(&'static str, Rc<RefCell<Vec<&'static str>>>);
        impl Drop for Noisy {
            fn drop(&mut self) {
                self.1.borrow_mut().push(self.0);
            }
        }
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut t: Regions<Noisy, Noisy> = Regions::default();
        let r = t.add(Noisy("region", log.clone()), 1);
        t.add_mr(Mr {
            handle: Noisy("mr", log.clone()),
            slice: LocalSlice::new(r, 0, 1),
            key: key(),
        });
        drop(t);
        assert_eq!(*log.borrow(), ["mr", "region"]);
    }

    #[test]
    fn layouts_are_whole_pages() {
        assert_eq!(page_layout(0).unwrap().size(), PAGE);
        assert_eq!(page_layout(PAGE + 1).unwrap().size(), 2 * PAGE);
        assert_eq!(page_layout(1).unwrap().align(), PAGE);
        assert!(page_layout(usize::MAX).is_err());
    }
}
