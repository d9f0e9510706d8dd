//! Provider selection (`fi_getinfo`) and the objects one rank needs:
//! fabric, domain, an `FI_EP_RDM` endpoint, an address vector and one
//! completion queue for both directions. Closed in reverse order on drop.

use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use ovbench_core::{OpKind, TransportError};
use ovbench_ofi_sys as sys;

use crate::error::{check, fi_str, local};
use crate::shm_name;

/// libfabric API version ovbench is written against (1.10 semantics).
const API_VERSION: u32 = sys::fi_version_of(1, 10);
/// Largest address accepted from a peer (bytes).
const MAX_ADDR: usize = 1024;
/// Completion queue depth.
const CQ_SIZE: usize = 4096;
/// Smallest universe size ovbench gives libfabric.
const MIN_UNIVERSE: usize = 16;
/// libfabric's environment variable for the number of peer processes.
const UNIVERSE_VAR: &str = "FI_UNIVERSE_SIZE";

/// How many peers libfabric sizes its resources for (`FI_UNIVERSE_SIZE`).
#[derive(Clone, Debug)]
pub(crate) struct Universe {
    /// The value in effect (`None`: the user's value does not parse, and
    /// libfabric decides what it means).
    pub size: Option<usize>,
    /// Whether ovbench chose it (the variable was unset).
    pub ours: bool,
}

impl Universe {
    /// One line for the header.
    pub fn describe(&self) -> String {
        match (self.size, self.ours) {
            (Some(n), true) => format!(
                "{n} (FI_UNIVERSE_SIZE was unset: ovbench set it to the rank count, at least {MIN_UNIVERSE}; ofi_rxm sizes its core provider's completion queue for this many peers, and libfabric's default of 256 exceeds soft-RoCE's max_cqe)"
            ),
            (Some(n), false) => format!("{n} (FI_UNIVERSE_SIZE from the environment)"),
            (None, _) => "FI_UNIVERSE_SIZE from the environment, not a number".into(),
        }
    }
}

/// Give libfabric a universe size before its first call in this process.
///
/// ofi_rxm sizes the completion queue of its core provider as
/// `(msg rx size + msg tx size) × universe size`; with libfabric's default
/// universe of 256 that is 65536 entries over verbs, which soft-RoCE
/// (rxe, `max_cqe` 32767) refuses, so `verbs;ofi_rxm` could not open
/// (ofiwg/libfabric#10692). No `fi_info` attribute bounds it: libfabric
/// reads `FI_UNIVERSE_SIZE` once, when it initialises on the first
/// `fi_getinfo`. So, when the user has not set it, ovbench sets it to the
/// run's rank count (at least [`MIN_UNIVERSE`]) here, once per process
/// and before any libfabric call of this crate; a value the user set is
/// left alone. The first transport opened in a process decides.
pub(crate) fn universe(ranks: u32) -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(|| match std::env::var(UNIVERSE_VAR) {
        Ok(v) => Universe {
            size: v.trim().parse().ok(),
            ours: false,
        },
        Err(_) => {
            let n = (ranks as usize).max(MIN_UNIVERSE);
            // Changing the environment races with C code reading it on
            // another thread (getenv is not synchronised with setenv).
            // This runs once, before this process's first libfabric call
            // (which is what reads it), inside a OnceLock that holds back
            // every other rank of the process; Rust's own env readers take
            // std's lock.
            std::env::set_var(UNIVERSE_VAR, n.to_string());
            Universe {
                size: Some(n),
                ours: true,
            }
        }
    })
}

/// What the chosen provider offers, read from its `fi_info`.
#[derive(Clone, Debug)]
pub(crate) struct Attrs {
    pub provider: String,
    pub fabric: String,
    pub domain: String,
    pub mr_mode: u32,
    pub inject_size: usize,
    pub data_progress_auto: bool,
    /// The provider offers `FI_DELIVERY_COMPLETE` on this endpoint.
    pub delivery_complete: bool,
    /// The provider offers `FI_MATCH_COMPLETE` (completion once matched
    /// with a posted receive: a synchronous send).
    pub match_complete: bool,
    pub addr_len: usize,
    pub addr_format: u32,
    pub wait_fd: Option<libc::c_int>,
    pub max_msg_size: usize,
    /// The universe size libfabric was initialised with.
    pub universe: Universe,
}

/// The libfabric objects of one rank.
pub(crate) struct Fabric {
    pub fabric: *mut sys::fid_fabric,
    pub domain: *mut sys::fid_domain,
    pub ep: *mut sys::fid_ep,
    pub av: *mut sys::fid_av,
    pub cq: *mut sys::fid_cq,
    pub attrs: Attrs,
    pub address: Vec<u8>,
}

/// Query providers matching the hints; returns the list (caller frees).
fn getinfo(provider: &str, node: Option<&str>, op_flags: u64) -> Result<*mut sys::fi_info, i32> {
    // SAFETY: fi_allocinfo returns a zeroed fi_info with its sub-attributes
    // allocated, or NULL.
    let hints = unsafe { sys::fi_allocinfo() };
    if hints.is_null() {
        return Err(-(libc::ENOMEM));
    }
    let prov = CString::new(provider).map_err(|_| -(libc::EINVAL))?;
    // SAFETY: hints and its attribute structs were allocated by
    // fi_allocinfo; prov_name is strdup'd so fi_freeinfo can free it.
    unsafe {
        let h = &mut *hints;
        h.caps = u64::from(sys::FI_MSG | sys::FI_RMA | sys::FI_TAGGED);
        h.mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
        (*h.ep_attr).type_ = sys::FI_EP_RDM;
        (*h.domain_attr).mr_mode =
            (sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY) as libc::c_int;
        (*h.domain_attr).threading = sys::FI_THREAD_DOMAIN;
        (*h.tx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
        (*h.rx_attr).msg_order = u64::from(sys::FI_ORDER_SAS);
        (*h.tx_attr).op_flags = op_flags;
        (*h.fabric_attr).prov_name = libc::strdup(prov.as_ptr());
    }
    let node_c = node.map(|n| CString::new(n).expect("no NUL in node"));
    let mut info: *mut sys::fi_info = ptr::null_mut();
    let flags = if node_c.is_some() { sys::FI_SOURCE } else { 0 };
    // SAFETY: hints is a valid fi_info; node is NUL-terminated or NULL;
    // info receives a list the caller frees.
    let rc = unsafe {
        sys::fi_getinfo(
            API_VERSION,
            node_c.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            ptr::null(),
            flags,
            hints,
            &mut info,
        )
    };
    // SAFETY: hints came from fi_allocinfo and is freed once.
    unsafe { sys::fi_freeinfo(hints) };
    if rc != 0 {
        return Err(rc);
    }
    Ok(info)
}

fn cstr(p: *const libc::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric strings in fi_info are NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Fabric {
    /// Pick the first provider entry matching `provider` (bound to `node`
    /// where it takes an address) and open everything.
    /// `wait_fd`: give the completion queue a file-descriptor wait object
    /// (for a progress thread that sleeps on it). Without one the CQ is
    /// poll-only, as fi_pingpong's: with tcp;ofi_rxm an fd-backed CQ cost a
    /// signalling write and a read on every completion (~0.9 µs of a
    /// 9 µs one-way 8-byte latency).
    /// `ranks`: the run's rank count, libfabric's universe size unless
    /// the user set `FI_UNIVERSE_SIZE` (see [`universe`]).
    pub fn open(
        provider: &str,
        node: Option<&str>,
        wait_fd: bool,
        ranks: u32,
    ) -> Result<Fabric, TransportError> {
        let universe = universe(ranks).clone();
        let dc_flag = u64::from(sys::FI_DELIVERY_COMPLETE);
        let mc_flag = u64::from(sys::FI_MATCH_COMPLETE);
        // Does the provider know match completion at all?
        let mc = match getinfo(provider, node, mc_flag) {
            Ok(i) => {
                // SAFETY: i came from fi_getinfo and is freed once.
                unsafe { sys::fi_freeinfo(i) };
                true
            }
            Err(_) => false,
        };
        // Learn whether the provider offers delivery completion (used per
        // operation; the endpoint's defaults stay cheap).
        let (info, dc) = match getinfo(provider, node, dc_flag) {
            Ok(i) => (i, true),
            Err(_) => match getinfo(provider, node, 0) {
                Ok(i) => (i, false),
                Err(rc) => {
                    return Err(local(
                        OpKind::Connect,
                        &format!("fi_getinfo(provider {provider:?}, node {node:?}, FI_EP_RDM, FI_MSG|FI_RMA|FI_TAGGED)"),
                        i64::from(rc),
                        "; `fi_info -l` lists the providers this libfabric has (try tcp;ofi_rxm, shm or sockets)",
                    ))
                }
            },
        };
        let r = Self::open_info(info, dc, wait_fd).map(|mut f| {
            f.attrs.match_complete = mc;
            f.attrs.universe = universe;
            f
        });
        // SAFETY: info came from fi_getinfo and is freed once; open_info
        // copied what it needs.
        unsafe { sys::fi_freeinfo(info) };
        r
    }

    fn open_info(
        info: *mut sys::fi_info,
        dc: bool,
        wait_fd: bool,
    ) -> Result<Fabric, TransportError> {
        // SAFETY: info is a valid list entry from fi_getinfo.
        let i = unsafe { &*info };
        // SAFETY: the attribute pointers of a returned fi_info are valid.
        let (fa, da, tx, ep_attr) =
            unsafe { (&*i.fabric_attr, &*i.domain_attr, &*i.tx_attr, &*i.ep_attr) };
        let mut f = Fabric {
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            ep: ptr::null_mut(),
            av: ptr::null_mut(),
            cq: ptr::null_mut(),
            attrs: Attrs {
                provider: cstr(fa.prov_name),
                fabric: cstr(fa.name),
                domain: cstr(da.name),
                mr_mode: da.mr_mode as u32,
                inject_size: tx.inject_size,
                data_progress_auto: da.data_progress == sys::FI_PROGRESS_AUTO,
                delivery_complete: dc,
                match_complete: false,
                addr_len: 0,
                addr_format: i.addr_format,
                wait_fd: None,
                max_msg_size: ep_attr.max_msg_size,
                universe: Universe {
                    size: None,
                    ours: false,
                },
            },
            address: Vec::new(),
        };
        // Writes and synchronous sends ask for delivery completion per
        // operation; everything else keeps the cheaper default.
        // SAFETY: tx_attr of a returned fi_info is valid and ours to edit.
        unsafe { (*i.tx_attr).op_flags = 0 };
        // SAFETY: fabric_attr is valid; f.fabric receives the handle.
        check(OpKind::Connect, "fi_fabric", unsafe {
            sys::fi_fabric(i.fabric_attr, &mut f.fabric, ptr::null_mut())
        })?;
        // SAFETY: fabric is open; info describes this domain.
        check(OpKind::Connect, "fi_domain", unsafe {
            sys::fi_domain(f.fabric, info, &mut f.domain, ptr::null_mut())
        })?;
        let mut cq_attr = sys::fi_cq_attr {
            size: CQ_SIZE,
            format: sys::FI_CQ_FORMAT_TAGGED,
            wait_obj: if wait_fd {
                sys::FI_WAIT_FD
            } else {
                sys::FI_WAIT_NONE
            },
            ..Default::default()
        };
        // SAFETY: domain is open; cq receives the handle.
        let rc = unsafe { sys::fi_cq_open(f.domain, &mut cq_attr, &mut f.cq, ptr::null_mut()) };
        if !wait_fd {
            check(OpKind::Connect, "fi_cq_open", rc)?;
        } else if rc != 0 {
            // Providers without wait objects: poll-only CQ.
            cq_attr.wait_obj = sys::FI_WAIT_NONE;
            // SAFETY: as above.
            check(OpKind::Connect, "fi_cq_open", unsafe {
                sys::fi_cq_open(f.domain, &mut cq_attr, &mut f.cq, ptr::null_mut())
            })?;
        } else {
            let mut fd: libc::c_int = -1;
            // SAFETY: cq is open with FI_WAIT_FD; FI_GETWAIT writes an int.
            let rc = unsafe {
                sys::fi_control(
                    &mut (*f.cq).fid,
                    sys::FI_GETWAIT as i32,
                    (&mut fd as *mut libc::c_int).cast(),
                )
            };
            if rc == 0 && fd >= 0 {
                f.attrs.wait_fd = Some(fd);
            }
        }
        let mut av_attr = sys::fi_av_attr {
            type_: sys::FI_AV_TABLE,
            ..Default::default()
        };
        // SAFETY: domain is open; av receives the handle.
        check(OpKind::Connect, "fi_av_open", unsafe {
            sys::fi_av_open(f.domain, &mut av_attr, &mut f.av, ptr::null_mut())
        })?;
        // SAFETY: domain is open; info describes the endpoint.
        check(OpKind::Connect, "fi_endpoint", unsafe {
            sys::fi_endpoint(f.domain, info, &mut f.ep, ptr::null_mut())
        })?;
        // SAFETY: ep, cq and av are open objects of this domain.
        unsafe {
            check(
                OpKind::Connect,
                "fi_ep_bind(cq)",
                sys::fi_ep_bind(
                    f.ep,
                    &mut (*f.cq).fid,
                    u64::from(sys::FI_TRANSMIT | sys::FI_RECV),
                ),
            )?;
            check(
                OpKind::Connect,
                "fi_ep_bind(av)",
                sys::fi_ep_bind(f.ep, &mut (*f.av).fid, 0),
            )?;
            if f.attrs.provider == "shm" {
                let mut name = shm_name::unique();
                check(
                    OpKind::Connect,
                    "fi_setname",
                    sys::fi_setname(&mut (*f.ep).fid, name.as_mut_ptr().cast(), name.len()),
                )?;
            }
            check(OpKind::Connect, "fi_enable", sys::fi_enable(f.ep))?;
        }
        let mut buf = vec![0u8; MAX_ADDR - 1];
        let mut len = buf.len();
        // SAFETY: ep is enabled; buf has len writable bytes.
        let rc = unsafe { sys::fi_getname(&mut (*f.ep).fid, buf.as_mut_ptr().cast(), &mut len) };
        if rc != 0 {
            return Err(local(OpKind::Connect, "fi_getname", i64::from(rc), ""));
        }
        buf.truncate(len);
        f.attrs.addr_len = len;
        f.address = buf;
        Ok(f)
    }

    /// Insert every rank's address; returns the fi_addr of each.
    pub fn insert(&mut self, addrs: &[Vec<u8>]) -> Result<Vec<sys::fi_addr_t>, TransportError> {
        let mut out = Vec::with_capacity(addrs.len());
        for (r, a) in addrs.iter().enumerate() {
            // Fixed-format addresses (sockaddr) have one length; string
            // addresses (shm names) vary. Either way the bytes are copied
            // into a zeroed buffer so the provider cannot read past them.
            let fixed = self.attrs.addr_format != sys::FI_ADDR_STR;
            if a.is_empty() || a.len() >= MAX_ADDR || (fixed && a.len() != self.attrs.addr_len) {
                return Err(TransportError::Peer {
                    peer: r as u32,
                    op: OpKind::Connect,
                    status: format!(
                        "its {}-byte libfabric address does not fit this provider's {}-byte addresses; all ranks must use the same --provider",
                        a.len(),
                        self.attrs.addr_len
                    ),
                });
            }
            let mut padded = [0u8; MAX_ADDR];
            padded[..a.len()].copy_from_slice(a);
            let mut fa: sys::fi_addr_t = 0;
            // SAFETY: av is open; `padded` holds one address of the
            // provider's format, zero-terminated; fa receives the handle.
            let n = unsafe {
                sys::fi_av_insert(
                    self.av,
                    padded.as_ptr().cast(),
                    1,
                    &mut fa,
                    0,
                    ptr::null_mut(),
                )
            };
            if n != 1 {
                return Err(TransportError::Peer {
                    peer: r as u32,
                    op: OpKind::Connect,
                    status: format!("fi_av_insert returned {n} ({}); its address is not valid for this provider", fi_str(i64::from(n.min(0)))),
                });
            }
            out.push(fa);
        }
        Ok(out)
    }
}

impl Fabric {
    /// Close everything still open, children before parents: endpoint,
    /// then the address vector and completion queue it was bound to, then
    /// the domain and the fabric (fi_endpoint(3), fi_domain(3): a parent
    /// refuses to close, or worse, while a child lives). Registrations must
    /// be closed before ([`crate::memory::Memory::close_all`]). Idempotent.
    pub fn close(&mut self) {
        // SAFETY: each object is open (or null) and closed once: its
        // pointer is nulled as it goes.
        unsafe {
            if !self.ep.is_null() {
                sys::fi_close(&mut (*self.ep).fid);
                self.ep = ptr::null_mut();
            }
            if !self.av.is_null() {
                sys::fi_close(&mut (*self.av).fid);
                self.av = ptr::null_mut();
            }
            if !self.cq.is_null() {
                sys::fi_close(&mut (*self.cq).fid);
                self.cq = ptr::null_mut();
                self.attrs.wait_fd = None;
            }
            if !self.domain.is_null() {
                sys::fi_close(&mut (*self.domain).fid);
                self.domain = ptr::null_mut();
            }
            if !self.fabric.is_null() {
                sys::fi_close(&mut (*self.fabric).fid);
                self.fabric = ptr::null_mut();
            }
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.close();
    }
}
