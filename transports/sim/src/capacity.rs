//! Whether this process can hold `np` simulated ranks, checked before any
//! is made: each rank's coroutine stack is a mapping of its own (with a
//! guard page: two entries in the kernel's map count), and the kernel
//! refuses mappings beyond `vm.max_map_count` — a run past it would fail
//! half-way through making the ranks.

/// Map entries one rank's stack takes (the stack and its guard page).
const MAPS_PER_RANK: u64 = 2;
/// Map entries left for everything else (libraries, heap, buffers).
const MAPS_SPARE: u64 = 4096;
/// Memory one rank holds at least while it runs (its state, the touched
/// part of its stack, queues and message buffers), kept well above what a
/// run of the methods measures, so the check errs on the safe side.
const BYTES_PER_RANK: u64 = 64 * 1024;

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

/// The most ranks this process can make now, and why no more: the map
/// count limit and the memory available. `None` where the limits cannot be
/// read (then nothing is refused).
pub fn max_ranks() -> Option<(u64, String)> {
    let max_maps = read_u64("/proc/sys/vm/max_map_count", None)?;
    let used = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count() as u64)
        .unwrap_or(0);
    let by_maps = max_maps.saturating_sub(used + MAPS_SPARE) / MAPS_PER_RANK;
    let avail_kib = read_u64("/proc/meminfo", Some("MemAvailable:")).unwrap_or(u64::MAX / 1024);
    let by_mem = avail_kib.saturating_mul(1024) / BYTES_PER_RANK;
    Some(if by_maps <= by_mem {
        (
            by_maps,
            format!(
                "each rank's stack is a memory mapping and vm.max_map_count is {max_maps} ({used} in use)"
            ),
        )
    } else {
        (
            by_mem,
            format!(
                "each rank needs about {} KiB and {} MiB are available",
                BYTES_PER_RANK / 1024,
                avail_kib / 1024
            ),
        )
    })
}

/// An error naming the limit when `np` ranks do not fit.
pub fn check(np: u32) -> Result<(), String> {
    match max_ranks() {
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
        let e = check(u32::MAX).unwrap_err();
        assert!(
            e.contains("at most") && e.contains("--np 4294967295"),
            "{e}"
        );
    }
}
