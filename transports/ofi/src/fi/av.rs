//! The address vector (`fi_av_open`, `FI_AV_TABLE`): peers' addresses
//! turned into `fi_addr_t`s.

use std::ptr;
use std::sync::Arc;

use ovbench_ofi_sys as sys;

use super::domain::{Domain, DomainInner};
use super::owned::Owned;

/// Largest address accepted from a peer (bytes, with a terminating zero).
pub(crate) const MAX_ADDR: usize = 1024;

/// The address vector's handle; closed before its domain.
pub(super) type AvInner = Owned<sys::fid_av, Arc<DomainInner>>;

/// An address vector; keeps its domain open.
pub(crate) struct AddressVector {
    pub(super) inner: Arc<AvInner>,
}

impl AddressVector {
    pub fn open(domain: &Domain) -> Result<AddressVector, i32> {
        let mut attr = sys::fi_av_attr {
            type_: sys::FI_AV_TABLE,
            ..Default::default()
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the domain is open; attr is valid; raw receives the handle.
        let rc = unsafe { sys::fi_av_open(domain.inner.raw, &mut attr, &mut raw, ptr::null_mut()) };
        if rc != 0 {
            return Err(rc);
        }
        Ok(AddressVector {
            // SAFETY: fi_av_open returned an open AV, owned only here and
            // used under the domain's serialisation; it holds its domain.
            inner: Arc::new(unsafe { Owned::new(raw, Arc::clone(&domain.inner)) }),
        })
    }

    /// Insert one address; `Err` carries what `fi_av_insert` returned.
    /// The bytes are copied into a zeroed [`MAX_ADDR`]-byte buffer, so a
    /// provider that reads its format's full length (or up to a NUL, for
    /// string addresses) never reads past them; longer ones are refused.
    pub fn insert(&self, addr: &[u8]) -> Result<sys::fi_addr_t, i32> {
        if addr.len() >= MAX_ADDR {
            return Err(-libc::EINVAL);
        }
        let mut padded = [0u8; MAX_ADDR];
        padded[..addr.len()].copy_from_slice(addr);
        let mut fa: sys::fi_addr_t = 0;
        // SAFETY: the AV is open; padded holds one zero-terminated address
        // of MAX_ADDR bytes; fa receives the handle.
        let n = unsafe {
            sys::fi_av_insert(
                self.inner.raw,
                padded.as_ptr().cast(),
                1,
                &mut fa,
                0,
                ptr::null_mut(),
            )
        };
        if n == 1 {
            Ok(fa)
        } else {
            Err(n)
        }
    }
}
