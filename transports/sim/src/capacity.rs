//! Whether this process can hold `np` simulated ranks, checked before any
//! is made: each rank's coroutine stack is a mapping of its own (with a
//! guard page: two entries in the kernel's map count), and the kernel
//! refuses mappings beyond `vm.max_map_count` — a run past it would fail
//! half-way through making the ranks. Their memory is checked against
//! every limit the process has ([`HostLimits`]), not the host's alone.

#![deny(clippy::arithmetic_side_effects)]

use ovbench_core::host_limits::HostLimits;

/// Map entries one rank's stack takes (the stack and its guard page).
const MAPS_PER_RANK: u64 = 2;
/// Map entries left for everything else (libraries, heap, buffers).
const MAPS_SPARE: u64 = 4096;
/// Memory one rank holds at least while it runs (its state, the touched
/// part of its stack, queues and message buffers), kept well above what a
/// run of the methods measures, so the check errs on the safe side.
const BYTES_PER_RANK: u64 = 64 * 1024;
/// And per peer: each rank's engine keeps per-peer state (sequence
/// numbers, credits, match lists), so a run's memory grows as P². About
/// 8 B a peer was measured (54 KiB a rank at 1000 ranks, 78 at 4000);
/// this keeps a margin over it.
const BYTES_PER_PEER: u64 = 12;

/// What one of `np` ranks holds at least.
pub fn bytes_per_rank(np: u32) -> u64 {
    BYTES_PER_RANK.saturating_add(BYTES_PER_PEER.saturating_mul(u64::from(np)))
}

fn read_u64(path: &str, key: Option<&str>) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    match key {
        None => text.trim().parse().ok(),
        Some(k) => text.lines().find_map(|l| {
            let rest = l.strip_prefix(k)?;
            rest.split_whitespace().next()?.parse().ok()
        }),
    }
}

/// The most of `np` ranks this process can make now, and why no more: the
/// map count limit and the memory it may take (the host's MemAvailable,
/// its memory cgroups' limits, RLIMIT_AS: every simulated rank lives in
/// this one process). `None` where no limit can be read (then nothing is
/// refused).
pub fn max_ranks(np: u32) -> Option<(u64, String)> {
    let max_maps = read_u64("/proc/sys/vm/max_map_count", None)?;
    let used = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count() as u64)
        .unwrap_or(0);
    let by_maps = max_maps.saturating_sub(used.saturating_add(MAPS_SPARE)) / MAPS_PER_RANK;
    let limits = HostLimits::default();
    let memory = [limits.memory(), limits.address_space()]
        .into_iter()
        .flatten()
        .min_by_key(|l| l.left);
    let per_rank = bytes_per_rank(np);
    let by_mem = memory.as_ref().map_or(u64::MAX, |l| {
        l.left.checked_div(per_rank).unwrap_or(u64::MAX)
    });
    Some(match memory {
        Some(l) if by_mem < by_maps => (
            by_mem,
            format!(
                "at {np} ranks each needs about {} KiB, and {} MiB are left under {}",
                per_rank / 1024,
                l.left >> 20,
                l.what
            ),
        ),
        _ => (
            by_maps,
            format!(
                "each rank's stack is a memory mapping and vm.max_map_count is {max_maps} ({used} in use)"
            ),
        ),
    })
}

/// An error naming the limit when `np` ranks do not fit.
pub fn check(np: u32) -> Result<(), String> {
    match max_ranks(np) {
        Some((max, why)) if u64::from(np) > max => Err(format!(
            "--transport sim --np {np}: this host can simulate at most {max} ranks at once ({why}); use fewer ranks"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_fits_and_a_huge_one_does_not() {
        assert!(check(4).is_ok());
        // The per-peer state makes a rank of a large run dearer.
        assert_eq!(bytes_per_rank(1000), 64 * 1024 + 12_000);
        let e = check(u32::MAX).unwrap_err();
        assert!(
            e.contains("at most") && e.contains("--np 4294967295"),
            "{e}"
        );
    }
}
