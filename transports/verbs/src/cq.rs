//! Completion queues. The extended CQ (`ibv_create_cq_ex`) is used where
//! the provider has one, with NIC completion timestamps when the device
//! offers them; otherwise the classic `ibv_create_cq` / `ibv_poll_cq`.

use std::ffi::CStr;
use std::io;
use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::channel::ChannelInner;
use crate::context::ContextInner;
use crate::{CompChannel, Context, VerbsError};

pub(crate) struct CqInner {
    /// The classic view (also of an extended CQ, for QPs and notification).
    pub(crate) raw: *mut sys::ibv_cq,
    /// Set when created with `ibv_create_cq_ex`.
    ex: *mut sys::ibv_cq_ex,
    _channel: Option<Arc<ChannelInner>>,
    ctx: Arc<ContextInner>,
}

// SAFETY: CQs are thread-safe libibverbs objects (polling is serialised by &mut).
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: raw is owned; QPs using it hold an Arc to this, so none is left;
        // every event taken from the channel was acknowledged when taken.
        unsafe { sys::ibv_destroy_cq(self.raw) };
    }
}

/// One finished work request, copied out of the CQ.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkCompletion {
    pub wr_id: u64,
    /// `ibv_wc_status`; 0 is success.
    pub status: u32,
    /// `ibv_wc_opcode`, valid only on success.
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// The NIC's raw completion time, when the CQ records it.
    pub nic_ts: Option<u64>,
}

impl WorkCompletion {
    pub fn ok(&self) -> bool {
        self.status == sys::IBV_WC_SUCCESS
    }
    /// `ibv_wc_status_str` plus the numbers, for error messages.
    pub fn status_text(&self) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        let s = unsafe { CStr::from_ptr(sys::ibv_wc_status_str(self.status)) };
        format!(
            "{} (status {}, vendor error {:#x})",
            s.to_string_lossy(),
            self.status,
            self.vendor_err
        )
    }
}

/// How to build a CQ.
#[derive(Clone, Copy, Debug)]
pub struct CqConfig {
    pub cqe: u32,
    /// Try `ibv_create_cq_ex` first.
    pub extended: bool,
    /// Ask for completion timestamps (extended CQs only).
    pub timestamps: bool,
}

/// A completion queue and its polling state.
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
    timestamps: bool,
    wcs: Vec<sys::ibv_wc>,
}

impl CompletionQueue {
    /// Create a CQ on `ctx`, attached to `channel` if given.
    pub fn new(
        ctx: &Context,
        cfg: CqConfig,
        channel: Option<&CompChannel>,
    ) -> Result<CompletionQueue, VerbsError> {
        let ch_raw = channel.map_or(std::ptr::null_mut(), |c| c.inner.raw);
        let mut ex: *mut sys::ibv_cq_ex = std::ptr::null_mut();
        let mut timestamps = false;
        if cfg.extended {
            let tries: &[bool] = if cfg.timestamps {
                &[true, false]
            } else {
                &[false]
            };
            for &ts in tries {
                let mut flags =
                    sys::IBV_WC_EX_WITH_BYTE_LEN as u64 | sys::IBV_WC_EX_WITH_QP_NUM as u64;
                if ts {
                    flags |= sys::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP as u64;
                }
                let mut attr = sys::ibv_cq_init_attr_ex {
                    cqe: cfg.cqe,
                    channel: ch_raw,
                    wc_flags: flags,
                    ..Default::default()
                };
                // SAFETY: live context; attr is a valid in-struct; result owned or NULL.
                ex = unsafe { sys::ibv_create_cq_ex(ctx.inner.raw, &mut attr) };
                if !ex.is_null() {
                    timestamps = ts;
                    break;
                }
            }
        }
        let raw = if ex.is_null() {
            // SAFETY: live context; channel (or NULL) valid; result owned or NULL.
            let raw = unsafe {
                sys::ibv_create_cq(
                    ctx.inner.raw,
                    cfg.cqe as i32,
                    std::ptr::null_mut(),
                    ch_raw,
                    0,
                )
            };
            VerbsError::created(raw, "ibv_create_cq", ctx.name())?
        } else {
            // SAFETY: ex is a live extended CQ; the conversion is a pointer cast in C.
            unsafe { sys::ibv_cq_ex_to_cq(ex) }
        };
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                raw,
                ex,
                _channel: channel.map(|c| c.inner.clone()),
                ctx: ctx.inner.clone(),
            }),
            timestamps,
            wcs: vec![sys::ibv_wc::default(); 32],
        })
    }

    /// Whether completions carry NIC timestamps.
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }
    /// Whether this is an extended CQ.
    pub fn is_extended(&self) -> bool {
        !self.inner.ex.is_null()
    }

    fn err(&self, call: &'static str, e: io::Error) -> VerbsError {
        VerbsError::call(call, self.inner.ctx.name(), e)
    }

    /// Append up to `max` completions to `out`; never blocks.
    pub fn poll(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError> {
        if self.inner.ex.is_null() {
            self.poll_classic(out, max)
        } else {
            self.poll_ex(out, max)
        }
    }

    fn poll_classic(
        &mut self,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        let n = max.min(self.wcs.len()) as i32;
        // SAFETY: live CQ; wcs has room for n entries.
        let got = unsafe { sys::ibv_poll_cq(self.inner.raw, n, self.wcs.as_mut_ptr()) };
        if got < 0 {
            return Err(self.err("ibv_poll_cq", io::Error::other(format!("returned {got}"))));
        }
        for wc in &self.wcs[..got as usize] {
            out.push(WorkCompletion {
                wr_id: wc.wr_id,
                status: wc.status,
                opcode: wc.opcode,
                vendor_err: wc.vendor_err,
                byte_len: wc.byte_len,
                nic_ts: None,
            });
        }
        Ok(got as usize)
    }

    /// One entry per `ibv_start_poll` / `ibv_end_poll` session: rdma-core's
    /// rxe provider (v44) stores the consumer index when `ibv_next_poll`
    /// finds the queue empty and then advances it again in
    /// `ibv_end_poll`, skipping an entry; a session that never calls
    /// `ibv_next_poll` is correct on every provider.
    fn poll_ex(&mut self, out: &mut Vec<WorkCompletion>, max: usize) -> Result<usize, VerbsError> {
        let cq = self.inner.ex;
        let mut n = 0;
        while n < max {
            let mut attr = sys::ibv_poll_cq_attr::default();
            // SAFETY: live extended CQ; attr valid.
            let rc = unsafe { sys::ibv_start_poll(cq, &mut attr) };
            if rc == libc::ENOENT {
                break;
            }
            if rc != 0 {
                return Err(self.err("ibv_start_poll", io::Error::from_raw_os_error(rc)));
            }
            // SAFETY: start_poll returned 0, so a current entry exists; its
            // fields are read through the provider's accessors, then the
            // session is closed exactly once.
            let wc = unsafe {
                let status = (*cq).status;
                let ok = status == sys::IBV_WC_SUCCESS;
                let wc = WorkCompletion {
                    wr_id: (*cq).wr_id,
                    status,
                    opcode: if ok { sys::ibv_wc_read_opcode(cq) } else { 0 },
                    vendor_err: sys::ibv_wc_read_vendor_err(cq),
                    byte_len: if ok { sys::ibv_wc_read_byte_len(cq) } else { 0 },
                    nic_ts: (ok && self.timestamps).then(|| sys::ibv_wc_read_completion_ts(cq)),
                };
                sys::ibv_end_poll(cq);
                wc
            };
            out.push(wc);
            n += 1;
        }
        Ok(n)
    }

    /// Arm the CQ: the channel fires on the next completion.
    pub fn req_notify(&self) -> Result<(), VerbsError> {
        // SAFETY: live CQ with a channel (or none: then the call is harmless).
        let rc = unsafe { sys::ibv_req_notify_cq(self.inner.raw, 0) };
        if rc != 0 {
            return Err(self.err("ibv_req_notify_cq", io::Error::from_raw_os_error(rc)));
        }
        Ok(())
    }

    /// Take and acknowledge pending channel events for this CQ.
    pub fn drain_events(&self, channel: &CompChannel) -> Result<usize, VerbsError> {
        let mut n = 0;
        while let Some(cq) = channel
            .take_event()
            .map_err(|e| self.err("ibv_get_cq_event", e))?
        {
            // SAFETY: cq came from the channel and is live (this CQ, the only one on it).
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            n += 1;
        }
        Ok(n)
    }
}
