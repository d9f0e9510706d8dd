//! The git commit a header names: the one the build recorded in
//! `OVBENCH_GIT_COMMIT`, or else the commit checked out in the source tree
//! the binary was built from, asked of git once at run time (the top level
//! of the repository is fixed, so there is no build script to record it).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one git query may take before it is given up.
const GIT_DEADLINE: Duration = Duration::from_secs(2);

/// The git commit of this binary: `OVBENCH_GIT_COMMIT` from the build
/// environment when set; otherwise, when the crate's source directory is
/// the top of a git checkout, its short `HEAD` with `-dirty` appended
/// while `git status --porcelain` lists anything (untracked files too:
/// a new module changes the build); otherwise `unknown`. The run-time
/// answer describes the checkout as it is now, which is what the binary
/// was built from under `cargo run`; a binary kept across commits would
/// name the newer commit. Computed once per process.
pub fn git_commit() -> &'static str {
    static COMMIT: OnceLock<String> = OnceLock::new();
    COMMIT.get_or_init(|| match option_env!("OVBENCH_GIT_COMMIT") {
        Some(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => describe(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|| "unknown".into()),
    })
}

/// `HEAD`'s short hash, plus `-dirty` when the work tree has changes, of
/// the checkout whose top level is `dir`; `None` when `dir` is not the top
/// of a checkout or git is missing or fails.
fn describe(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    // A crate unpacked inside some other repository must not report that
    // repository's commit.
    if Path::new(top.trim()).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
    let status = git(dir, &["status", "--porcelain"])?;
    Some(with_dirty(&hash, &status))
}

/// The hash, trimmed, with `-dirty` when `status` (porcelain) lists a change.
fn with_dirty(hash: &str, status: &str) -> String {
    let hash = hash.trim();
    if status.trim().is_empty() {
        hash.to_string()
    } else {
        format!("{hash}-dirty")
    }
}

/// Run `git -C dir args`, with a deadline; its stdout when it succeeds.
/// Optional locks are off so that `git status` never takes the index
/// lock from under someone committing in that checkout, and the caller's
/// `GIT_DIR`-style variables are dropped so that `dir` alone decides.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new("git")
        .arg("--no-optional-locks")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // Drain stdout on the side: a long `status` listing must not fill the
    // pipe and stall git until the deadline.
    let mut pipe = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        pipe.read_to_end(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + GIT_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let out = reader.join().ok()?.ok()?;
    status
        .success()
        .then(|| String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_suffix_only_with_changes() {
        assert_eq!(with_dirty("abc1234\n", ""), "abc1234");
        assert_eq!(with_dirty("abc1234\n", "\n"), "abc1234");
        assert_eq!(with_dirty("abc1234\n", " M src/lib.rs\n"), "abc1234-dirty");
        assert_eq!(with_dirty("abc1234", "?? new.rs\n"), "abc1234-dirty");
    }

    /// A scratch directory of this test's own, removed at the end.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn new(name: &str) -> Scratch {
            let p = std::env::temp_dir().join(format!(
                "ovbench-git-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn have_git() -> bool {
        git(Path::new("."), &["--version"]).is_some()
    }

    #[test]
    fn not_a_checkout_is_none() {
        let d = Scratch::new("plain");
        assert_eq!(describe(&d.0), None);
        // A subdirectory of a checkout is not its top.
        if have_git() {
            let sub = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
            assert_eq!(describe(&sub), None);
        }
    }

    #[test]
    fn checkout_gives_head_then_dirty() {
        if !have_git() {
            eprintln!("git not found: skipped");
            return;
        }
        let d = Scratch::new("repo");
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(&d.0)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "-q"]);
        std::fs::write(d.0.join("a.txt"), "one\n").unwrap();
        run(&["add", "a.txt"]);
        run(&["commit", "-q", "-m", "one"]);
        let head = git(&d.0, &["rev-parse", "--short", "HEAD"]).unwrap();
        assert_eq!(describe(&d.0).as_deref(), Some(head.trim()));
        std::fs::write(d.0.join("a.txt"), "two\n").unwrap();
        assert_eq!(describe(&d.0), Some(format!("{}-dirty", head.trim())));
    }

    #[test]
    fn this_build_names_a_commit_when_it_can() {
        let c = git_commit();
        assert!(!c.is_empty());
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if option_env!("OVBENCH_GIT_COMMIT").is_none() && have_git() && here.join(".git").exists() {
            assert_ne!(c, "unknown");
            assert!(c.trim_end_matches("-dirty").len() >= 4, "{c}");
        }
    }
}
