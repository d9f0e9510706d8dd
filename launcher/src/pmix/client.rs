//! The PMIx client calls: the only place the launcher calls libpmix.
//!
//! PMIx keeps its own state per process (one `PMIx_Init`, one
//! `PMIx_Finalize`); [`Pmix`] is that session. Every blocking call carries
//! `PMIX_TIMEOUT`, so a rank that died leaves the others with an error
//! from the server instead of a hang.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ovbench_pmix_sys as sys;

use crate::exchange::{Exchange, ExchangeKind, Seat};
use crate::role::RankEnv;

/// `PMIX_RANK_WILDCARD` (`UINT32_MAX - 1`, a macro bindgen cannot
/// evaluate): "the job as a whole" in a get.
const RANK_WILDCARD: u32 = u32::MAX - 1;

/// This process's PMIx session.
pub struct Pmix {
    me: sys::pmix_proc_t,
    seat: Seat,
    /// Each allgather's keys carry its number, so no get sees an older value.
    round: u32,
    timeout: Duration,
    version: String,
    finalized: bool,
}

impl std::fmt::Debug for Pmix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pmix({})", self.seat)
    }
}

/// PMIx's text for a status.
fn status_text(rc: sys::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string returns a pointer to a static string
    // (never freed) for any status value, known or not.
    let p = unsafe { sys::PMIx_Error_string(rc) };
    if p.is_null() {
        return format!("status {rc}");
    }
    // SAFETY: non-null, NUL-terminated and static (see above).
    let s = unsafe { CStr::from_ptr(p) };
    format!("{} ({rc})", s.to_string_lossy())
}

fn check(rc: sys::pmix_status_t, what: &str) -> Result<()> {
    if rc == sys::PMIX_SUCCESS as sys::pmix_status_t {
        Ok(())
    } else {
        bail!("{what} failed: {}", status_text(rc))
    }
}

/// An owned array of `pmix_info_t` directives, destructed on drop.
struct Infos(Vec<sys::pmix_info_t>);

impl Infos {
    fn new() -> Infos {
        Infos(Vec::new())
    }

    fn push(&mut self, key: &[u8], data: *const c_void, ty: u32) -> Result<()> {
        let mut info = sys::pmix_info_t::default();
        // SAFETY: `key` is one of the header's NUL-terminated attribute
        // names, `data` points at a live value of type `ty`, and
        // PMIx_Info_load copies both into `info`.
        let rc = unsafe {
            sys::PMIx_Info_load(
                &mut info,
                key.as_ptr().cast::<c_char>(),
                data,
                ty as sys::pmix_data_type_t,
            )
        };
        check(rc, "PMIx_Info_load")?;
        self.0.push(info);
        Ok(())
    }

    /// `PMIX_TIMEOUT` (whole seconds, at least 1).
    fn timeout(mut self, t: Duration) -> Result<Infos> {
        let secs: i32 = t.as_secs().clamp(1, i32::MAX as u64) as i32;
        self.push(
            sys::PMIX_TIMEOUT,
            ptr::from_ref(&secs).cast(),
            sys::PMIX_INT,
        )?;
        Ok(self)
    }

    fn collect(mut self) -> Result<Infos> {
        let yes = true;
        self.push(
            sys::PMIX_COLLECT_DATA,
            ptr::from_ref(&yes).cast(),
            sys::PMIX_BOOL,
        )?;
        Ok(self)
    }

    fn ptr(&self) -> *const sys::pmix_info_t {
        self.0.as_ptr()
    }
}

impl Drop for Infos {
    fn drop(&mut self) {
        for i in &mut self.0 {
            // SAFETY: each entry was filled by PMIx_Info_load (not marked
            // persistent) and its value is destructed once, as the
            // PMIX_INFO_DESTRUCT macro does.
            unsafe { sys::PMIx_Value_destruct(&mut i.value) };
        }
    }
}

/// A value PMIx_Get returned; destructed and freed on drop.
struct Value(*mut sys::pmix_value_t);

impl Value {
    fn ty(&self) -> u32 {
        // SAFETY: the pointer came from a successful PMIx_Get (non-null).
        u32::from(unsafe { (*self.0).type_ })
    }

    fn as_u32(&self, what: &str) -> Result<u32> {
        // SAFETY: the union member read is the one the type tag names.
        unsafe {
            match self.ty() {
                sys::PMIX_UINT32 => Some((*self.0).data.uint32),
                sys::PMIX_UINT16 => Some(u32::from((*self.0).data.uint16)),
                sys::PMIX_INT => u32::try_from((*self.0).data.integer).ok(),
                _ => None,
            }
            .ok_or_else(|| anyhow::anyhow!("PMIx gave {what} as type {}", self.ty()))
        }
    }

    fn to_bytes(&self, what: &str) -> Result<Vec<u8>> {
        if self.ty() != sys::PMIX_BYTE_OBJECT {
            bail!("PMIx gave {what} as type {}, not bytes", self.ty());
        }
        // SAFETY: the tag says byte object: `bo.bytes` holds `bo.size`
        // bytes owned by the value (or is null when empty).
        unsafe {
            let bo = (*self.0).data.bo;
            if bo.bytes.is_null() || bo.size == 0 {
                return Ok(Vec::new());
            }
            Ok(std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec())
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        // SAFETY: PMIx_Get malloc'ed the value; PMIX_VALUE_RELEASE is
        // destruct then free, done here since it is a macro.
        unsafe {
            sys::PMIx_Value_destruct(self.0);
            nix::libc::free(self.0.cast());
        }
    }
}

impl Pmix {
    /// `PMIx_Init`, then the job size from the server.
    pub fn init(env: &RankEnv, timeout: Duration) -> Result<Pmix> {
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is a valid proc struct PMIx fills in; no info array.
        let rc = unsafe { sys::PMIx_Init(&mut me, ptr::null_mut(), 0) };
        check(rc, "PMIx_Init (is the job's PMIx server reachable?)")?;
        // SAFETY: PMIx_Get_version returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(sys::PMIx_Get_version()) }
            .to_string_lossy()
            .into_owned();
        let mut p = Pmix {
            me,
            seat: Seat {
                rank: me.rank,
                size: 0,
            },
            round: 0,
            timeout,
            version,
            finalized: false,
        };
        let mut job = me;
        job.rank = RANK_WILDCARD;
        p.seat.size = p
            .get(&job, sys::PMIX_JOB_SIZE)?
            .as_u32("the job size")
            .context("PMIx_Get(PMIX_JOB_SIZE)")?;
        p.seat.agrees_with("PMIx", env)?;
        Ok(p)
    }

    fn get(&self, proc_: &sys::pmix_proc_t, key: &[u8]) -> Result<Value> {
        let infos = Infos::new().timeout(self.timeout)?;
        let mut val: *mut sys::pmix_value_t = ptr::null_mut();
        // SAFETY: `key` is NUL-terminated, `infos` lives across the call,
        // and `val` receives a value PMIx allocates (owned by Value).
        let rc = unsafe {
            sys::PMIx_Get(
                proc_,
                key.as_ptr().cast(),
                infos.ptr(),
                infos.0.len(),
                &mut val,
            )
        };
        let name = String::from_utf8_lossy(key.strip_suffix(b"\0").unwrap_or(key)).into_owned();
        check(rc, &format!("PMIx_Get({name}) from rank {}", proc_.rank))?;
        if val.is_null() {
            bail!("PMIx_Get({name}) returned no value");
        }
        Ok(Value(val))
    }

    fn fence(&self, collect: bool) -> Result<()> {
        let mut infos = Infos::new().timeout(self.timeout)?;
        if collect {
            infos = infos.collect()?;
        }
        // SAFETY: null procs means every process of our namespace; the
        // info array lives across the call.
        let rc = unsafe { sys::PMIx_Fence(ptr::null(), 0, infos.ptr(), infos.0.len()) };
        check(
            rc,
            &format!(
                "PMIx_Fence on rank {} ({} died, or did not arrive within {:.0} s)",
                self.seat.rank,
                crate::exchange::awaited(self.seat.rank, self.seat.size),
                self.timeout.as_secs_f64()
            ),
        )
    }
}

impl Exchange for Pmix {
    fn kind(&self) -> ExchangeKind {
        ExchangeKind::Pmix
    }

    fn describe(&self) -> String {
        let ns = CStr::from_bytes_until_nul(
            // SAFETY: reinterpreting the fixed c_char array as bytes.
            unsafe { &*(ptr::from_ref(&self.me.nspace) as *const [u8; 256]) },
        )
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
        format!("PMIx {} (namespace {ns})", self.version)
    }

    fn seat(&self) -> Seat {
        self.seat
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.round += 1;
        let key = CString::new(format!("ovbench.{}", self.round)).expect("no NUL in the key");
        let mut val = sys::pmix_value_t {
            type_: sys::PMIX_BYTE_OBJECT as sys::pmix_data_type_t,
            ..Default::default()
        };
        val.data.bo = sys::pmix_byte_object_t {
            bytes: mine.as_ptr().cast_mut().cast(),
            size: mine.len(),
        };
        // SAFETY: PMIx_Put copies the value (the bytes are only read);
        // `key` is NUL-terminated.
        let rc = unsafe { sys::PMIx_Put(sys::PMIX_GLOBAL as u8, key.as_ptr(), &mut val) };
        check(rc, "PMIx_Put")?;
        // SAFETY: no arguments; pushes this process's puts to its server.
        check(unsafe { sys::PMIx_Commit() }, "PMIx_Commit")?;
        self.fence(true)?;
        let bytes = key.as_bytes_with_nul();
        (0..self.seat.size)
            .map(|r| {
                let mut peer = self.me;
                peer.rank = r;
                self.get(&peer, bytes)?.to_bytes("an address")
            })
            .collect()
    }

    fn barrier(&mut self) -> Result<()> {
        self.fence(false)
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.finalize()
    }
}

impl Pmix {
    fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        // SAFETY: once per session (the flag above); no info array.
        check(
            unsafe { sys::PMIx_Finalize(ptr::null(), 0) },
            "PMIx_Finalize",
        )
    }
}

impl Drop for Pmix {
    fn drop(&mut self) {
        // Launchers count a client that exits without finalizing as failed.
        let _ = self.finalize();
    }
}
