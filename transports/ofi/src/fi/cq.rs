//! The completion queue (`fi_cq_open`, tagged format) and its wait fd.
//! Entries are read by the endpoint bound to it
//! ([`super::RdmEndpoint::read_cq`]), which owns the contexts they carry.

use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use ovbench_ofi_sys as sys;

use super::domain::{Domain, DomainInner};
use super::fabric::cstr;
use super::owned::Owned;

/// The completion queue's handle; closed before its domain.
pub(super) type CqInner = Owned<sys::fid_cq, Arc<DomainInner>>;

/// A completion queue for both directions; keeps its domain open.
pub(crate) struct CompletionQueue {
    pub(super) inner: Arc<CqInner>,
    wait_fd: Option<RawFd>,
}

impl CompletionQueue {
    /// Open a tagged-format CQ of `size` entries. `wait_fd`: ask for a
    /// file-descriptor wait object (falling back to a poll-only CQ where
    /// the provider has none).
    pub fn open(domain: &Domain, size: usize, wait_fd: bool) -> Result<CompletionQueue, i32> {
        let mut attr = sys::fi_cq_attr {
            size,
            format: sys::FI_CQ_FORMAT_TAGGED,
            wait_obj: if wait_fd {
                sys::FI_WAIT_FD
            } else {
                sys::FI_WAIT_NONE
            },
            ..Default::default()
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the domain is open; attr is valid; raw receives the handle.
        let mut rc =
            unsafe { sys::fi_cq_open(domain.inner.raw, &mut attr, &mut raw, ptr::null_mut()) };
        let mut with_fd = wait_fd;
        if rc != 0 && wait_fd {
            // Providers without wait objects: poll-only CQ.
            attr.wait_obj = sys::FI_WAIT_NONE;
            with_fd = false;
            // SAFETY: as above.
            rc = unsafe { sys::fi_cq_open(domain.inner.raw, &mut attr, &mut raw, ptr::null_mut()) };
        }
        if rc != 0 {
            return Err(rc);
        }
        let mut cq = CompletionQueue {
            // SAFETY: fi_cq_open returned an open CQ, owned only here and
            // used under the domain's serialisation; it holds its domain.
            inner: Arc::new(unsafe { Owned::new(raw, Arc::clone(&domain.inner)) }),
            wait_fd: None,
        };
        if with_fd {
            let mut fd: libc::c_int = -1;
            // SAFETY: the CQ is open with FI_WAIT_FD; FI_GETWAIT writes an int.
            let rc = unsafe {
                sys::fi_control(
                    &mut (*raw).fid,
                    sys::FI_GETWAIT as i32,
                    (&mut fd as *mut libc::c_int).cast(),
                )
            };
            if rc == 0 && fd >= 0 {
                cq.wait_fd = Some(fd);
            }
        }
        Ok(cq)
    }

    /// The wait fd, where the CQ has one (valid while the CQ is open).
    pub fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd
    }

    pub(super) fn fid(&self) -> *mut sys::fid {
        // SAFETY: the CQ is open; only the field's address is taken.
        unsafe { ptr::addr_of_mut!((*self.inner.raw).fid) }
    }

    /// `fi_cq_read` into `entries`: the count read, `-FI_EAGAIN` when
    /// empty, `-FI_EAVAIL` when an error entry waits, or another error.
    #[inline]
    pub(super) fn read(&self, entries: &mut [MaybeUninit<sys::fi_cq_tagged_entry>]) -> isize {
        // SAFETY: the CQ is open with FI_CQ_FORMAT_TAGGED; entries has room
        // for entries.len() of them.
        unsafe { sys::fi_cq_read(self.inner.raw, entries.as_mut_ptr().cast(), entries.len()) }
    }

    /// `fi_cq_readerr`: the error entry and the provider's words for it,
    /// or what the call returned.
    pub(super) fn read_err(&self) -> Result<(sys::fi_cq_err_entry, String), isize> {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: the CQ is open; err is a valid entry to fill.
        let rc = unsafe { sys::fi_cq_readerr(self.inner.raw, &mut err, 0) };
        if rc != 1 {
            return Err(rc);
        }
        // SAFETY: the CQ is open; err came from it; the returned string is
        // the provider's until the next call, and copied at once.
        let s = unsafe {
            sys::fi_cq_strerror(
                self.inner.raw,
                err.prov_errno,
                err.err_data,
                ptr::null_mut(),
                0,
            )
        };
        Ok((err, cstr(s)))
    }
}

/// Sleep until `fd` (a CQ's wait fd) is readable or `timeout` passes;
/// EINTR counts as a wake-up.
pub(crate) fn sleep_on(fd: RawFd, timeout: Duration) -> std::io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: pfd is a valid array of one pollfd; poll(2) touches nothing
    // else, whatever fd is.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
