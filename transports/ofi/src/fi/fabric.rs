//! The library and the fabric: provider discovery (`fi_getinfo`, whose
//! list [`Info`] owns), `fi_fabric`, and the library-wide calls
//! (`fi_version`, `fi_strerror`, `fi_trywait`).

use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::Arc;

use ovbench_ofi_sys as sys;

use super::cq::CompletionQueue;
use super::owned::Owned;

/// libfabric API version ovbench is written against (1.10 semantics).
const API_VERSION: u32 = sys::fi_version_of(1, 10);

/// The library's version, `major << 16 | minor`.
pub(crate) fn version() -> u32 {
    // SAFETY: fi_version has no preconditions.
    unsafe { sys::fi_version() }
}

/// `fi_strerror` of a (positive) libfabric or errno code.
pub(crate) fn strerror(code: libc::c_int) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(sys::fi_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

/// A libfabric string (NULL reads as empty).
pub(crate) fn cstr(p: *const libc::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric's strings (fi_info names, provider error
        // strings) are NUL-terminated and live while their owner does.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// What ovbench asks `fi_getinfo` for.
pub(crate) struct Hints<'a> {
    pub provider: &'a str,
    /// Address to bind (`FI_SOURCE`), for providers that take one.
    pub node: Option<&'a str>,
    /// Default transmit flags the endpoint must support
    /// (`FI_DELIVERY_COMPLETE`, `FI_MATCH_COMPLETE`, or 0).
    pub op_flags: u64,
}

/// The first provider entry `fi_getinfo` returned (the whole list is
/// owned and freed on drop).
pub(crate) struct Info {
    raw: *mut sys::fi_info,
}

// SAFETY: the list is plain memory owned by this value; libfabric keeps
// no reference to it.
unsafe impl Send for Info {}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: raw came from fi_getinfo and is freed once.
        unsafe { sys::fi_freeinfo(self.raw) };
    }
}

impl Info {
    /// `fi_getinfo` for an `FI_EP_RDM` endpoint with `FI_MSG | FI_RMA |
    /// FI_TAGGED`, send-after-send ordering, `FI_THREAD_DOMAIN`; the
    /// libfabric code on failure.
    pub fn get(h: &Hints<'_>) -> Result<Info, i32> {
        let prov = CString::new(h.provider).map_err(|_| -libc::EINVAL)?;
        let node = match h.node.map(CString::new) {
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => return Err(-libc::EINVAL),
            None => None,
        };
        // SAFETY: fi_allocinfo returns a zeroed fi_info with its
        // sub-attributes allocated, or NULL.
        let hints = unsafe { sys::fi_allocinfo() };
        if hints.is_null() {
            return Err(-libc::ENOMEM);
        }
        // SAFETY: hints and its attribute structs were allocated by
        // fi_allocinfo; prov_name is strdup'd so fi_freeinfo can free it.
        unsafe {
            let i = &mut *hints;
            i.caps = u64::from(sys::FI_MSG | sys::FI_RMA | sys::FI_TAGGED);
            i.mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
            (*i.ep_attr).type_ = sys::FI_EP_RDM;
            (*i.domain_attr).mr_mode =
                (sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY) as libc::c_int;
            (*i.domain_attr).threading = sys::FI_THREAD_DOMAIN;
            (*i.tx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
            (*i.rx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
            (*i.tx_attr).op_flags = h.op_flags;
            (*i.fabric_attr).prov_name = libc::strdup(prov.as_ptr());
        }
        let mut info: *mut sys::fi_info = ptr::null_mut();
        let flags = if node.is_some() { sys::FI_SOURCE } else { 0 };
        // SAFETY: hints is a valid fi_info; node is NUL-terminated or NULL;
        // info receives a list that Info frees.
        let rc = unsafe {
            sys::fi_getinfo(
                API_VERSION,
                node.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
                ptr::null(),
                flags,
                hints,
                &mut info,
            )
        };
        // SAFETY: hints came from fi_allocinfo and is freed once.
        unsafe { sys::fi_freeinfo(hints) };
        match rc {
            0 if !info.is_null() => Ok(Info { raw: info }),
            0 => Err(-(sys::FI_ENODATA as i32)),
            rc => Err(rc),
        }
    }

    fn info(&self) -> &sys::fi_info {
        // SAFETY: raw is a valid list entry until drop.
        unsafe { &*self.raw }
    }

    /// The raw entry, for the opening calls of the sibling modules.
    pub(super) fn raw(&self) -> *mut sys::fi_info {
        self.raw
    }

    pub fn provider(&self) -> String {
        // SAFETY: the attribute pointers of a returned fi_info are valid.
        cstr(unsafe { &*self.info().fabric_attr }.prov_name)
    }

    pub fn fabric_name(&self) -> String {
        // SAFETY: as above.
        cstr(unsafe { &*self.info().fabric_attr }.name)
    }

    pub fn domain_name(&self) -> String {
        // SAFETY: as above.
        cstr(unsafe { &*self.info().domain_attr }.name)
    }

    pub fn mr_mode(&self) -> u32 {
        // SAFETY: as above.
        unsafe { &*self.info().domain_attr }.mr_mode as u32
    }

    pub fn data_progress_auto(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.info().domain_attr }.data_progress == sys::FI_PROGRESS_AUTO
    }

    pub fn inject_size(&self) -> usize {
        // SAFETY: as above.
        unsafe { &*self.info().tx_attr }.inject_size
    }

    pub fn max_msg_size(&self) -> usize {
        // SAFETY: as above.
        unsafe { &*self.info().ep_attr }.max_msg_size
    }

    pub fn addr_format(&self) -> u32 {
        self.info().addr_format
    }

    /// Open the endpoint with no default transmit flags (they are asked
    /// per operation where needed).
    pub fn clear_op_flags(&mut self) {
        // SAFETY: tx_attr of a returned fi_info is valid and ours to edit.
        unsafe { (*self.info().tx_attr).op_flags = 0 };
    }
}

/// The fabric's handle; closed after every domain on it.
pub(super) type FabricInner = Owned<sys::fid_fabric, ()>;

/// An open fabric (`fi_fabric`).
pub(crate) struct Fabric {
    pub(super) inner: Arc<FabricInner>,
}

impl Fabric {
    pub fn open(info: &Info) -> Result<Fabric, i32> {
        let mut raw = ptr::null_mut();
        // SAFETY: fabric_attr of a returned fi_info is valid; raw receives
        // the handle.
        let rc = unsafe { sys::fi_fabric(info.info().fabric_attr, &mut raw, ptr::null_mut()) };
        if rc != 0 {
            return Err(rc);
        }
        Ok(Fabric {
            // SAFETY: fi_fabric returned an open fabric, owned only here; it
            // is only closed and passed to calls the domain serialises.
            inner: Arc::new(unsafe { Owned::new(raw, ()) }),
        })
    }

    /// `fi_trywait` on `cq`: whether sleeping on its wait fd is safe now
    /// (nothing to read, the provider's progress done).
    pub fn trywait(&self, cq: &CompletionQueue) -> bool {
        let mut fids = [cq.fid()];
        // SAFETY: the fabric is open; fids holds one open CQ fid (cq keeps
        // it open for the call's duration).
        unsafe { sys::fi_trywait(self.inner.raw, fids.as_mut_ptr(), 1) == 0 }
    }
}
