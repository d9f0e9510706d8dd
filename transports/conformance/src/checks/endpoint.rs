//! Checks on one endpoint alone: identity, capabilities, regions.

use super::net::{first_diff, pattern};
use crate::Endpoints;
use ovbench_core::{LocalSlice, Rank};

/// Ranks, sizes and capability axes are self-consistent.
pub fn identity_and_caps(ts: &mut Endpoints) -> Result<(), String> {
    let n = ts.len() as u32;
    for (r, t) in ts.iter().enumerate() {
        if t.rank() != r as Rank || t.size() != n {
            return Err(format!(
                "endpoint {r} says rank {} of {}",
                t.rank(),
                t.size()
            ));
        }
        let c = t.caps();
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
        if c.native_sync_send && !c.native_tagged {
            return Err(format!(
                "rank {r}: synchronous tagged send without a tagged path"
            ));
        }
        if t.info().name.is_empty() {
            return Err(format!("rank {r}: info() has no transport name"));
        }
        if let Some(fd) = t.wait_fd() {
            if fd < 0 {
                return Err(format!("rank {r}: wait_fd {fd} is not a descriptor"));
            }
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
    t.read_region(all, &mut |b| {
        zero = b.len() == len && b.iter().all(|&x| x == 0)
    })
    .map_err(|e| format!("read_region: {e}"))?;
    if !zero {
        return Err("a fresh region is not zeroed (or has the wrong length)".into());
    }
    let part = LocalSlice::new(region, 100, 5000);
    t.write_region(part, &mut |b| pattern(b, 9))
        .map_err(|e| format!("write_region: {e}"))?;
    let mut back = Vec::new();
    t.read_region(all, &mut |b| back.extend_from_slice(b))
        .map_err(|e| format!("read_region: {e}"))?;
    let mut want = vec![0u8; len];
    pattern(&mut want[100..5100], 9);
    if back != want {
        return Err(format!(
            "read_region after write_region: {}",
            first_diff(&back, &want)
        ));
    }
    if t.read_region(LocalSlice::new(region, len - 10, 20), &mut |_| ())
        .is_ok()
    {
        return Err("read_region past the end of a region succeeded".into());
    }
    if t.write_region(LocalSlice::new(region, len, 1), &mut |b| b.fill(1))
        .is_ok()
    {
        return Err("write_region past the end of a region succeeded".into());
    }
    if t.register(LocalSlice::new(region, 5000, len)).is_ok() {
        return Err("registering a range past the end of a region succeeded".into());
    }
    let mr = t.register(part).map_err(|e| format!("register: {e}"))?;
    t.deregister(mr).map_err(|e| format!("deregister: {e}"))?;
    t.free(region).map_err(|e| format!("free: {e}"))?;
    if t.read_region(LocalSlice::new(region, 0, 1), &mut |_| ())
        .is_ok()
    {
        return Err("read_region of a freed region succeeded".into());
    }
    if t.free(region).is_ok() {
        return Err("freeing a region twice succeeded".into());
    }
    Ok(())
}
