//! Every command of ovbench, run small under `--transport sim` (virtual
//! time, so each run's numbers are exactly repeatable) with `--json` and
//! `--csv`: what tests/json_schema.rs validates and tests/snapshots.rs
//! snapshots.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Each command with small sizes and iterations (every one well under a
/// second in a debug build). A new command belongs here, and in the
/// schema's `header.command` enum (json_schema.rs checks the two agree).
pub const COMMANDS: &[(&str, &[&str])] = &[
    (
        "latency",
        &["--sizes", "8,4K", "--iters", "20", "--warmup", "2"],
    ),
    (
        "bw",
        &[
            "--sizes", "8,4K", "--iters", "5", "--warmup", "1", "--window", "4",
        ],
    ),
    (
        "bibw",
        &[
            "--sizes", "8,4K", "--iters", "5", "--warmup", "1", "--window", "4",
        ],
    ),
    (
        "msgrate",
        &[
            "--sizes", "8,4K", "--iters", "5", "--warmup", "1", "--window", "4",
        ],
    ),
    (
        "overhead",
        &["--sizes", "8,1K", "--iterations", "20", "--repeats", "1"],
    ),
    (
        "overlap",
        &["--sizes", "10K", "--iters", "2", "--steps", "2"],
    ),
    ("logp", &["--max-size", "1K", "--max-its", "20"]),
    (
        "bcast",
        &["--method", "all", "--reps", "2", "--msgsize", "64"],
    ),
    (
        "commtest",
        &["--total", "4K", "--min-packet", "1K", "--iterations", "2"],
    ),
];

/// The args of `cmd` in [`COMMANDS`].
pub fn args(cmd: &str) -> &'static [&'static str] {
    COMMANDS
        .iter()
        .find(|(c, _)| *c == cmd)
        .unwrap_or_else(|| panic!("{cmd} is not in COMMANDS"))
        .1
}

/// What one run wrote: the printed table (stdout), the JSON file's text
/// and the CSV files (their names, relative to the scratch directory, and
/// contents, in table order).
#[derive(Debug)]
pub struct Run {
    pub command_line: String,
    pub stdout: String,
    pub json_text: String,
    pub json: serde_json::Value,
    pub csv: Vec<(String, String)>,
    /// The scratch directory the files were in (gone by now).
    pub dir: String,
}

fn scratch(cmd: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "ovbench-simcmd-{}-{}-{cmd}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// `ovbench CMD --transport sim ARGS --json DIR/out.json --csv DIR/out.csv`;
/// an exit other than 0 fails with its stderr.
pub fn run(cmd: &str) -> Run {
    let dir = scratch(cmd);
    let (json, csv) = (dir.join("out.json"), dir.join("out.csv"));
    let mut c = Command::new(env!("CARGO_BIN_EXE_ovbench"));
    c.arg(cmd)
        .args(["--transport", "sim"])
        .args(args(cmd))
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv);
    // The user's fabric variables are recorded in the header: none here.
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("UCX_") || k.starts_with("FI_"))
        {
            c.env_remove(&k);
        }
    }
    let command_line = format!("{c:?}");
    let out = c.output().expect("start ovbench");
    assert!(
        out.status.success(),
        "{command_line} exited {:?}:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json_text = std::fs::read_to_string(&json).expect("JSON written");
    let doc: serde_json::Value = serde_json::from_str(&json_text)
        .unwrap_or_else(|e| panic!("{command_line}: unreadable JSON: {e}"));
    let files = doc["header"]["csv_files"]
        .as_array()
        .unwrap_or_else(|| panic!("{command_line}: no header.csv_files"));
    let csv = files
        .iter()
        .map(|f| {
            let p = PathBuf::from(f["file"].as_str().expect("csv_files[].file"));
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            let name = p
                .strip_prefix(&dir)
                .unwrap_or_else(|_| panic!("{p:?} outside {dir:?}"))
                .display()
                .to_string();
            (name, text)
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    Run {
        command_line,
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        json_text,
        json: doc,
        csv,
        dir: dir.display().to_string(),
    }
}
