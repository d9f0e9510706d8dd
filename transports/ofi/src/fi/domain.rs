//! The access domain (`fi_domain`): parent of the endpoint, completion
//! queue, address vector and registrations.

use std::ptr;
use std::sync::{Arc, Mutex};

use ovbench_ofi_sys as sys;

use super::fabric::{Fabric, FabricInner, Info};
use crate::ops::Op;

pub(super) struct DomainInner {
    pub(super) raw: *mut sys::fid_domain,
    /// Receive slots of closed endpoints, freed only once the domain has
    /// closed (after `drop`'s body): its parts that outlive an endpoint
    /// (rxm's connection handling, the registration cache and its memory
    /// monitor) must not see memory they still track freed under them.
    /// Boxed: the memory stays where the provider last saw it.
    #[allow(clippy::vec_box)]
    pub(super) retired: Mutex<Vec<Box<Op>>>,
    _fabric: Arc<FabricInner>,
}

// SAFETY: the domain is opened FI_THREAD_DOMAIN and every use of it is
// serialised by its owner (&mut, or the transport's mutex).
unsafe impl Send for DomainInner {}
// SAFETY: as above: shared only to keep it open.
unsafe impl Sync for DomainInner {}

impl Drop for DomainInner {
    fn drop(&mut self) {
        // SAFETY: raw is open and closed once; endpoint, queues and
        // registrations hold an Arc of this, so all are closed by now.
        unsafe { sys::fi_close(&mut (*self.raw).fid) };
    }
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
            inner: Arc::new(DomainInner {
                raw,
                retired: Mutex::new(Vec::new()),
                _fabric: Arc::clone(&fabric.inner),
            }),
        })
    }
}
