//! The limit reader on fixture trees: a cgroup v1 host (this one's
//! layout), a cgroup v2 host, a container whose mount root is a subtree,
//! and the rlimits.

use super::*;

/// A fixture tree: each (path, contents) written below a fresh directory.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str, files: &[(&str, &str)]) -> Tree {
        // Tests run in parallel: each tree gets a name of its own.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("ovbench-limits-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (p, text) in files {
            let f = root.join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        Tree(root)
    }
    fn limits(&self) -> HostLimits {
        HostLimits::at(&self.0)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const MEMINFO: &str = "MemTotal: 25000000 kB\nMemAvailable: 20971520 kB\n";
const STATUS: &str = "Name:\tovbench\nVmSize:\t 1048576 kB\n";
const LIMITS: &str =
    "Limit                     Soft Limit           Hard Limit           Units     \n\
Max processes             96363                96363                processes \n\
Max address space         unlimited            unlimited            bytes     \n";

const V1_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
38 30 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
40 30 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

fn v1_host(job_limit: &str, pids_max: &str) -> Tree {
    Tree::new(
        "v1",
        &[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/status", STATUS),
            ("/proc/self/limits", LIMITS),
            (
                "/proc/self/cgroup",
                "8:pids:/batch/job7\n4:memory:/batch/job7\n0::/\n",
            ),
            ("/proc/self/mountinfo", V1_MOUNTS),
            // The job's cgroup: 4 GiB, 1 GiB in use of which 256 MiB is cache.
            (
                "/sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes",
                job_limit,
            ),
            (
                "/sys/fs/cgroup/memory/batch/job7/memory.usage_in_bytes",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/memory/batch/job7/memory.stat",
                "cache 300000000\ntotal_inactive_file 268435456\n",
            ),
            // Its parent: no limit (v1's huge value).
            (
                "/sys/fs/cgroup/memory/batch/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/batch/memory.usage_in_bytes",
                "5000000000\n",
            ),
            ("/sys/fs/cgroup/pids/batch/job7/pids.max", pids_max),
            ("/sys/fs/cgroup/pids/batch/job7/pids.current", "12\n"),
            ("/sys/fs/cgroup/pids/batch/pids.max", "max\n"),
            ("/sys/fs/cgroup/pids/batch/pids.current", "40\n"),
        ],
    )
}

#[test]
fn v1_memory_limit_binds_below_mem_available() {
    let t = v1_host("4294967296\n", "300\n");
    let m = t.limits().memory().unwrap();
    // 4096 MiB less (1024 − 256) MiB in use.
    assert_eq!(m.left, (4096 - 768) * MIB);
    assert!(
        m.what
            .contains("cgroup v1 memory.limit_in_bytes of /batch/job7")
            && m.what.contains("4096 MiB"),
        "{}",
        m.what
    );
}

#[test]
fn without_a_cgroup_limit_mem_available_binds() {
    let t = v1_host("9223372036854771712\n", "max\n");
    let m = t.limits().memory().unwrap();
    assert_eq!(m.left, 20 * 1024 * MIB);
    assert!(m.what.contains("MemAvailable"), "{}", m.what);
    // No pids limit anywhere.
    assert_eq!(t.limits().tasks(), None);
}

#[test]
fn v1_pids_limit_is_what_is_left_of_it() {
    let t = v1_host("9223372036854771712\n", "300\n");
    let p = t.limits().tasks().unwrap();
    assert_eq!(p.left, 288);
    assert!(
        p.what
            .contains("cgroup v1 pids.max of /batch/job7 (300 tasks, 12 running)"),
        "{}",
        p.what
    );
}

#[test]
fn a_parent_cgroup_can_bind() {
    let t = Tree::new(
        "v2",
        &[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/status", STATUS),
            ("/proc/self/limits", LIMITS),
            ("/proc/self/cgroup", "0::/user.slice/job/step\n"),
            (
                "/proc/self/mountinfo",
                "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
            ),
            ("/sys/fs/cgroup/user.slice/job/step/memory.max", "max\n"),
            ("/sys/fs/cgroup/user.slice/job/step/memory.current", "100\n"),
            ("/sys/fs/cgroup/user.slice/job/memory.max", "2147483648\n"),
            (
                "/sys/fs/cgroup/user.slice/job/memory.current",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/user.slice/job/memory.stat",
                "anon 800000000\ninactive_file 536870912\n",
            ),
            ("/sys/fs/cgroup/user.slice/job/step/pids.max", "1000\n"),
            ("/sys/fs/cgroup/user.slice/job/step/pids.current", "10\n"),
            ("/sys/fs/cgroup/user.slice/pids.max", "100\n"),
            ("/sys/fs/cgroup/user.slice/pids.current", "60\n"),
        ],
    );
    let m = t.limits().memory().unwrap();
    assert_eq!(m.left, (2048 - 512) * MIB);
    assert!(
        m.what.contains("cgroup v2 memory.max of /user.slice/job "),
        "{}",
        m.what
    );
    // user.slice has 40 left, the step 990.
    let p = t.limits().tasks().unwrap();
    assert_eq!(p.left, 40);
    assert!(p.what.contains("of /user.slice ("), "{}", p.what);
}

#[test]
fn a_container_sees_its_cgroup_below_the_mount_root() {
    // The mount's root is the container's own subtree: /proc/self/cgroup
    // names the full path, the files lie below the mount point.
    let t = Tree::new(
        "ns",
        &[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/status", STATUS),
            ("/proc/self/limits", LIMITS),
            ("/proc/self/cgroup", "0::/docker/abc\n"),
            (
                "/proc/self/mountinfo",
                "25 1 0:22 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            ("/sys/fs/cgroup/memory.max", "1073741824\n"),
            ("/sys/fs/cgroup/memory.current", "0\n"),
        ],
    );
    let m = t.limits().memory().unwrap();
    assert_eq!(m.left, 1024 * MIB);
    assert!(m.what.contains("of /docker/abc "), "{}", m.what);
}

#[test]
fn rlimits_bind_where_set() {
    let t = Tree::new(
        "rl",
        &[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/status", STATUS),
            (
                "/proc/self/limits",
                "Max processes             50                   50                   processes \n\
                 Max address space         4294967296           unlimited            bytes     \n",
            ),
        ],
    );
    let a = t.limits().address_space().unwrap();
    assert_eq!(a.left, 3 * 1024 * MIB);
    assert!(a.what.contains("RLIMIT_AS"), "{}", a.what);
    // Unset, or the files missing: no limit rather than a guess.
    let none = Tree::new("none", &[]);
    assert_eq!(none.limits().memory(), None);
    assert_eq!(none.limits().address_space(), None);
    assert_eq!(none.limits().tasks(), None);
}

#[test]
fn mount_points_with_spaces_are_unescaped() {
    assert_eq!(unescape("/a\\040b"), "/a b");
    assert_eq!(parse_limit("max"), None);
    assert_eq!(parse_limit("9223372036854771712"), None);
    assert_eq!(parse_limit("4096\n"), Some(4096));
}
