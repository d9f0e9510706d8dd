//! Peer keys unpacked for one-sided operations (`ucp_ep_rkey_unpack`),
//! destroyed on drop (`ucp_rkey_destroy`) while their worker lives.

use std::ptr;
use std::sync::Arc;

use ovbench_ucx_sys as sys;

use super::endpoint::Endpoint;
use super::worker::WorkerInner;
use crate::seal::Sealed;

/// An unpacked remote key; keeps its worker alive (UCX allocates keys
/// from the worker's pools).
pub(crate) struct Rkey {
    raw: sys::ucp_rkey_h,
    _worker: Arc<WorkerInner>,
}

// SAFETY: an unpacked key is immutable after unpacking; it is used and
// destroyed by whoever holds the transport (one thread at a time).
unsafe impl Send for Rkey {}

impl Rkey {
    /// Unpack a peer's key for use towards it through `ep`. `sealed` is
    /// the output of [`crate::seal::SEAL`]'s `unseal`, which checked the
    /// exact length and checksum of what `ucp_rkey_pack` produced: UCX's
    /// parser takes no length, so nothing else may reach it.
    pub fn unpack(ep: &Endpoint, sealed: &Sealed<'_>) -> Result<Rkey, sys::ucs_status_t> {
        let mut raw: sys::ucp_rkey_h = ptr::null_mut();
        // SAFETY: ep is a live endpoint; `packed` passed the seal check, so
        // UCX parses bytes it wrote itself and reads none past the end.
        let st =
            unsafe { sys::ucp_ep_rkey_unpack(ep.raw(), sealed.packed.as_ptr().cast(), &mut raw) };
        if st != sys::UCS_OK {
            return Err(st);
        }
        Ok(Rkey {
            raw,
            _worker: ep.worker.clone(),
        })
    }

    /// The raw handle, for posting one-sided operations.
    pub(super) fn raw(&self) -> sys::ucp_rkey_h {
        self.raw
    }
}

impl Drop for Rkey {
    fn drop(&mut self) {
        // SAFETY: raw was unpacked by ucp_ep_rkey_unpack and is destroyed
        // once; its worker is alive (held above). Memory drops keys only
        // with no one-sided operation in flight (a revoked one waits), or
        // at teardown.
        unsafe { sys::ucp_rkey_destroy(self.raw) };
    }
}
