//! The `FI_EP_RDM` endpoint (`fi_endpoint`), bound to one completion
//! queue and one address vector, and every call that posts on it.
//!
//! **Contexts.** Each posted operation's context is an [`Op`] box: a post
//! takes the `Box<Op>` and hands it to the provider as the context pointer
//! (the `Op` starts with the provider's [`Scratch`] space, as
//! `FI_CONTEXT2` asks), or gives it back when the provider refuses. The
//! completion entry returns the pointer, and [`RdmEndpoint::completed`]
//! turns it back into the box (nulling it in the entry): so every context
//! reaches the provider once and comes back once, and nothing else ever
//! names one. Receive slots ([`crate::ops::Kind::RecvBuf`]) are also
//! remembered here while posted: when the endpoint closes, the provider
//! discards them without a completion, and `Drop` takes them back after
//! `fi_close` and leaves them to the domain, which frees them once it has
//! closed. Other operations still posted at close are leaked, never freed
//! under the provider.
//!
//! **Memory.** A post reads or writes either the op's own buffer
//! (`send`, `recv`, `read_into`: the buffer lives in the box, which the
//! provider holds until the completion), bytes copied before the call
//! returns (`inject`, `tinject`), or a [`LocalBuf`]: a checked range of a
//! transport region, which [`crate::memory::Memory`] frees only on the
//! user's `free` (the transport contract: never while an operation on it
//! is in flight; a registered region cannot be freed at all) or after the
//! endpoint and domain have closed. That contract is what makes these
//! posting functions safe to call; it is the same one the C calls always
//! relied on, now stated in one place.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Arc;

use ovbench_ofi_sys as sys;

use super::av::{AddressVector, AvInner};
use super::cq::CompletionQueue;
use super::domain::{Domain, DomainInner};
use super::fabric::Info;
use crate::memory::LocalBuf;
use crate::ops::Op;

/// Largest endpoint name read back (bytes).
const MAX_NAME: usize = super::av::MAX_ADDR - 1;
/// Completion entries read per `fi_cq_read`.
pub(crate) const CQ_BATCH: usize = 32;
const EAGAIN: isize = -(sys::FI_EAGAIN as isize);

/// The provider's scratch space at the start of every context
/// (`FI_CONTEXT`/`FI_CONTEXT2`).
#[repr(transparent)]
#[derive(Default)]
pub(crate) struct Scratch(sys::fi_context2);

// SAFETY: plain bytes the provider writes while it holds the op; the
// pointers in it are never dereferenced by Rust.
unsafe impl Send for Scratch {}

/// A post's outcome: accepted (the provider holds the op until its
/// completion), or the code it returned and the op back.
pub(crate) type Posted = Result<(), (isize, Box<Op>)>;

/// One completion: the operation, owned again, and what the entry says.
pub(crate) struct Completed {
    pub op: Box<Op>,
    pub len: usize,
    pub tag: u64,
}

/// An error entry (`fi_cq_readerr`).
pub(crate) struct Failed {
    /// The operation, where the entry names one.
    pub op: Option<Box<Op>>,
    pub len: usize,
    pub tag: u64,
    /// The libfabric error code (positive).
    pub err: i32,
    /// `fi_cq_strerror`'s words for the provider's error.
    pub detail: String,
}

/// An enabled RDM endpoint; keeps its queue, address vector and domain
/// open.
pub(crate) struct RdmEndpoint {
    raw: *mut sys::fid_ep,
    /// Receive slots posted now, indexed by their `ctx`.
    recvs: Vec<*mut Op>,
    /// The last CQ read: `read` entries, each context nulled once handed
    /// out (not zeroed: clearing 32 entries, 1.3 KB, on every poll was ~6%
    /// of an idle poll loop; the provider fills the first n).
    entries: [MaybeUninit<sys::fi_cq_tagged_entry>; CQ_BATCH],
    read: usize,
    cq: CompletionQueue,
    _av: Arc<AvInner>,
    _domain: Arc<DomainInner>,
    /// Drop leaves the endpoint (and what it keeps open) to the process's
    /// exit instead of closing it (see [`RdmEndpoint::leave_open_at_drop`]).
    leave_open: bool,
}

// SAFETY: the domain is FI_THREAD_DOMAIN and the endpoint is used through
// &mut or &self of one owner at a time (the transport's mutex when a
// progress thread exists); the slots it remembers are ours alone.
unsafe impl Send for RdmEndpoint {}

impl Drop for RdmEndpoint {
    fn drop(&mut self) {
        if self.leave_open {
            // Never closed: one more count on each parent that is never
            // given back keeps the queue, address vector and domain (and
            // through it the fabric) open too; the receive slots the
            // provider still holds are never freed.
            std::mem::forget(Arc::clone(&self.cq.inner));
            std::mem::forget(Arc::clone(&self._av));
            std::mem::forget(Arc::clone(&self._domain));
            return;
        }
        // SAFETY: raw is open and closed once; afterwards the provider
        // discards what is posted and touches no context or buffer.
        unsafe { sys::fi_close(&mut (*self.raw).fid) };
        let mut retired = self
            ._domain
            .with
            .retired
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for p in self.recvs.drain(..).filter(|p| !p.is_null()) {
            // SAFETY: a slot posted and never completed, boxed by a post;
            // the endpoint is closed, so it is ours again. Freed when the
            // domain has closed (see DomainInner::retired).
            retired.push(unsafe { Box::from_raw(p) });
        }
    }
}

/// Hand `op` to the provider through `call` (given the context pointer);
/// the op comes back if the provider refuses it.
#[inline]
fn post(
    op: Box<Op>,
    call: impl FnOnce(*mut libc::c_void) -> isize,
) -> Result<*mut Op, (isize, Box<Op>)> {
    let raw = Box::into_raw(op);
    let rc = call(raw.cast());
    if rc == 0 {
        Ok(raw)
    } else {
        // SAFETY: the provider refused the operation, so it keeps no
        // reference to the context; raw was boxed just above.
        Err((rc, unsafe { Box::from_raw(raw) }))
    }
}

impl RdmEndpoint {
    /// Leave this endpoint open when it is dropped: for a provider whose
    /// close crashes the process (`fabric::close_crashes`); its process's
    /// exit releases it.
    pub(crate) fn leave_open_at_drop(&mut self) {
        self.leave_open = true;
    }

    /// Open the endpoint `info` describes, bind `cq` (both directions) and
    /// `av`, name it `name` (NUL-terminated, for shm) and enable it. On
    /// failure: the call that failed and its code.
    pub fn open(
        domain: &Domain,
        info: &Info,
        cq: CompletionQueue,
        av: &AddressVector,
        name: Option<Vec<u8>>,
    ) -> Result<RdmEndpoint, (&'static str, i32)> {
        let mut raw = ptr::null_mut();
        // SAFETY: the domain is open; info describes the endpoint.
        let rc =
            unsafe { sys::fi_endpoint(domain.inner.raw, info.raw(), &mut raw, ptr::null_mut()) };
        if rc != 0 {
            return Err(("fi_endpoint", rc));
        }
        // From here on, Drop closes it.
        let ep = RdmEndpoint {
            raw,
            recvs: Vec::new(),
            entries: [MaybeUninit::uninit(); CQ_BATCH],
            read: 0,
            _av: Arc::clone(&av.inner),
            _domain: Arc::clone(&domain.inner),
            cq,
            leave_open: false,
        };
        let cq_fid = ep.cq.fid();
        // SAFETY: ep, cq and av are open objects of this domain; name is
        // NUL-terminated and read during the call.
        unsafe {
            let flags = u64::from(sys::FI_TRANSMIT | sys::FI_RECV);
            let rc = sys::fi_ep_bind(raw, cq_fid, flags);
            if rc != 0 {
                return Err(("fi_ep_bind(cq)", rc));
            }
            let rc = sys::fi_ep_bind(raw, &mut (*av.inner.raw).fid, 0);
            if rc != 0 {
                return Err(("fi_ep_bind(av)", rc));
            }
            if let Some(mut n) = name {
                let rc = sys::fi_setname(&mut (*raw).fid, n.as_mut_ptr().cast(), n.len());
                if rc != 0 {
                    return Err(("fi_setname", rc));
                }
            }
            let rc = sys::fi_enable(raw);
            if rc != 0 {
                return Err(("fi_enable", rc));
            }
        }
        Ok(ep)
    }

    /// This endpoint's address (`fi_getname`).
    pub fn name(&self) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; MAX_NAME];
        let mut len = buf.len();
        // SAFETY: the endpoint is enabled; buf has len writable bytes.
        let rc =
            unsafe { sys::fi_getname(&mut (*self.raw).fid, buf.as_mut_ptr().cast(), &mut len) };
        if rc != 0 {
            return Err(rc);
        }
        buf.truncate(len);
        Ok(buf)
    }

    /// The completion queue bound to this endpoint.
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// `fi_inject`: `bytes` are copied before it returns; no completion.
    #[inline]
    pub fn inject(&self, bytes: &[u8], dest: sys::fi_addr_t) -> isize {
        // SAFETY: the endpoint is enabled; fi_inject copies the bytes
        // before returning.
        unsafe { sys::fi_inject(self.raw, bytes.as_ptr().cast(), bytes.len(), dest) }
    }

    /// `fi_tinject`: as [`Self::inject`], tagged.
    #[inline]
    pub fn tinject(&self, bytes: &[u8], dest: sys::fi_addr_t, tag: u64) -> isize {
        // SAFETY: as for fi_inject.
        unsafe { sys::fi_tinject(self.raw, bytes.as_ptr().cast(), bytes.len(), dest, tag) }
    }

    /// `fi_send` of the op's own buffer.
    #[inline]
    pub fn send(&self, op: Box<Op>, dest: sys::fi_addr_t) -> Posted {
        let (p, n) = (op.buf.as_ptr(), op.buf.len());
        post(op, |ctx| {
            // SAFETY: the endpoint is enabled; the buffer is owned by the
            // op, which the provider holds until the completion (the Vec's
            // heap block does not move with the box).
            unsafe { sys::fi_send(self.raw, p.cast(), n, ptr::null_mut(), dest, ctx) }
        })
        .map(drop)
    }

    /// `fi_recv` into the op's own buffer, from any peer: a receive slot,
    /// remembered under its `ctx` until its completion (see the module
    /// docs).
    #[inline]
    pub fn recv(&mut self, mut op: Box<Op>) -> Posted {
        let slot = op.ctx as usize;
        let (p, n) = (op.buf.as_mut_ptr(), op.buf.len());
        let raw = post(op, |ctx| {
            // SAFETY: as for send; the provider writes at most n bytes.
            unsafe {
                sys::fi_recv(
                    self.raw,
                    p.cast(),
                    n,
                    ptr::null_mut(),
                    sys::FI_ADDR_UNSPEC,
                    ctx,
                )
            }
        })?;
        if self.recvs.len() <= slot {
            self.recvs.resize(slot + 1, ptr::null_mut());
        }
        self.recvs[slot] = raw;
        Ok(())
    }

    /// `fi_tsend` from `src`.
    #[inline]
    pub fn tsend(&self, src: LocalBuf, dest: sys::fi_addr_t, tag: u64, op: Box<Op>) -> Posted {
        post(op, |ctx| {
            // SAFETY: the endpoint is enabled; src is a live region's
            // range, kept until this completion (module docs).
            unsafe {
                sys::fi_tsend(
                    self.raw,
                    src.ptr().cast(),
                    src.len(),
                    src.desc().0,
                    dest,
                    tag,
                    ctx,
                )
            }
        })
        .map(drop)
    }

    /// `fi_tsendmsg` from `src` with `flags` (`FI_COMPLETION` and the
    /// completion level).
    #[inline]
    pub fn tsendmsg(
        &self,
        src: LocalBuf,
        dest: sys::fi_addr_t,
        tag: u64,
        flags: u64,
        op: Box<Op>,
    ) -> Posted {
        post(op, |ctx| {
            let iov = libc::iovec {
                iov_base: src.ptr().cast(),
                iov_len: src.len(),
            };
            let mut desc = src.desc().0;
            let msg = sys::fi_msg_tagged {
                msg_iov: (&iov as *const libc::iovec).cast(),
                desc: &mut desc,
                iov_count: 1,
                addr: dest,
                tag,
                ignore: 0,
                context: ctx,
                data: 0,
            };
            // SAFETY: as for fi_tsend; msg and iov live through the call.
            unsafe { sys::fi_tsendmsg(self.raw, &msg, flags) }
        })
        .map(drop)
    }

    /// `fi_trecv` into `dst`, matching `tag` outside the `ignore` bits.
    #[inline]
    pub fn trecv(&self, dst: LocalBuf, tag: u64, ignore: u64, op: Box<Op>) -> Posted {
        post(op, |ctx| {
            // SAFETY: as for fi_tsend.
            unsafe {
                sys::fi_trecv(
                    self.raw,
                    dst.ptr().cast(),
                    dst.len(),
                    dst.desc().0,
                    sys::FI_ADDR_UNSPEC,
                    tag,
                    ignore,
                    ctx,
                )
            }
        })
        .map(drop)
    }

    /// `fi_writemsg` of `src` (inside a registration: its descriptor) to
    /// `[raddr, raddr + len)` under `key` at `dest`, with `flags`.
    #[inline]
    pub fn write(
        &self,
        src: LocalBuf,
        dest: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        flags: u64,
        op: Box<Op>,
    ) -> Posted {
        post(op, |ctx| {
            let iov = libc::iovec {
                iov_base: src.ptr().cast(),
                iov_len: src.len(),
            };
            let mut desc = src.desc().0;
            let rma = sys::fi_rma_iov {
                addr: raddr,
                len: src.len(),
                key,
            };
            let msg = sys::fi_msg_rma {
                msg_iov: (&iov as *const libc::iovec).cast(),
                desc: &mut desc,
                iov_count: 1,
                addr: dest,
                rma_iov: &rma,
                rma_iov_count: 1,
                context: ctx,
                data: 0,
            };
            // SAFETY: the endpoint is enabled; msg and its iovs live through
            // the call; src as for fi_tsend (the remote range is the
            // provider's to check against the key).
            unsafe { sys::fi_writemsg(self.raw, &msg, flags) }
        })
        .map(drop)
    }

    /// `fi_read` of `[raddr, raddr + dst.len)` under `key` at `src` into
    /// `dst` (inside a registration).
    #[inline]
    pub fn read(
        &self,
        dst: LocalBuf,
        src: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        op: Box<Op>,
    ) -> Posted {
        post(op, |ctx| {
            // SAFETY: as for fi_tsend.
            unsafe {
                sys::fi_read(
                    self.raw,
                    dst.ptr().cast(),
                    dst.len(),
                    dst.desc().0,
                    src,
                    raddr,
                    key,
                    ctx,
                )
            }
        })
        .map(drop)
    }

    /// `fi_read` into the op's own buffer (no registration).
    #[inline]
    pub fn read_into(&self, src: sys::fi_addr_t, raddr: u64, key: u64, mut op: Box<Op>) -> Posted {
        let (p, n) = (op.buf.as_mut_ptr(), op.buf.len());
        post(op, |ctx| {
            // SAFETY: as for send.
            unsafe { sys::fi_read(self.raw, p.cast(), n, ptr::null_mut(), src, raddr, key, ctx) }
        })
        .map(drop)
    }

    /// Read up to [`CQ_BATCH`] completions, handed out by
    /// [`Self::completed`]: how many entries were read (0: none waiting),
    /// `-FI_EAVAIL` when an error entry waits ([`Self::read_cq_err`]), or
    /// another error code. Entries of the previous read not handed out are
    /// forgotten (their ops leak; a receive slot is still freed on drop).
    #[inline]
    pub fn read_cq(&mut self) -> isize {
        let n = self.cq.read(&mut self.entries);
        self.read = n.max(0) as usize;
        if n == EAGAIN {
            0
        } else {
            n
        }
    }

    /// Completion `i` of the last read, its op owned again; `None` past
    /// the read, for an entry without a context, or one already taken.
    #[inline]
    pub fn completed(&mut self, i: usize) -> Option<Completed> {
        if i >= self.read {
            return None;
        }
        // SAFETY: fi_cq_read wrote `read` whole entries.
        let e = unsafe { self.entries[i].assume_init_mut() };
        // Nulled so that the context is handed out once.
        let ctx = std::mem::replace(&mut e.op_context, ptr::null_mut());
        let (len, tag) = (e.len, e.tag);
        self.claim(ctx).map(|op| Completed { op, len, tag })
    }

    /// The waiting error entry, its op back; or what `fi_cq_readerr`
    /// returned.
    pub fn read_cq_err(&mut self) -> Result<Failed, isize> {
        let (e, detail) = self.cq.read_err()?;
        Ok(Failed {
            op: self.claim(e.op_context),
            len: e.len,
            tag: e.tag,
            err: e.err,
            detail,
        })
    }

    /// The op a completion's context names, owned again (`None` for an
    /// entry without one).
    #[inline]
    fn claim(&mut self, ctx: *mut libc::c_void) -> Option<Box<Op>> {
        let p: *mut Op = ctx.cast();
        if p.is_null() {
            return None;
        }
        // SAFETY: every context posted on this endpoint (the only one bound
        // to its CQ) is a boxed Op leaked by `post`, and the provider
        // returns each exactly once.
        let op = unsafe { Box::from_raw(p) };
        // Whatever its kind: an op posted by `recv` is remembered there.
        if let Some(s) = self.recvs.get_mut(op.ctx as usize).filter(|s| **s == p) {
            *s = ptr::null_mut();
        }
        Some(op)
    }
}
