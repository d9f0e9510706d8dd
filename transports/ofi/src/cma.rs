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
    let scope = match std::fs::read_to_string(SCOPE) {
        Ok(s) => s.trim().parse::<u32>().ok(),
        Err(_) => {
            return CmaStatus {
                usable: true,
                detail: "no Yama LSM: cross-memory attach between ranks is allowed".into(),
            }
        }
    };
    match scope {
        Some(0) => CmaStatus {
            usable: true,
            detail: "kernel.yama.ptrace_scope=0: cross-memory attach between ranks is allowed".into(),
        },
        Some(1) => {
            // SAFETY: prctl with PR_SET_PTRACER and an integer argument
            // touches no memory of ours.
            let rc = unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
            if rc == 0 {
                CmaStatus {
                    usable: true,
                    detail: "kernel.yama.ptrace_scope=1: allowed sibling ranks to attach with prctl(PR_SET_PTRACER_ANY)".into(),
                }
            } else {
                CmaStatus {
                    usable: false,
                    detail: format!(
                        "kernel.yama.ptrace_scope=1 and prctl(PR_SET_PTRACER) failed ({}): shm cannot use cross-memory attach; run `sysctl kernel.yama.ptrace_scope=0` or use --provider tcp;ofi_rxm",
                        std::io::Error::last_os_error()
                    ),
                }
            }
        }
        Some(s) => CmaStatus {
            usable: false,
            detail: format!(
                "kernel.yama.ptrace_scope={s} blocks cross-memory attach between ranks: shm's large messages and RMA fail or fall back; as root run `sysctl kernel.yama.ptrace_scope=0` (scope 3 needs a reboot), or use --provider tcp;ofi_rxm"
            ),
        },
        None => CmaStatus {
            usable: true,
            detail: format!("{SCOPE} is unreadable as a number; assuming cross-memory attach works"),
        },
    }
}
