//! The UCP context (`ucp_config_read`, `ucp_init`, `ucp_cleanup`), and the
//! library-wide calls that need no handle: the version, status strings,
//! and capturing what a `*_print_info(…, FILE*)` call writes.

use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::Arc;

use ovbench_core::{OpKind, TransportError};
use ovbench_ucx_sys as sys;

use crate::status::local;

/// The raw context; cleaned up when the last worker and memory map that
/// hold it are gone.
pub(crate) struct ContextInner {
    raw: sys::ucp_context_h,
}

// SAFETY: a UCP context has no thread affinity; its workers carry the
// thread mode, and every use here goes through a worker or a memory map
// that is itself used by one thread at a time.
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared references only keep the handle alive.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: raw came from ucp_init; every worker and memory map holds
        // an Arc to this, so none is left, and it is cleaned up once.
        unsafe { sys::ucp_cleanup(self.raw) };
    }
}

/// A UCP context with the features ovbench uses (AM, RMA, TAG, WAKEUP).
#[derive(Clone)]
pub(crate) struct Context {
    pub(super) inner: Arc<ContextInner>,
}

impl Context {
    /// Read UCX's configuration (defaults plus the `UCX_*` environment),
    /// set `TLS`, `NET_DEVICES` and the `extra` settings (names without
    /// `UCX_`; a transport's own, such as `UD_ETH_DGID_CHECK`, is kept by
    /// UCX until it opens that transport) in it — the process environment
    /// is left alone — and create the context.
    pub fn new(
        tls: &str,
        net_devices: &str,
        extra: &[(&str, &str)],
    ) -> Result<Context, TransportError> {
        let mut config: *mut sys::ucp_config_t = ptr::null_mut();
        // SAFETY: NULL env prefix and file name ask for the defaults plus
        // the UCX_* environment; config receives a new handle.
        let st = unsafe { sys::ucp_config_read(ptr::null(), ptr::null(), &mut config) };
        crate::status::check(OpKind::Connect, "ucp_config_read", st)?;
        let apply = |name: &str, value: &str| -> Result<(), TransportError> {
            let n = CString::new(name).expect("no NUL in name");
            let v = CString::new(value).map_err(|_| {
                TransportError::Invalid(format!("UCX setting {name}={value:?} contains a NUL byte"))
            })?;
            // SAFETY: config is the live handle read above; both strings
            // are NUL-terminated and UCX copies them.
            let st = unsafe { sys::ucp_config_modify(config, n.as_ptr(), v.as_ptr()) };
            if st == sys::UCS_OK {
                Ok(())
            } else {
                Err(local(
                    OpKind::Connect,
                    &format!("ucp_config_modify({name}={value})"),
                    st,
                    "; `ucx_info -d` lists the transports and devices this UCX build has",
                ))
            }
        };
        let applied = apply("TLS", tls)
            .and_then(|()| apply("NET_DEVICES", net_devices))
            .and_then(|()| extra.iter().try_for_each(|(n, v)| apply(n, v)));
        let mut raw: sys::ucp_context_h = ptr::null_mut();
        let st = if applied.is_ok() {
            let params = sys::ucp_params_t {
                field_mask: (sys::UCP_PARAM_FIELD_FEATURES
                    | sys::UCP_PARAM_FIELD_MT_WORKERS_SHARED
                    | sys::UCP_PARAM_FIELD_ESTIMATED_NUM_EPS) as u64,
                features: (sys::UCP_FEATURE_AM
                    | sys::UCP_FEATURE_RMA
                    | sys::UCP_FEATURE_TAG
                    | sys::UCP_FEATURE_WAKEUP) as u64,
                mt_workers_shared: 0,
                estimated_num_eps: 2,
                ..Default::default()
            };
            // SAFETY: params and config are valid; raw receives the handle.
            unsafe { sys::ucp_init(&params, config, &mut raw) }
        } else {
            sys::UCS_OK
        };
        // SAFETY: config was read above and is released exactly once.
        unsafe { sys::ucp_config_release(config) };
        applied?;
        if st != sys::UCS_OK {
            return Err(local(
                OpKind::Connect,
                "ucp_init",
                st,
                &format!(
                    " with UCX_TLS={tls} UCX_NET_DEVICES={net_devices}; pick transports that exist here (`ucx_info -d`) with --ucx-tls"
                ),
            ));
        }
        Ok(Context {
            inner: Arc::new(ContextInner { raw }),
        })
    }

    /// What `ucp_context_print_info` writes (the resource table).
    pub fn print_info(&self) -> Option<String> {
        let raw = self.inner.raw;
        // SAFETY: the context is live; the stream is an open FILE* (libc's
        // and UCX's FILE are the same C type).
        printed(|f| unsafe { sys::ucp_context_print_info(raw, f.cast()) })
    }

    /// The raw handle, for the other resources of this layer.
    pub(super) fn raw(&self) -> sys::ucp_context_h {
        self.inner.raw
    }
}

/// UCX's version string, e.g. `1.13.1`.
pub(crate) fn version() -> String {
    // SAFETY: returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::ucp_get_version_string()) }
        .to_string_lossy()
        .into_owned()
}

/// `ucs_status_string(status)`.
pub(crate) fn status_string(status: sys::ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a pointer to a static, NUL-terminated
    // string for every status value (unknown codes map to a static too).
    unsafe { CStr::from_ptr(sys::ucs_status_string(status)) }
        .to_string_lossy()
        .into_owned()
}

/// What a `*_print_info(…, FILE*)` call writes, as a string. `print` gets
/// an open stream and must only write to it.
pub(super) fn printed(print: impl FnOnce(*mut libc::FILE)) -> Option<String> {
    let mut buf: *mut libc::c_char = ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream allocates a growing buffer; buf/len are
    // updated on fflush/fclose.
    let f = unsafe { libc::open_memstream(&mut buf, &mut len) };
    if f.is_null() {
        return None;
    }
    print(f);
    // SAFETY: f is closed once; afterwards buf holds len bytes.
    unsafe { libc::fclose(f) };
    if buf.is_null() {
        return None;
    }
    // SAFETY: buf holds len initialised bytes written by the stream.
    let text =
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(buf as *const u8, len) })
            .into_owned();
    // SAFETY: buf was malloc'd by open_memstream and is freed once.
    unsafe { libc::free(buf.cast()) };
    Some(text)
}
