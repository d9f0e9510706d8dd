//! Running the real `ovbench` binary from end-to-end tests: one run at a
//! time (docs/architecture.md: end-to-end tests run one at a time, the ranks need
//! the cores), each with a deadline after which it is killed.

#![allow(dead_code)]

pub mod cage;
mod shell;

// Each test crate uses some of these (as with dead_code above).
#[allow(unused_imports)]
pub use shell::{assert_holds, stdout_of, words};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Hold this while a test runs the binary.
pub fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a run produced.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    /// Panic with the whole output unless the run succeeded.
    pub fn expect_ok(self) -> Run {
        assert!(
            self.ok(),
            "ovbench failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// `ovbench ARGS`, to be spawned: no stdin, stdout and stderr piped.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ovbench"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Read `pipe` to its end on a thread of its own, so that a full pipe
/// never stalls the child.
pub fn drain(pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || std::io::read_to_string(pipe).unwrap_or_default())
}

/// Run `ovbench args…`, killing it after `limit`.
pub fn ovbench(args: &[&str], limit: Duration) -> Run {
    run(&mut command(args), limit)
}

/// Run `cmd` (as [`command`] makes it), killing it after `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd.spawn().expect("start ovbench");
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} ran past {limit:?}; stderr so far:\n{}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// The children of `parent` (a launcher's: its ranks), from /proc.
pub fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // "pid (comm) state ppid …": the comm may hold spaces.
                    let after = &s[s.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ovbench-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A test's fresh scratch directory, held with the one-run-at-a-time
/// lock ([`serial`]); removed when the test is done with it, and kept
/// after a failure for a look.
pub struct Scratch {
    dir: PathBuf,
    _serial: MutexGuard<'static, ()>,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let _serial = serial();
        Scratch {
            dir: scratch(name),
            _serial,
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Read a JSON export.
pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// The rows of the first table of an export (`tables[0].rows`).
/// Refuses a document of another schema, naming the one it reads.
pub fn rows(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    let want = ovbench::export::SCHEMA;
    assert_eq!(
        doc["schema"], want,
        "JSON schema {}, but these tests read {want}: rebuild ovbench",
        doc["schema"]
    );
    doc["tables"][0]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `ovbench ARGS --json OUT`, which must succeed: the run and the rows
/// of its export's first table.
pub fn ovbench_rows(args: &[&str], out: &Path, limit: Duration) -> (Run, Vec<serde_json::Value>) {
    let mut args = args.to_vec();
    args.extend_from_slice(&["--json", out.to_str().expect("utf-8 scratch path")]);
    let run = ovbench(&args, limit).expect_ok();
    (run, rows(&json(out)))
}

/// `ovbench latency <fabric flags> --proto PROTO --sizes 8,1M --verify
/// --json OUT` with `iters`/`warmup`: the two JSON rows (8 B and 1 MiB).
/// Shared by the fabric end-to-end tests (UCX, libfabric).
pub fn fabric_latency_rows(
    out: &Path,
    fabric: &[&str],
    proto: &str,
    iters: u64,
    warmup: u64,
    limit: Duration,
) -> Vec<serde_json::Value> {
    let (iters, warmup) = (iters.to_string(), warmup.to_string());
    let mut args = vec!["latency"];
    args.extend_from_slice(fabric);
    args.extend_from_slice(&[
        "--proto", proto, "--sizes", "8,1M", "--iters", &iters, "--warmup", &warmup, "--verify",
    ]);
    let (r, rows) = ovbench_rows(&args, out, limit);
    assert!(r.stdout.contains("1048576"), "{}", r.stdout);
    assert_eq!(rows.len(), 2, "{fabric:?}/{proto}: {rows:?}");
    rows
}

/// An 8 B eager ping-pong over `fabric` (200 timed round trips after 20
/// of warm-up) into `out`: every send took the engine's fast path
/// (`ops.fast_sends` is all of `ops.sends`), and every arrival but at
/// most the first ping (`ops.fast_recvs`). Returns the row.
///
/// The first ping may come before rank 1's receive: a rank descheduled in
/// the barrier before the ping-pong can take the barrier's last message
/// and the ping in one poll (one read of a TCP stream, one UCX progress),
/// and the ping then waits as unexpected. After it, no message can come
/// early: each waits for the other side's reply, and no send hands
/// arrivals to the engine. Under the sim (virtual time) the count is exact.
pub fn fast_path_ping_pong(fabric: &[&str], out: &Path, limit: Duration) -> serde_json::Value {
    let mut args = vec!["latency"];
    args.extend_from_slice(fabric);
    args.extend_from_slice(&[
        "--proto", "eager", "--sizes", "8", "--iters", "200", "--warmup", "20",
    ]);
    let (_, rows) = ovbench_rows(&args, out, limit);
    let row = rows.into_iter().next().expect("one row");
    let messages = 2 * (200 + 20);
    assert_eq!(ops(&row, "sends"), messages, "{fabric:?}: {row}");
    assert_eq!(ops(&row, "fast_sends"), messages, "{fabric:?}: {row}");
    let fast_recvs = ops(&row, "fast_recvs");
    assert!(
        (messages - 1..=messages).contains(&fast_recvs),
        "{fabric:?}: {fast_recvs} of {messages} arrivals on the fast path: {row}"
    );
    row
}

/// One operation count of a row's `ops` object.
pub fn ops(row: &serde_json::Value, key: &str) -> u64 {
    row["ops"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no ops.{key} in {row}"))
}

/// What one operation count of a run must be.
#[derive(Clone, Copy, Debug)]
pub enum Count {
    Zero,
    AtLeast(u64),
}

/// What `--proto native` may issue: tagged sends only, at least `min`.
pub fn tagged_only(min: u64) -> [(&'static str, Count); 4] {
    [
        ("tagged_sends", Count::AtLeast(min)),
        ("sends", Count::Zero),
        ("writes", Count::Zero),
        ("reads", Count::Zero),
    ]
}

/// What an own rendezvous protocol may issue: `data` (a write or a read)
/// once per message and `controls` control messages as sends per
/// message, at least `min` messages; no tagged send, no `other` operation.
pub fn rendezvous(
    data: &'static str,
    other: &'static str,
    controls: u64,
    min: u64,
) -> [(&'static str, Count); 4] {
    [
        ("tagged_sends", Count::Zero),
        (data, Count::AtLeast(min)),
        ("sends", Count::AtLeast(controls * min)),
        (other, Count::Zero),
    ]
}

/// A fabric latency run, `(fabric choice, --proto, the counts its rows must show)`.
pub type OpsCase<'a> = (&'a str, &'a str, &'a [(&'a str, Count)]);

/// Run each case with `latency(dir, choice, proto)` in the scratch
/// directory `name`: every row's operation counts are as the case says,
/// and its p50 is positive.
pub fn check_ops(
    name: &str,
    cases: &[OpsCase],
    latency: impl Fn(&Path, &str, &str) -> Vec<serde_json::Value>,
) {
    let dir = Scratch::new(name);
    for &(choice, proto, want) in cases {
        for row in latency(&dir, choice, proto) {
            for &(key, count) in want {
                let n = ops(&row, key);
                match count {
                    Count::Zero => assert_eq!(n, 0, "{choice}/{proto} issued {key}: {row}"),
                    Count::AtLeast(k) => assert!(n >= k, "{choice}/{proto}: {key} < {k}: {row}"),
                }
            }
            assert!(row["p50_ns"].as_f64().unwrap() > 0.0, "{row}");
        }
    }
}
