//! An opened device: attribute and port queries, the NIC clock, and the
//! parent of every other verbs resource.

use std::ffi::CStr;
use std::io;
use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::owned::Owned;
use crate::{CompChannel, ProtectionDomain, VerbsError};

/// The opened device, kept with its name (for messages); every child
/// holds an Arc to it.
pub(crate) type ContextInner = Owned<sys::ibv_context, String>;

impl ContextInner {
    /// The device name.
    pub(crate) fn name(&self) -> &str {
        &self.with
    }
}

/// An opened RDMA device.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

/// The device attributes ovbench uses.
#[derive(Clone, Debug)]
pub struct DeviceAttr {
    pub phys_port_cnt: u8,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    pub max_sge: u32,
    /// Outstanding RDMA reads a QP may have as initiator / as target.
    pub max_qp_init_rd_atom: u8,
    pub max_qp_rd_atom: u8,
    /// Mask of valid completion-timestamp bits; 0 when the NIC has none.
    pub completion_timestamp_mask: u64,
    /// NIC core clock in kHz; 0 when unknown.
    pub hca_core_clock_khz: u64,
    pub fw_ver: String,
}

/// One port's state.
#[derive(Clone, Debug)]
pub struct PortAttr {
    pub active: bool,
    pub state: u32,
    pub lid: u16,
    /// The `ibv_mtu` enum value (1 = 256 B … 5 = 4096 B).
    pub active_mtu: u32,
    pub ethernet: bool,
    pub gid_tbl_len: u32,
}

impl Context {
    /// # Safety
    /// `raw` must be an open context that nobody else will close.
    pub(crate) unsafe fn from_raw(raw: *mut sys::ibv_context, name: String) -> Context {
        // SAFETY: the caller hands over an open context nobody else
        // closes; libibverbs contexts are thread-safe (it locks internally).
        let inner = unsafe { Owned::new(raw, sys::ibv_close_device, name) };
        Context {
            inner: Arc::new(inner),
        }
    }

    /// The device name (`rxe0`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    fn err(&self, call: &'static str, e: io::Error) -> VerbsError {
        VerbsError::call(call, self.inner.name(), e)
    }

    /// Query the device (extended attributes where the provider has them).
    pub fn query(&self) -> Result<DeviceAttr, VerbsError> {
        let mut ex = sys::ibv_device_attr_ex::default();
        // SAFETY: raw is a live context; a NULL input is allowed; ex is a valid out-struct.
        let rc = unsafe { sys::ibv_query_device_ex(self.inner.raw, std::ptr::null(), &mut ex) };
        if rc != 0 {
            let mut a = sys::ibv_device_attr::default();
            // SAFETY: as above, for the basic query.
            let rc2 = unsafe { sys::ibv_query_device(self.inner.raw, &mut a) };
            if rc2 != 0 {
                return Err(self.err("ibv_query_device", io::Error::from_raw_os_error(rc2)));
            }
            ex = sys::ibv_device_attr_ex {
                orig_attr: a,
                ..Default::default()
            };
        }
        let a = &ex.orig_attr;
        // SAFETY: fw_ver is a NUL-terminated char array filled by the provider
        // (zeroed by Default when the query did not set it).
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) };
        Ok(DeviceAttr {
            phys_port_cnt: a.phys_port_cnt,
            max_qp_wr: a.max_qp_wr.max(0) as u32,
            max_cqe: a.max_cqe.max(0) as u32,
            max_sge: a.max_sge.max(0) as u32,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom.clamp(0, 255) as u8,
            max_qp_rd_atom: a.max_qp_rd_atom.clamp(0, 255) as u8,
            completion_timestamp_mask: ex.completion_timestamp_mask,
            hca_core_clock_khz: ex.hca_core_clock,
            fw_ver: fw.to_string_lossy().into_owned(),
        })
    }

    /// Query port `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        let mut p = sys::ibv_port_attr::default();
        // SAFETY: live context, valid out-struct; the provider checks the port number.
        let rc = unsafe { sys::___ibv_query_port(self.inner.raw, port, &mut p) };
        if rc != 0 {
            return Err(self.err("ibv_query_port", io::Error::from_raw_os_error(rc)));
        }
        Ok(PortAttr {
            active: p.state == sys::IBV_PORT_ACTIVE,
            state: p.state,
            lid: p.lid,
            active_mtu: p.active_mtu,
            ethernet: u32::from(p.link_layer) == sys::IBV_LINK_LAYER_ETHERNET,
            gid_tbl_len: p.gid_tbl_len.max(0) as u32,
        })
    }

    /// GID `index` of `port`.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16], VerbsError> {
        let mut g = sys::ibv_gid::default();
        let idx = libc::c_int::try_from(index)
            .map_err(|_| VerbsError::Config(format!("GID index {index} is out of range")))?;
        // SAFETY: live context, valid out-union.
        let rc = unsafe { sys::ibv_query_gid(self.inner.raw, port, idx, &mut g) };
        if rc != 0 {
            return Err(self.err("ibv_query_gid", io::Error::last_os_error()));
        }
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { g.raw })
    }

    /// The NIC's free-running clock (raw ticks), when the provider offers it.
    pub fn raw_clock(&self) -> Option<u64> {
        let mut v = sys::ibv_values_ex {
            comp_mask: sys::IBV_VALUES_MASK_RAW_CLOCK,
            ..Default::default()
        };
        // SAFETY: live context, valid in/out struct.
        let rc = unsafe { sys::ibv_query_rt_values_ex(self.inner.raw, &mut v) };
        if rc != 0 || v.comp_mask & sys::IBV_VALUES_MASK_RAW_CLOCK == 0 {
            return None;
        }
        Some((v.raw_clock.tv_sec as u64).wrapping_mul(1_000_000_000) + v.raw_clock.tv_nsec as u64)
    }

    /// A protection domain on this device.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, VerbsError> {
        ProtectionDomain::new(self)
    }

    /// A completion channel (a file descriptor to sleep on).
    pub fn comp_channel(&self) -> Result<CompChannel, VerbsError> {
        CompChannel::new(self)
    }
}
