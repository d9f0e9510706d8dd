//! The name of a shm endpoint, and so of its segment in `/dev/shm`.
//!
//! libfabric's shm provider names a segment after the pid that creates it
//! (`<pid>:<n>:<m>` with libfabric 1.17) and removes it in `fi_close`. A
//! rank that is killed never closes, so its segment stays. When the kernel
//! later hands that pid to a new process, the provider finds the old
//! segment, sees its recorded pid alive (the new process itself) and fails
//! `fi_enable` with `-FI_EBUSY` ("Device or resource busy"): seen here, in
//! a benchmark run after a day of tests that kill ranks on purpose.
//!
//! ovbench names its shm endpoints itself (`fi_setname`), with the pid,
//! the clock and a per-process count, so no name repeats from one process
//! to the next: a dead rank's segment is never in the way, and nothing of
//! anyone else's in `/dev/shm` is touched.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What every segment of process `pid`'s endpoints is named with.
fn prefix(pid: u32) -> String {
    format!("ovbench-{pid}-")
}

/// A name no other endpoint, earlier or later, has: NUL-terminated, as
/// `fi_setname` takes it.
pub fn unique() -> Vec<u8> {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut name = format!("{}{nanos:x}-{n}", prefix(std::process::id())).into_bytes();
    name.push(0);
    name
}

/// The segments in `/dev/shm` of process `pid`'s shm endpoints: what a
/// killed rank leaves behind, for whoever killed it to remove.
pub fn segments_of(pid: u32) -> Vec<PathBuf> {
    let prefix = prefix(pid);
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with(&prefix))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_and_end_in_nul() {
        let (a, b) = (unique(), unique());
        assert_ne!(a, b);
        for n in [&a, &b] {
            assert_eq!(n.last(), Some(&0));
            assert!(!n[..n.len() - 1].contains(&0) && !n.contains(&b'/'));
        }
    }
}
