//! Command lines, helper programs and checks of what a run printed,
//! shared by the end-to-end support module (tests/common) and the
//! cluster tests' (tests/cluster, which includes this file by path).

use std::process::Command;

/// The words of `line`: a command line written as a user types it.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Run `cmd` (a helper program, not ovbench) to its end and require
/// success, its stderr in the failure; its stdout.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (ci/deps installs what tests need)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Panic unless `text` (what a run printed) holds every one of `wanted`;
/// the message names the missing ones and shows the whole text.
#[track_caller]
pub fn assert_holds(text: &str, wanted: &[&str]) {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !text.contains(w))
        .collect();
    assert!(missing.is_empty(), "{missing:?} not in:\n{text}");
}
