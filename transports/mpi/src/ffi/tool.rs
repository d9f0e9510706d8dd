//! The MPI tool interface (`MPI_T`): a control variable's value, read to
//! learn what the library was configured to use (Open MPI's `osc`
//! selection) rather than guessing it from the environment.

use std::os::raw::c_int;

use mpi::ffi;

/// The value of string control variable `name`, if the library has it.
pub(crate) fn cvar_string(name: &str) -> Option<String> {
    let mut provided: c_int = 0;
    // SAFETY: MPI_T may be initialised at any time, any number of times,
    // each matched by MPI_T_finalize below.
    if unsafe { ffi::MPI_T_init_thread(ffi::RSMPI_THREAD_FUNNELED, &mut provided) } != 0 {
        return None;
    }
    let v = read(name);
    // SAFETY: matches the MPI_T_init_thread above.
    unsafe { ffi::MPI_T_finalize() };
    v
}

fn read(want: &str) -> Option<String> {
    let mut n: c_int = 0;
    // SAFETY: MPI_T is initialised; `n` is a valid out-parameter.
    if unsafe { ffi::MPI_T_cvar_get_num(&mut n) } != 0 {
        return None;
    }
    for i in 0..n {
        let mut name = [0u8; 256];
        let mut name_len: c_int = name.len() as c_int;
        let mut verbosity: c_int = 0;
        // SAFETY: reading an initialised constant of the shim.
        let mut datatype = unsafe { ffi::RSMPI_DATATYPE_NULL };
        // SAFETY: an all-zero handle is a valid place for the call to
        // write the enumeration handle into.
        let mut enumtype: ffi::MPI_T_enum = unsafe { std::mem::zeroed() };
        let mut bind: c_int = 0;
        let mut scope: c_int = 0;
        // SAFETY: `name` holds `name_len` bytes; null description pointers
        // are allowed (the length is then ignored); the rest are valid
        // out-parameters.
        let rc = unsafe {
            ffi::MPI_T_cvar_get_info(
                i,
                name.as_mut_ptr().cast(),
                &mut name_len,
                &mut verbosity,
                &mut datatype,
                &mut enumtype,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut bind,
                &mut scope,
            )
        };
        if rc != 0 {
            continue;
        }
        let got = std::ffi::CStr::from_bytes_until_nul(&name).ok()?;
        if got.to_bytes() != want.as_bytes() {
            continue;
        }
        // SAFETY: an all-zero handle is a valid out-slot.
        let mut handle: ffi::MPI_T_cvar_handle = unsafe { std::mem::zeroed() };
        let mut count: c_int = 0;
        // SAFETY: variable `i` is bound to no object (a null handle is
        // allowed); `handle` and `count` are out-parameters.
        let rc = unsafe {
            ffi::MPI_T_cvar_handle_alloc(i, std::ptr::null_mut(), &mut handle, &mut count)
        };
        if rc != 0 {
            return None;
        }
        let mut buf = vec![0u8; (count.max(0) as usize).max(1) + 1024];
        // SAFETY: a string variable's value is at most `count` chars; the
        // buffer holds more than that.
        let rc = unsafe { ffi::MPI_T_cvar_read(handle, buf.as_mut_ptr().cast()) };
        // SAFETY: `handle` was allocated above.
        unsafe { ffi::MPI_T_cvar_handle_free(&mut handle) };
        if rc != 0 {
            return None;
        }
        let v = std::ffi::CStr::from_bytes_until_nul(&buf).ok()?;
        return Some(v.to_string_lossy().into_owned());
    }
    None
}
