//! The shm provider moves large messages and RMA with cross-memory attach
//! (`process_vm_readv/writev`), which the Yama LSM restricts: with
//! `kernel.yama.ptrace_scope = 1` only a process's ancestors may attach,
//! and ovbench's ranks are siblings. Scope 1 is lifted for this process
//! with `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)`; scope 2 and 3 cannot
//! be lifted without privileges, and the user is told how.

/// What was found and done, for the header and for error messages.
#[derive(Clone, Debug)]
pub struct CmaStatus {
    /// Cross-memory attach between sibling ranks works.
    pub usable: bool,
    /// In words: scope, what was done, what the user can do.
    pub detail: String,
}

const SCOPE: &str = "/proc/sys/kernel/yama/ptrace_scope";

/// Check Yama's ptrace scope and lift scope 1 for this process.
pub fn prepare() -> CmaStatus {
    let scope = std::fs::read_to_string(SCOPE)
        .ok()
        .map(|s| s.trim().to_string());
    decide(scope.as_deref(), || {
        // prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY).
        rustix::process::set_ptracer(rustix::process::PTracer::Any).map_err(std::io::Error::from)
    })
}

/// The decision for a ptrace scope as read from [`SCOPE`] (`None`: no
/// Yama); `allow_any` lifts scope 1 for this process.
fn decide(scope: Option<&str>, allow_any: impl FnOnce() -> std::io::Result<()>) -> CmaStatus {
    let Some(scope) = scope else {
        return CmaStatus {
            usable: true,
            detail: "no Yama LSM: cross-memory attach between ranks is allowed".into(),
        };
    };
    match scope.parse::<u32>() {
        Ok(0) => CmaStatus {
            usable: true,
            detail: "kernel.yama.ptrace_scope=0: cross-memory attach between ranks is allowed".into(),
        },
        Ok(1) => match allow_any() {
            Ok(()) => CmaStatus {
                usable: true,
                detail: "kernel.yama.ptrace_scope=1: allowed sibling ranks to attach with prctl(PR_SET_PTRACER_ANY)".into(),
            },
            Err(e) => CmaStatus {
                usable: false,
                detail: format!(
                    "kernel.yama.ptrace_scope=1 and prctl(PR_SET_PTRACER) failed ({e}): shm cannot use cross-memory attach; run `sysctl kernel.yama.ptrace_scope=0` or use --provider tcp;ofi_rxm"
                ),
            },
        },
        Ok(s) => CmaStatus {
            usable: false,
            detail: format!(
                "kernel.yama.ptrace_scope={s} blocks cross-memory attach between ranks: shm's large messages and RMA fail or fall back; as root run `sysctl kernel.yama.ptrace_scope=0` (scope 3 needs a reboot), or use --provider tcp;ofi_rxm"
            ),
        },
        Err(_) => CmaStatus {
            usable: true,
            detail: format!("{SCOPE} says {scope:?}, not a number; assuming cross-memory attach works"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_is_explained() {
        let never = || -> std::io::Result<()> { panic!("prctl only for scope 1") };
        assert!(decide(None, never).usable);
        assert!(decide(Some("0"), never).usable);
        let s = decide(Some("1"), || Ok(()));
        assert!(s.usable && s.detail.contains("PR_SET_PTRACER_ANY"));
        let s = decide(Some("1"), || {
            Err(std::io::Error::from_raw_os_error(libc::EPERM))
        });
        assert!(!s.usable && s.detail.contains("sysctl kernel.yama.ptrace_scope=0"));
        for scope in ["2", "3"] {
            let s = decide(Some(scope), never);
            assert!(!s.usable && s.detail.contains("tcp;ofi_rxm"), "{s:?}");
        }
        assert!(decide(Some("x"), never).usable);
    }
}
