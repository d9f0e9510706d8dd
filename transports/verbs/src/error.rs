//! What the verbs layer fails with, and how that reaches the user.

use std::io;

use ovbench_core::{OpKind, TransportError};

/// Every way the safe verbs layer can fail. Messages say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// `ibv_get_device_list` found nothing.
    #[error(
        "no RDMA device found (devices found: none{why}). To get one without RDMA \
         hardware, load Soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \
         <ethernet interface>` (needs a kernel with CONFIG_RDMA_RXE; ci/softroce-vm boots one), \
         or use --transport tcp"
    )]
    NoDevice { why: String },
    /// `--device` named a device that is not there.
    #[error("RDMA device `{wanted}` not found; devices found: {}; pick one with --device", found.join(", "))]
    DeviceNotFound { wanted: String, found: Vec<String> },
    /// No usable port (none active, or `--port` out of range / down).
    #[error("{0}")]
    Port(String),
    /// A libibverbs call failed.
    #[error("{call} on {device} failed: {source}")]
    Call {
        call: &'static str,
        device: String,
        #[source]
        source: io::Error,
    },
    /// Memory registration failed; the message carries the memlock advice.
    #[error("{0}")]
    Register(String),
    /// Options that cannot work together or with this device.
    #[error("{0}")]
    Config(String),
}

impl VerbsError {
    pub(crate) fn call(call: &'static str, device: &str, source: io::Error) -> Self {
        VerbsError::Call {
            call,
            device: device.to_string(),
            source,
        }
    }

    /// `raw`, the object creating `call` on `device` returned, or the
    /// error it left in errno where that is NULL (read at once, before
    /// any other call can change it).
    pub(crate) fn created<T>(
        raw: *mut T,
        call: &'static str,
        device: &str,
    ) -> Result<*mut T, Self> {
        if raw.is_null() {
            return Err(VerbsError::call(call, device, io::Error::last_os_error()));
        }
        Ok(raw)
    }
}

impl From<VerbsError> for TransportError {
    fn from(e: VerbsError) -> Self {
        match e {
            VerbsError::NoDevice { .. } => TransportError::Unsupported(e.to_string()),
            VerbsError::DeviceNotFound { .. } | VerbsError::Config(_) | VerbsError::Port(_) => {
                TransportError::Invalid(e.to_string())
            }
            VerbsError::Register(detail) => TransportError::Local {
                op: OpKind::Register,
                detail,
            },
            VerbsError::Call { .. } => TransportError::Local {
                op: OpKind::Connect,
                detail: e.to_string(),
            },
        }
    }
}

/// The locked-memory limit of this process in bytes, `None` if unlimited
/// or unknown (read from `/proc/self/limits`, no FFI needed).
pub(crate) fn memlock_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max locked memory"))?;
    let soft = line.split_whitespace().nth(3)?;
    soft.parse().ok()
}

/// The message for a failed `ibv_reg_mr` of `len` bytes while
/// `registered` bytes are already registered.
pub(crate) fn register_failure(
    len: usize,
    registered: u64,
    limit: Option<u64>,
    err: &io::Error,
) -> String {
    let need_kib = (registered + len as u64).div_ceil(1024);
    match limit {
        Some(l) if registered + len as u64 > l || err.raw_os_error() == Some(libc::ENOMEM) => {
            format!(
                "ibv_reg_mr of {len} bytes failed ({err}): the locked-memory limit is {} KiB and \
                 {} KiB are already registered; raise it to at least {need_kib} KiB \
                 (`ulimit -l {need_kib}` or `ulimit -l unlimited`; for services LimitMEMLOCK=infinity, \
                 for logins `* - memlock unlimited` in /etc/security/limits.conf)",
                l / 1024,
                registered.div_ceil(1024)
            )
        }
        _ => format!(
            "ibv_reg_mr of {len} bytes failed ({err}) with {} KiB already registered; \
             the locked-memory limit is {}: check `ulimit -l` and the device's memory",
            registered.div_ceil(1024),
            limit.map_or("unlimited".to_string(), |l| format!("{} KiB", l / 1024))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memlock_advice_names_the_needed_limit() {
        let e = io::Error::from_raw_os_error(libc::ENOMEM);
        let m = register_failure(1 << 20, 7 << 20, Some(8 << 20), &e);
        assert!(m.contains("ulimit -l 8192"), "{m}");
        assert!(m.contains("limit is 8192 KiB"), "{m}");
        let m = register_failure(4096, 0, None, &io::Error::from_raw_os_error(libc::EINVAL));
        assert!(m.contains("unlimited"), "{m}");
    }

    #[test]
    fn no_device_says_how_to_get_one() {
        let e: TransportError = VerbsError::NoDevice { why: String::new() }.into();
        let m = e.to_string();
        assert!(
            m.contains("devices found: none") && m.contains("rdma_rxe"),
            "{m}"
        );
    }
}
