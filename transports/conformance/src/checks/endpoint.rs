//! Checks on one endpoint alone: identity, capabilities, regions.
//! (`wait_fd` is inherent to the transports that have one; their own
//! tests check it.)

use super::net::{first_diff, pattern};
use crate::Endpoints;
use ovbench_core::{LocalSlice, Rank};

/// Ranks, sizes and capability axes are self-consistent.
pub fn identity_and_caps(ts: &mut Endpoints) -> Result<(), String> {
    let n = ts.len() as u32;
    for (r, t) in ts.iter_mut().enumerate() {
        let info = t.info();
        if info.rank != r as Rank || info.size != n {
            return Err(format!(
                "endpoint {r} says rank {} of {}",
                info.rank, info.size
            ));
        }
        let c = &info.caps;
        if c.eager_buf_size < 256 {
            return Err(format!(
                "rank {r}: eager buffer of {} bytes cannot hold a protocol header and a key",
                c.eager_buf_size
            ));
        }
        if c.rma_progress == ovbench_core::RmaProgress::Offloaded
            && c.rma == ovbench_core::RmaKind::Emulated
        {
            return Err(format!("rank {r}: emulated RMA cannot be offloaded"));
        }
        if info.name.is_empty() {
            return Err(format!("rank {r}: info() has no transport name"));
        }
        if c.native_sync_send && t.tagged().is_none() {
            return Err(format!(
                "rank {r}: caps offer a synchronous tagged send, yet tagged() is None"
            ));
        }
    }
    Ok(())
}

/// Allocation is zeroed; local reads and writes round-trip; out-of-range
/// access and freed regions are refused.
pub fn regions(ts: &mut Endpoints) -> Result<(), String> {
    let t = &mut ts[0];
    let len = 10_000;
    let region = t.alloc(len).map_err(|e| format!("alloc: {e}"))?;
    let all = LocalSlice::new(region, 0, len);
    let mut zero = true;
    t.region(all, &mut |b| {
        zero = b.len() == len && b.iter().all(|&x| x == 0)
    })
    .map_err(|e| format!("region (read): {e}"))?;
    if !zero {
        return Err("a fresh region is not zeroed (or has the wrong length)".into());
    }
    let part = LocalSlice::new(region, 100, 5000);
    t.region(part, &mut |b| pattern(b, 9))
        .map_err(|e| format!("region (write): {e}"))?;
    let mut back = Vec::new();
    t.region(all, &mut |b| back.extend_from_slice(b))
        .map_err(|e| format!("region (read): {e}"))?;
    let mut want = vec![0u8; len];
    pattern(&mut want[100..5100], 9);
    if back != want {
        return Err(format!(
            "a region read back after a write: {}",
            first_diff(&back, &want)
        ));
    }
    if t.region(LocalSlice::new(region, len - 10, 20), &mut |_| ())
        .is_ok()
    {
        return Err("access to a range crossing the end of a region succeeded".into());
    }
    if t.region(LocalSlice::new(region, len, 1), &mut |b| b.fill(1))
        .is_ok()
    {
        return Err("access to a range starting at the end of a region succeeded".into());
    }
    if t.register(LocalSlice::new(region, 5000, len)).is_ok() {
        return Err("registering a range past the end of a region succeeded".into());
    }
    let reg = t.register(part).map_err(|e| format!("register: {e}"))?;
    t.deregister(reg.mr)
        .map_err(|e| format!("deregister: {e}"))?;
    t.free(region).map_err(|e| format!("free: {e}"))?;
    if t.region(LocalSlice::new(region, 0, 1), &mut |_| ()).is_ok() {
        return Err("access to a freed region succeeded".into());
    }
    if t.free(region).is_ok() {
        return Err("freeing a region twice succeeded".into());
    }
    Ok(())
}
