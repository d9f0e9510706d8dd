//! The UCP context and worker: configuration (transports, devices),
//! features, the worker address and its wake-up file descriptor.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::ptr;

use ovbench_core::{OpKind, TransportError};
use ovbench_ucx_sys as sys;

use crate::status::{check, local};

/// The effective UCX settings, for the header.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// Transport/device pairs the context found (`tcp/lo`, `posix/memory`).
    pub resources: Vec<String>,
    /// `UCX_TLS` as UCX will use it (ours, the user's, or UCX's default).
    pub tls: String,
    /// `UCX_NET_DEVICES` likewise.
    pub net_devices: String,
}

/// One UCP context with one worker; destroyed in the right order on drop.
pub(crate) struct Ucp {
    pub context: sys::ucp_context_h,
    pub worker: sys::ucp_worker_h,
    pub address: Vec<u8>,
    pub efd: RawFd,
    pub settings: Settings,
}

/// Compute the transport list and devices: `--ucx-tls` wins (with `self`
/// added so a rank can reach itself), then the user's `UCX_TLS`, then
/// UCX's default. Network devices default to `lo` when tcp is in the list
/// and neither `--ucx-net-devices` nor `UCX_NET_DEVICES` says otherwise,
/// so tcp does not bind the first Ethernet interface.
pub(crate) fn settings(tls: Option<&str>, net_devices: Option<&str>) -> Settings {
    let env_tls = std::env::var("UCX_TLS").ok();
    let tls = match tls {
        Some(t) => {
            let mut list: Vec<&str> = t.split(',').filter(|s| !s.is_empty()).collect();
            if !list.iter().any(|s| *s == "self" || *s == "all") {
                list.push("self");
            }
            list.join(",")
        }
        None => env_tls.unwrap_or_else(|| "all".to_string()),
    };
    let env_dev = std::env::var("UCX_NET_DEVICES").ok();
    let net_devices = match (net_devices, env_dev) {
        (Some(d), _) => d.to_string(),
        (None, Some(d)) => d,
        (None, None) if tls.split(',').any(|s| s == "tcp") => "lo".to_string(),
        (None, None) => "all".to_string(),
    };
    Settings {
        resources: Vec::new(),
        tls,
        net_devices,
    }
}

impl Ucp {
    /// Read UCX's configuration, apply `settings`, create the context
    /// (AM, RMA, TAG, WAKEUP) and one worker.
    pub fn new(settings: Settings, multi_thread: bool) -> Result<Ucp, TransportError> {
        let mut config: *mut sys::ucp_config_t = ptr::null_mut();
        // SAFETY: NULL env prefix and file name ask for the defaults plus
        // the UCX_* environment; config receives a new handle.
        let st = unsafe { sys::ucp_config_read(ptr::null(), ptr::null(), &mut config) };
        check(OpKind::Connect, "ucp_config_read", st)?;
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
        let applied =
            apply("TLS", &settings.tls).and_then(|()| apply("NET_DEVICES", &settings.net_devices));
        let mut context: sys::ucp_context_h = ptr::null_mut();
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
            // SAFETY: params and config are valid; context receives the handle.
            unsafe { sys::ucp_init(&params, config, &mut context) }
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
                    " with UCX_TLS={} UCX_NET_DEVICES={}; pick transports that exist here (`ucx_info -d`) with --ucx-tls",
                    settings.tls, settings.net_devices
                ),
            ));
        }
        // SAFETY: context is live; the stream is an open FILE*.
        let table =
            crate::lanes::printed(|f| unsafe { sys::ucp_context_print_info(context, f.cast()) });
        let resources = table
            .as_deref()
            .map(crate::lanes::resources)
            .unwrap_or_default();
        let mut settings = settings;
        settings.resources = resources;
        let mut ucp = Ucp {
            context,
            worker: ptr::null_mut(),
            address: Vec::new(),
            efd: -1,
            settings,
        };
        // UCX only warns about names it does not know and carries on with
        // the rest; left with nothing but `self`, no peer is reachable.
        let only_self = ucp
            .settings
            .resources
            .iter()
            .all(|r| r.starts_with("self/"));
        if only_self && ucp.settings.tls.split(',').any(|t| t != "self") {
            return Err(TransportError::Local {
                op: OpKind::Connect,
                detail: format!(
                    "UCX found no usable transport in UCX_TLS={} (UCX_NET_DEVICES={}) besides self; `ucx_info -d` lists the transports and devices this UCX has",
                    ucp.settings.tls, ucp.settings.net_devices
                ),
            });
        }
        let wparams = sys::ucp_worker_params_t {
            field_mask: sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64,
            thread_mode: if multi_thread {
                sys::UCS_THREAD_MODE_MULTI
            } else {
                sys::UCS_THREAD_MODE_SINGLE
            },
            ..Default::default()
        };
        // SAFETY: context is live; worker receives the handle.
        let st = unsafe { sys::ucp_worker_create(ucp.context, &wparams, &mut ucp.worker) };
        check(OpKind::Connect, "ucp_worker_create", st)?;

        let mut addr: *mut sys::ucp_address_t = ptr::null_mut();
        let mut alen = 0usize;
        // SAFETY: worker is live; addr/alen receive a UCX-owned buffer.
        let st = unsafe { sys::ucp_worker_get_address(ucp.worker, &mut addr, &mut alen) };
        check(OpKind::Connect, "ucp_worker_get_address", st)?;
        // SAFETY: UCX returned alen readable bytes at addr.
        ucp.address = unsafe { std::slice::from_raw_parts(addr as *const u8, alen) }.to_vec();
        // SAFETY: addr came from ucp_worker_get_address on this worker.
        unsafe { sys::ucp_worker_release_address(ucp.worker, addr) };

        let mut efd: libc::c_int = -1;
        // SAFETY: worker is live and was created with WAKEUP.
        let st = unsafe { sys::ucp_worker_get_efd(ucp.worker, &mut efd) };
        check(OpKind::Connect, "ucp_worker_get_efd", st)?;
        ucp.efd = efd;
        Ok(ucp)
    }

    /// Drive the worker once; returns whether anything happened.
    pub fn progress(&self) -> bool {
        // SAFETY: worker is live for the life of self.
        unsafe { sys::ucp_worker_progress(self.worker) != 0 }
    }

    /// Arm the wake-up fd; `false` means events are already pending.
    pub fn arm(&self) -> Result<bool, TransportError> {
        // SAFETY: worker is live and has WAKEUP.
        let st = unsafe { sys::ucp_worker_arm(self.worker) };
        match st {
            sys::UCS_OK => Ok(true),
            sys::UCS_ERR_BUSY => Ok(false),
            _ => Err(local(OpKind::Poll, "ucp_worker_arm", st, "")),
        }
    }

    /// Wake a thread blocked on the efd.
    pub fn signal(&self) {
        // SAFETY: worker is live; ucp_worker_signal is thread-safe.
        unsafe { sys::ucp_worker_signal(self.worker) };
    }
}

impl Ucp {
    /// Give up the worker and context without destroying them: destroying
    /// a worker whose endpoints never finished wire-up closes them, which
    /// is what aborts inside UCX. The process leaks them (it is about to
    /// report the failed connect and exit).
    pub fn abandon(&mut self) {
        self.worker = ptr::null_mut();
        self.context = ptr::null_mut();
    }
}

/// UCX's version string, e.g. `1.13.1`.
pub(crate) fn version() -> String {
    // SAFETY: returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::ucp_get_version_string()) }
        .to_string_lossy()
        .into_owned()
}

impl Drop for Ucp {
    fn drop(&mut self) {
        if !self.worker.is_null() {
            // SAFETY: endpoints, memory maps and rkeys were released by the
            // transport before this drop; the worker is destroyed once.
            unsafe { sys::ucp_worker_destroy(self.worker) };
        }
        if !self.context.is_null() {
            // SAFETY: the worker is gone; the context is cleaned up once.
            unsafe { sys::ucp_cleanup(self.context) };
        }
    }
}
