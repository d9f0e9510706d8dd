//! Completion channels: the file descriptor a rank sleeps on instead of
//! spinning (`ibv_create_comp_channel`, `ibv_get_cq_event`).

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use ovbench_verbs_sys as sys;

use crate::context::ContextInner;
use crate::owned::Owned;
use crate::{Context, VerbsError};

/// The channel, kept with its device (CQs attached to it hold an Arc).
pub(crate) type ChannelInner = Owned<sys::ibv_comp_channel, Arc<ContextInner>>;

/// A completion channel in non-blocking mode.
#[derive(Clone)]
pub struct CompChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

impl CompChannel {
    pub(crate) fn new(ctx: &Context) -> Result<CompChannel, VerbsError> {
        // SAFETY: live context; the result is owned or NULL.
        let raw = unsafe { sys::ibv_create_comp_channel(ctx.inner.raw) };
        let raw = VerbsError::created(raw, "ibv_create_comp_channel", ctx.name())?;
        // SAFETY: a fresh channel, destroyed only by this owner; the channel
        // is a kernel fd wrapped by libibverbs, its calls thread-safe.
        let inner = unsafe { Owned::new(raw, sys::ibv_destroy_comp_channel, ctx.inner.clone()) };
        let ch = CompChannel {
            inner: Arc::new(inner),
        };
        let fd = ch.fd();
        // SAFETY: fd is the channel's open descriptor; F_GETFL/F_SETFL only change its flags.
        let ok = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(VerbsError::call(
                "fcntl(O_NONBLOCK) on the completion channel",
                ctx.name(),
                io::Error::last_os_error(),
            ));
        }
        Ok(ch)
    }

    /// The descriptor; readable when an armed CQ has a completion.
    pub fn fd(&self) -> RawFd {
        // SAFETY: raw is a live channel; fd is a plain field.
        unsafe { (*self.inner.raw).fd }
    }

    /// Sleep up to `timeout_ms` for the descriptor to become readable.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        match rc {
            r if r > 0 => Ok(true),
            0 => Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Take one event if there is one, returning the CQ it names (the
    /// caller acknowledges it on that CQ).
    pub(crate) fn take_event(&self) -> io::Result<Option<*mut sys::ibv_cq>> {
        let mut cq: *mut sys::ibv_cq = std::ptr::null_mut();
        let mut ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: live channel in non-blocking mode; valid out-pointers.
        let rc = unsafe { sys::ibv_get_cq_event(self.inner.raw, &mut cq, &mut ctx) };
        if rc == 0 {
            return Ok(Some(cq));
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        }
    }
}
