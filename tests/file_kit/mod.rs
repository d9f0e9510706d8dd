//! The files bad_input's c: (input files) and d: (output files) cases
//! read and name (docs/files.md), and the check that no case damaged
//! one: after every case, each file of the scratch directory has the
//! same kind, bytes (or size and inode, for the large sparse ones) and
//! symlink target as before, and no file came or went.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A 300-byte file name (over NAME_MAX), for `@LONG`.
pub fn long_name() -> String {
    "x".repeat(300)
}

/// A `--csv` name that leaves no room for its tables' `.<table>.csv`.
pub fn csv_long_name() -> String {
    format!("{}.csv", "c".repeat(236))
}

/// `arg` with the placeholders replaced: `@DIR`, `@LONG`, `@CSVLONG`,
/// and `@NONUTF8` (a directory name that is no UTF-8, which does not exist).
pub fn expand(arg: &str, dir: &str) -> OsString {
    let s = arg
        .replace("@DIR", dir)
        .replace("@LONG", &long_name())
        .replace("@CSVLONG", &csv_long_name());
    let mut b = Vec::new();
    let mut rest = s.as_str();
    while let Some(at) = rest.find("@NONUTF8") {
        b.extend_from_slice(&rest.as_bytes()[..at]);
        b.extend_from_slice(b"d\xe9j\xe0");
        rest = &rest[at + "@NONUTF8".len()..];
    }
    b.extend_from_slice(rest.as_bytes());
    OsString::from_vec(b)
}

/// The input and output fixtures, in `dir`.
pub fn make(dir: &Path) {
    let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    w("t8.txt", b"8 100\n16 200\n");
    w("hosts.txt", b"localhost\n");
    w("hosts-latin1.txt", b"node1\nn\xe9ud2\n");
    w("nul.txt", b"8 100\n16\0 200\n");
    w("nul.json", b"{\"schema\": \"x\",\n \"a\": \"\0\"}\n");
    w("latin1.json", b"{\"schema\":\n \"caf\xe9\"}\n");
    w("bad.json", b"{\n  \"schema\": 1,\n  oops\n}\n");
    w(
        "deep.json",
        format!("{}{}", "[".repeat(100), "]".repeat(100)).as_bytes(),
    );
    std::os::unix::fs::symlink("t8.txt", dir.join("t8-link.txt")).unwrap();
    std::os::unix::fs::symlink("loop.json", dir.join("loop.json")).unwrap();
    std::fs::hard_link(dir.join("t8.txt"), dir.join("t8-hard.txt")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink("sub/made.csv", dir.join("dangling.json")).unwrap();
    // Sparse: over the caps of a table (1 MiB) and a result (64 MiB).
    let sparse = |name: &str, len: u64| {
        std::fs::File::create(dir.join(name))
            .unwrap()
            .set_len(len)
            .unwrap()
    };
    sparse("big.txt", 2 << 20);
    sparse("big.json", 65 << 20);
    for fifo in ["fifo-in", "fifo-out"] {
        let ok = std::process::Command::new("mkfifo")
            .arg(dir.join(fifo))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo {fifo}");
    }
    // An endless writer: every reader of fifo-in meets a stream of zeros
    // that only the cap stops (a closed reader ends each round: EPIPE).
    let fifo = dir.join("fifo-in");
    std::thread::spawn(move || loop {
        use std::io::Write;
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
            return;
        };
        let zeros = [0u8; 65536];
        while f.write_all(&zeros).is_ok() {}
    });
}

/// One file as a case must leave it.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    Link(std::path::PathBuf),
    Fifo,
    Dir,
    File {
        bytes: Option<Vec<u8>>,
        len: u64,
        ino: u64,
    },
}

/// Every file of `dir` (not below it).
pub fn snapshot(dir: &Path) -> BTreeMap<OsString, State> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let t = md.file_type();
        let s = if t.is_symlink() {
            State::Link(std::fs::read_link(&p).unwrap_or_default())
        } else if t.is_dir() {
            State::Dir
        } else if md.is_file() {
            State::File {
                bytes: (md.len() <= 1 << 16).then(|| std::fs::read(&p).unwrap_or_default()),
                len: md.len(),
                ino: md.ino(),
            }
        } else {
            State::Fifo
        };
        m.insert(e.file_name(), s);
    }
    m
}

/// What changed between two snapshots, one line per file.
pub fn damage(
    before: &BTreeMap<OsString, State>,
    after: &BTreeMap<OsString, State>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => out.push(format!("{k:?} removed")),
            Some(a) if a != v => out.push(format!("{k:?} changed: {v:?} -> {a:?}")),
            _ => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        out.push(format!("{k:?} created"));
    }
    out
}
