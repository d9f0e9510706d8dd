//! The access domain (`fi_domain`): parent of the endpoint, completion
//! queue, address vector and registrations.

use std::ptr;
use std::sync::{Arc, Mutex};

use ovbench_ofi_sys as sys;

use super::fabric::{Fabric, FabricInner, Info};
use super::owned::Owned;
use crate::ops::Op;

/// The domain's handle; closed after everything bound to it, before the
/// fabric.
pub(super) type DomainInner = Owned<sys::fid_domain, DomainParts>;

/// What a domain keeps until after its close, dropped in this order.
pub(super) struct DomainParts {
    /// Receive slots of closed endpoints, freed only once the domain has
    /// closed (after `Owned`'s drop body): its parts that outlive an
    /// endpoint (rxm's connection handling, the registration cache and its
    /// memory monitor) must not see memory they still track freed under
    /// them. Boxed: the memory stays where the provider last saw it.
    #[allow(clippy::vec_box)]
    pub(super) retired: Mutex<Vec<Box<Op>>>,
    _fabric: Arc<FabricInner>,
}

/// An open domain; keeps its fabric open.
pub(crate) struct Domain {
    pub(super) inner: Arc<DomainInner>,
}

impl Domain {
    /// Open the domain `info` describes on `fabric`.
    pub fn open(fabric: &Fabric, info: &Info) -> Result<Domain, i32> {
        let mut raw = ptr::null_mut();
        // SAFETY: the fabric is open; info describes this domain; raw
        // receives the handle.
        let rc = unsafe { sys::fi_domain(fabric.inner.raw, info.raw(), &mut raw, ptr::null_mut()) };
        if rc != 0 {
            return Err(rc);
        }
        Ok(Domain {
            // SAFETY: fi_domain returned an open domain (FI_THREAD_DOMAIN:
            // its users serialise every call), owned only here; it holds
            // its fabric.
            inner: Arc::new(unsafe {
                Owned::new(
                    raw,
                    DomainParts {
                        retired: Mutex::new(Vec::new()),
                        _fabric: Arc::clone(&fabric.inner),
                    },
                )
            }),
        })
    }
}
