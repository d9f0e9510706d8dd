//! The ovbench transport over an MPI library (rsmpi, built against the
//! system's Open MPI or MPICH): MPI point-to-point and collectives as
//! `--proto native`, ovbench's own protocols over MPI-3 one-sided
//! communication.
//!
//! | contract item | MPI calls | notes |
//! |---|---|---|
//! | job | `MPI_Init_thread(FUNNELED)` through rsmpi; rank and size of `MPI_COMM_WORLD` | no bootstrap service: MPI is the launcher's; `--progress thread` needs `MPI_THREAD_MULTIPLE` |
//! | communicators | `MPI_Comm_dup` ×2 (native point-to-point; the own protocols' control messages), `MPI_ERRORS_RETURN` on each and on the window | an MPI error becomes an error naming the call and the library's words |
//! | connect | `MPI_Win_create_dynamic`, `MPI_Win_lock_all(NOCHECK)` once | one window per communicator for its life |
//! | register / key | `MPI_Win_attach` + `MPI_Get_address`; key = address + length, sealed with the owner's rank | registration is local; `MPI_Win_detach` on deregister |
//! | post_send / receive | `MPI_Isend` on the control communicator; one `MPI_Irecv` pre-posted per peer, `MPI_Testsome` | MPI buffers unexpected messages, so a sender never overruns |
//! | post_rma write / read | `MPI_Put` / `MPI_Get`, then `MPI_Win_flush` towards the peer at the next poll | a write completes once flushed: visible at the target |
//! | tsend / trecv / trecv_wait | `MPI_Isend`/`MPI_Issend`, `MPI_Irecv` (ANY_SOURCE, ANY_TAG), `MPI_Recv` | |
//! | library calls | `MPI_Send`, `Ssend`, `Rsend`, `Bsend` (attached buffer), `Isend`…`Ibsend`, `Recv`, `Sendrecv`, `Wait`, `Waitall`, `Test`, `Barrier`, `Bcast` | each communicator call is the MPI call of its name |
//!
//! **Deadlines.** A blocking MPI call cannot time out; each is marked in a
//! watch that [`MpiJob::watchdog`] samples, and one running past
//! `--timeout` ends the job with `MPI_Abort` after printing the rank, the
//! call, the peer and the size.
//!
//! **Layers.** Every call into MPI is in the private `ffi` module, one
//! file per resource; the rest is safe code (`tests/architecture.rs`).

mod ffi;
mod job;
pub mod osc;
mod tagged;
mod transport;

pub use job::{GatherChannel, MpiJob};
pub use osc::OscChoice;
pub use transport::{CallCounts, MpiTransport, EAGER_BUF_SIZE};

/// The MPI library's version text (`MPI_Get_library_version`, which MPI
/// allows before `MPI_Init`), its first line.
pub fn library_version() -> String {
    ffi::job::library_version()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// How to open the transport.
#[derive(Clone, Debug, Default)]
pub struct MpiOptions {
    /// `--progress`: a progress thread needs `MPI_THREAD_MULTIPLE`.
    pub progress: ovbench_core::Progress,
}

/// Why the MPI job or transport could not start.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    /// `MPI_Init_thread` or the job's first calls failed.
    #[error("starting MPI: {0}")]
    Init(String),
    /// A later MPI call failed.
    #[error("{0}")]
    Call(String),
    /// The options ask for what this library cannot do.
    #[error("{0}")]
    Unsupported(String),
}
