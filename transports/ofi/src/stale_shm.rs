//! Segments left in `/dev/shm` under this process's pid.
//!
//! libfabric's shm provider names an endpoint's segment after the pid
//! that creates it (`<pid>:<n>:<m>` with libfabric 1.17) and removes it in
//! `fi_close`. A rank that is killed never closes, so its segment stays.
//! When the kernel later hands that pid to a new process, the provider
//! finds the old segment, sees its recorded pid alive (the new process
//! itself) and fails `fi_enable` with `-FI_EBUSY` ("Device or resource
//! busy"): seen here, in a benchmark run after a day of tests that kill
//! ranks on purpose.
//!
//! Before its first shm endpoint, a process removes segments that carry
//! its own pid: it has made none yet, and no other live process can hold
//! that pid, so their creator is gone.

use std::path::Path;
use std::sync::Once;

const SHM_DIR: &str = "/dev/shm";

/// Remove this process's stale segments, once per process.
pub fn clear_own() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        clear(Path::new(SHM_DIR), std::process::id());
    });
}

/// Remove `dir`'s entries named `<pid>:` and then digits and colons only;
/// how many were removed. Anything unreadable is left alone.
fn clear(dir: &Path, pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let prefix = format!("{pid}:");
    entries
        .flatten()
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix(&prefix)
                    .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == ':'))
            })
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_this_pids_segments() {
        let dir = std::env::temp_dir().join(format!("ovbench-stale-shm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in [
            "4242:0:0",
            "4242:1:0",
            "42420:0:0",
            "4242:x",
            "ucx_shm_4242",
            "424:0:0",
        ] {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        assert_eq!(clear(&dir, 4242), 2);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["42420:0:0", "4242:x", "424:0:0", "ucx_shm_4242"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
