//! The MPI job: `MPI_Init_thread` (through rsmpi), the library's facts,
//! and `MPI_Abort`.

use std::os::raw::c_int;

use mpi::environment::Universe;
use mpi::ffi;
use mpi::Threading;

/// The thread support asked for and given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadLevel {
    Single,
    Funneled,
    Serialized,
    Multiple,
}

impl ThreadLevel {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadLevel::Single => "MPI_THREAD_SINGLE",
            ThreadLevel::Funneled => "MPI_THREAD_FUNNELED",
            ThreadLevel::Serialized => "MPI_THREAD_SERIALIZED",
            ThreadLevel::Multiple => "MPI_THREAD_MULTIPLE",
        }
    }
}

/// An initialised MPI: finalised when dropped.
pub(crate) struct Initialized {
    pub(crate) universe: Universe,
    pub(crate) provided: ThreadLevel,
}

impl std::fmt::Debug for Initialized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initialized")
            .field("provided", &self.provided)
            .finish()
    }
}

/// `MPI_Init_thread` asking for `MPI_THREAD_FUNNELED`.
pub(crate) fn init_funneled() -> Result<Initialized, String> {
    if mpi::environment::is_initialized() {
        return Err("MPI is already initialised in this process".into());
    }
    // deviation: mpi-funneled — FUNNELED, not mpi_overhead's MPI_Init (SINGLE), see docs/methods/overhead.md
    let (universe, provided) = mpi::initialize_with_threading(Threading::Funneled)
        .ok_or_else(|| "MPI_Init_thread failed".to_string())?;
    let provided = match provided {
        Threading::Single => ThreadLevel::Single,
        Threading::Funneled => ThreadLevel::Funneled,
        Threading::Serialized => ThreadLevel::Serialized,
        Threading::Multiple => ThreadLevel::Multiple,
    };
    Ok(Initialized { universe, provided })
}

/// `MPI_Get_library_version` (callable before `MPI_Init`).
pub(crate) fn library_version() -> String {
    mpi::environment::library_version()
        .map(|v| v.trim_end_matches('\0').trim().to_string())
        .unwrap_or_default()
}

/// `MPI_Get_processor_name`.
pub(crate) fn processor_name() -> String {
    mpi::environment::processor_name().unwrap_or_default()
}

/// `MPI_TAG_UB` of `MPI_COMM_WORLD`: the largest tag the library takes.
pub(crate) fn tag_ub() -> c_int {
    let mut val: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: MPI is initialised; for MPI_TAG_UB the library stores a
    // pointer to its int in `val` (attribute_val is a `void*` out-slot).
    let rc = unsafe {
        ffi::MPI_Comm_get_attr(
            ffi::RSMPI_COMM_WORLD,
            ffi::MPI_TAG_UB as c_int,
            (&mut val as *mut *mut c_int).cast(),
            &mut flag,
        )
    };
    if rc != 0 || flag == 0 || val.is_null() {
        return 32767; // the standard's minimum
    }
    // SAFETY: the library set `val` to its own attribute value, valid for
    // the life of MPI_COMM_WORLD.
    unsafe { *val }
}

/// `MPI_Abort(MPI_COMM_WORLD, code)`: ends every rank of the job.
pub(crate) fn abort(code: c_int) -> ! {
    // SAFETY: MPI_COMM_WORLD is valid between init and finalize; MPI_Abort
    // may be called from any thread as the job's last act (FUNNELED
    // allows no other, so it is used only for a rank that is ending).
    unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code) };
    std::process::exit(code)
}
