//! Reliable-connected queue pairs: creation, the INIT → RTR → RTS
//! transitions, and posting work.

use std::io;
use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::cq::CqInner;
use crate::pd::PdInner;
use crate::{CompletionQueue, ProtectionDomain, VerbsError};

/// An RC queue pair; keeps its PD and CQ alive.
pub struct QueuePair {
    raw: *mut sys::ibv_qp,
    device: String,
    _pd: Arc<PdInner>,
    _cq: Arc<CqInner>,
    /// The capabilities the provider actually granted.
    pub cap: QpCap,
}

// SAFETY: posting to a QP is thread-safe in libibverbs; &mut serialises our use.
unsafe impl Send for QueuePair {}

/// Queue sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_inline_data: u32,
}

/// What RTR needs to know about the remote side.
#[derive(Clone, Copy, Debug)]
pub struct RtrAttr {
    pub port: u8,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    /// `ibv_mtu` enum value.
    pub mtu: u32,
    pub dlid: u16,
    /// Use a GRH (RoCE always; IB across subnets).
    pub global: bool,
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub sl: u8,
    pub traffic_class: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
}

/// What RTS needs.
#[derive(Clone, Copy, Debug)]
pub struct RtsAttr {
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
}

/// A local scatter/gather entry.
#[derive(Clone, Copy, Debug)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

impl Sge {
    /// As libibverbs takes it (both posting calls build one).
    fn raw(self) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: self.addr,
            length: self.len,
            lkey: self.lkey,
        }
    }
}

/// The operation of a send-queue work request.
#[derive(Clone, Copy, Debug)]
pub enum SendOp {
    Send,
    Write { remote_addr: u64, rkey: u32 },
    Read { remote_addr: u64, rkey: u32 },
}

impl QueuePair {
    /// Create an RC QP on `pd` whose send and receive completions go to `cq`.
    pub fn new_rc(
        pd: &ProtectionDomain,
        cq: &CompletionQueue,
        want: QpCap,
    ) -> Result<QueuePair, VerbsError> {
        let mut attr = sys::ibv_qp_init_attr {
            send_cq: cq.inner.raw,
            recv_cq: cq.inner.raw,
            cap: sys::ibv_qp_cap {
                max_send_wr: want.max_send_wr,
                max_recv_wr: want.max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: want.max_inline_data,
            },
            qp_type: sys::IBV_QPT_RC,
            sq_sig_all: 0,
            ..Default::default()
        };
        // SAFETY: live PD and CQ; attr valid (cap is updated in place).
        let raw = unsafe { sys::ibv_create_qp(pd.inner.raw, &mut attr) };
        let raw = VerbsError::created(raw, "ibv_create_qp (RC)", pd.device())?;
        Ok(QueuePair {
            raw,
            device: pd.device().to_string(),
            _pd: pd.inner.clone(),
            _cq: cq.inner.clone(),
            cap: QpCap {
                max_send_wr: attr.cap.max_send_wr,
                max_recv_wr: attr.cap.max_recv_wr,
                max_inline_data: attr.cap.max_inline_data,
            },
        })
    }

    /// The QP number peers address.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: raw is live; qp_num is a plain field.
        unsafe { (*self.raw).qp_num }
    }

    fn modify(
        &self,
        attr: &mut sys::ibv_qp_attr,
        mask: sys::ibv_qp_attr_mask,
        what: &'static str,
    ) -> Result<(), VerbsError> {
        // SAFETY: live QP; attr valid for the fields named by mask.
        let rc = unsafe { sys::ibv_modify_qp(self.raw, attr, mask as i32) };
        if rc != 0 {
            return Err(VerbsError::call(
                what,
                &self.device,
                io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(())
    }

    /// Apply attributes computed elsewhere (rdma_cm's `rdma_init_qp_attr`).
    pub(crate) fn modify_raw(
        &self,
        attr: &mut sys::ibv_qp_attr,
        mask: std::os::raw::c_int,
    ) -> Result<(), VerbsError> {
        // SAFETY: live QP; attr valid for the fields named by mask.
        let rc = unsafe { sys::ibv_modify_qp(self.raw, attr, mask) };
        if rc != 0 {
            return Err(VerbsError::call(
                "ibv_modify_qp (attributes from rdma_init_qp_attr)",
                &self.device,
                io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(())
    }

    /// RESET → INIT, allowing remote read and write.
    pub fn to_init(&self, port: u8) -> Result<(), VerbsError> {
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: port,
            qp_access_flags: (sys::IBV_ACCESS_LOCAL_WRITE
                | sys::IBV_ACCESS_REMOTE_WRITE
                | sys::IBV_ACCESS_REMOTE_READ),
            ..Default::default()
        };
        self.modify(
            &mut a,
            sys::IBV_QP_STATE
                | sys::IBV_QP_PKEY_INDEX
                | sys::IBV_QP_PORT
                | sys::IBV_QP_ACCESS_FLAGS,
            "ibv_modify_qp(INIT)",
        )
    }

    /// INIT → RTR.
    pub fn to_rtr(&self, r: &RtrAttr) -> Result<(), VerbsError> {
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTR,
            path_mtu: r.mtu,
            dest_qp_num: r.dest_qpn,
            rq_psn: r.rq_psn,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            ..Default::default()
        };
        a.ah_attr.dlid = r.dlid;
        a.ah_attr.sl = r.sl;
        a.ah_attr.port_num = r.port;
        if r.global {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = r.dgid;
            a.ah_attr.grh.sgid_index = r.sgid_index;
            a.ah_attr.grh.hop_limit = 64;
            a.ah_attr.grh.traffic_class = r.traffic_class;
        }
        self.modify(
            &mut a,
            sys::IBV_QP_STATE
                | sys::IBV_QP_AV
                | sys::IBV_QP_PATH_MTU
                | sys::IBV_QP_DEST_QPN
                | sys::IBV_QP_RQ_PSN
                | sys::IBV_QP_MAX_DEST_RD_ATOMIC
                | sys::IBV_QP_MIN_RNR_TIMER,
            "ibv_modify_qp(RTR)",
        )
    }

    /// RTR → RTS.
    pub fn to_rts(&self, r: &RtsAttr) -> Result<(), VerbsError> {
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTS,
            sq_psn: r.sq_psn,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            max_rd_atomic: r.max_rd_atomic,
            ..Default::default()
        };
        self.modify(
            &mut a,
            sys::IBV_QP_STATE
                | sys::IBV_QP_SQ_PSN
                | sys::IBV_QP_TIMEOUT
                | sys::IBV_QP_RETRY_CNT
                | sys::IBV_QP_RNR_RETRY
                | sys::IBV_QP_MAX_QP_RD_ATOMIC,
            "ibv_modify_qp(RTS)",
        )
    }

    /// Post one signaled send-queue work request.
    ///
    /// # Safety
    /// `local` must describe memory registered under `lkey` that stays
    /// allocated, and (for reads) untouched, until this request's
    /// completion is polled. With `inline`, the bytes are copied during the
    /// call and `len` must not exceed [`QpCap::max_inline_data`].
    pub unsafe fn post_send(
        &mut self,
        wr_id: u64,
        op: SendOp,
        local: Sge,
        inline: bool,
    ) -> io::Result<()> {
        let mut sge = local.raw();
        let mut wr = sys::ibv_send_wr {
            wr_id,
            sg_list: &mut sge,
            num_sge: if local.len == 0 { 0 } else { 1 },
            ..Default::default()
        };
        let mut flags = sys::IBV_SEND_SIGNALED;
        if inline {
            flags |= sys::IBV_SEND_INLINE;
        }
        wr.send_flags = flags;
        match op {
            SendOp::Send => wr.opcode = sys::IBV_WR_SEND,
            SendOp::Write { remote_addr, rkey } => {
                wr.opcode = sys::IBV_WR_RDMA_WRITE;
                wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
            SendOp::Read { remote_addr, rkey } => {
                wr.opcode = sys::IBV_WR_RDMA_READ;
                wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
        }
        let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: live QP; wr and sge live across the call; the caller
        // guarantees the memory rules above.
        let rc = unsafe { sys::ibv_post_send(self.raw, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Post one receive buffer.
    ///
    /// # Safety
    /// `local` must be registered under `lkey`, stay allocated and not be
    /// read or written by the program until its completion is polled.
    pub unsafe fn post_recv(&mut self, wr_id: u64, local: Sge) -> io::Result<()> {
        let mut sge = local.raw();
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: live QP; wr and sge live across the call; memory rules per the caller.
        let rc = unsafe { sys::ibv_post_recv(self.raw, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: raw is owned and destroyed once, before its PD and CQ (held by Arc).
        unsafe { sys::ibv_destroy_qp(self.raw) };
    }
}
