//! The MPI job of this process: initialised once (FUNNELED), its rank
//! and size, the library's facts for the header, the one-sided component
//! Open MPI uses, the control channel and the watchdog. Dropping the last
//! handle finalises MPI, after every transport and channel is gone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ovbench_core::fabric::watchdog::{CallWatch, Watchdog};

use crate::ffi::comm::{Comm, CALL_NAMES};
use crate::ffi::job::{self, Initialized, ThreadLevel};
use crate::osc::{self, OscChoice};
use crate::{MpiError, MpiOptions, MpiTransport};

/// This process's MPI job.
#[derive(Debug)]
pub struct MpiJob {
    init: Mutex<Initialized>,
    /// Bytes attached for buffered sends so far (`MPI_Buffer_attach`).
    bsend_bytes: Mutex<usize>,
    provided: ThreadLevel,
    library: String,
    host: String,
    osc: Option<OscChoice>,
    rank: u32,
    size: u32,
    tag_ub: i32,
    pub(crate) watch: Arc<CallWatch>,
}

impl MpiJob {
    /// Initialise MPI (`MPI_Init_thread`, FUNNELED). Under Open MPI the
    /// one-sided component is settled first ([`crate::osc`]).
    pub fn init() -> Result<Arc<MpiJob>, MpiError> {
        let library = job::library_version();
        let osc_plan = osc::plan(&library);
        let init = job::init_funneled().map_err(MpiError::Init)?;
        let provided = init.provided;
        if matches!(provided, ThreadLevel::Single) {
            return Err(MpiError::Init(format!(
                "the library gave {} where ovbench needs at least MPI_THREAD_FUNNELED",
                provided.name()
            )));
        }
        let watch = CallWatch::new(CALL_NAMES);
        let world = Comm::dup_world(watch.clone()).map_err(MpiError::Init)?;
        let osc = osc_plan.map(|p| p.confirm(crate::ffi::tool::cvar_string("osc")));
        Ok(Arc::new(MpiJob {
            init: Mutex::new(init),
            bsend_bytes: Mutex::new(0),
            provided,
            library,
            host: job::processor_name(),
            osc,
            rank: world.rank,
            size: world.size,
            tag_ub: job::tag_ub(),
            watch,
        }))
    }

    /// This process's rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in `MPI_COMM_WORLD`.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The thread level the library gave (`MPI_THREAD_FUNNELED`, …).
    pub fn thread_level(&self) -> &'static str {
        self.provided.name()
    }

    /// Whether the library allows calls from every thread at once (a
    /// progress thread needs it).
    pub fn multiple(&self) -> bool {
        self.provided == ThreadLevel::Multiple
    }

    /// `MPI_Get_library_version`, its first line.
    pub fn library(&self) -> &str {
        self.library.lines().next().unwrap_or("")
    }

    /// `MPI_Get_processor_name`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The one-sided component (Open MPI only): its name and how it was
    /// chosen.
    pub fn osc(&self) -> Option<&OscChoice> {
        self.osc.as_ref()
    }

    /// The largest tag the library takes (`MPI_TAG_UB`).
    #[inline]
    pub fn tag_ub(&self) -> i32 {
        self.tag_ub
    }

    /// This rank's transport (collective: every rank creates one).
    pub fn transport(self: &Arc<Self>, opts: MpiOptions) -> Result<MpiTransport, MpiError> {
        MpiTransport::new(self.clone(), opts)
    }

    /// The out-of-band channel: a communicator of its own for gathering
    /// per-rank facts at rank 0 (collective).
    pub fn gather_channel(self: &Arc<Self>) -> Result<GatherChannel, MpiError> {
        let comm = Comm::dup_world(self.watch.clone()).map_err(MpiError::Init)?;
        Ok(GatherChannel {
            comm,
            _job: self.clone(),
        })
    }

    /// A watchdog that ends the job when this rank has been inside one
    /// blocking MPI call for `deadline`: it prints the rank, the call, the
    /// peer and the size, then calls `MPI_Abort`.
    pub fn watchdog(self: &Arc<Self>, deadline: Duration) -> std::io::Result<Watchdog> {
        let rank = self.rank;
        Watchdog::spawn(
            format!("ovbench-mpi-watchdog-{rank}"),
            self.watch.clone(),
            deadline,
            move |call, waited| {
                let peer = call
                    .peer
                    .map_or("any rank".to_string(), |p| format!("rank {p}"));
                eprintln!(
                    "ovbench: rank {rank}: {} with {peer} ({} bytes) has not returned after {:.1} s (--timeout {:.1} s): a peer may have died or be stuck; ending the job with MPI_Abort",
                    call.op,
                    call.size,
                    waited.as_secs_f64(),
                    deadline.as_secs_f64()
                );
                job::abort(1)
            },
        )
    }

    /// End the whole job now (`MPI_Abort`), with exit code `code`.
    pub fn abort(&self, code: i32) -> ! {
        job::abort(code)
    }

    /// Make sure `len` bytes can be sent with a buffered send: the
    /// attached buffer grows (`MPI_Buffer_detach` waits for what it
    /// holds, then a larger one is attached).
    pub(crate) fn bsend_room(&self, len: usize) -> Result<(), String> {
        let need = len + mpi::ffi::MPI_BSEND_OVERHEAD as usize;
        let mut have = self
            .bsend_bytes
            .lock()
            .map_err(|_| "the buffered-send buffer's lock is poisoned".to_string())?;
        if *have >= need {
            return Ok(());
        }
        let size = need.next_power_of_two().max(64 * 1024);
        let mut init = self
            .init
            .lock()
            .map_err(|_| "the MPI job's lock is poisoned".to_string())?;
        init.universe.set_buffer_size(size);
        *have = size;
        Ok(())
    }
}

/// The control channel's communicator.
#[derive(Debug)]
pub struct GatherChannel {
    comm: Comm,
    _job: Arc<MpiJob>,
}

impl GatherChannel {
    /// Every rank's `mine` at rank 0, in rank order (`MPI_Gather` and
    /// `MPI_Gatherv`); `None` on the other ranks. Collective.
    pub fn gather(&self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MpiError> {
        self.comm.gather_bytes(mine).map_err(MpiError::Call)
    }
}
