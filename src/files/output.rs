//! Where a run's output files go (docs/files.md): `--json`, `--csv` (and
//! its `.<table>.csv` files) and `--write-xfer-table`. A symlink is
//! followed and its target rewritten, so the link stays a link; an
//! existing output that is no regular file (a device, a FIFO) is
//! refused, since each file is rewritten by renaming a new one over it;
//! `--json -` is stdout. [`check`] finds, before any rank starts, a name
//! that cannot be created; temporary names stay within [`NAME_MAX`].

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::input::{is_stdin, named};

/// The longest file name (bytes) Linux file systems take.
pub const NAME_MAX: usize = 255;
/// Symlinks followed before a chain counts as a loop (the kernel's 40).
const MAX_LINKS: usize = 40;

/// Where an output goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `-`: stdout (`--json` only).
    Stdout,
    /// A regular file, or a name to create; symlinks resolved.
    File(PathBuf),
}

/// `path` with its symlinks followed to the file they name (which may
/// not exist yet); the path itself when it is no symlink.
pub(super) fn follow_links(who: &str, path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)
                    .with_context(|| format!("{who}: reading the symlink {}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    bail!("{who}: a loop of symlinks (more than {MAX_LINKS} followed): give the file itself")
}

/// Where `path` (of `flag`) is written; `stdout_ok` lets `-` mean stdout.
/// Refused: a name of no file, a directory, an existing device or FIFO,
/// a name over [`NAME_MAX`] bytes, a directory that does not exist.
pub fn resolve(flag: &str, path: &Path, stdout_ok: bool) -> Result<Target> {
    let who = named(flag, path);
    if is_stdin(path) {
        if stdout_ok {
            return Ok(Target::Stdout);
        }
        bail!("{flag} -: this file cannot go to stdout (only --json - can): give a file name");
    }
    let p = follow_links(&who, path)?;
    let via = if p == path {
        String::new()
    } else {
        format!(" (the symlink's target {})", p.display())
    };
    if let Ok(m) = std::fs::metadata(&p) {
        if m.is_dir() {
            let eg = if flag == "--csv" {
                "out.csv"
            } else {
                "out.json"
            };
            bail!(
                "{who}{via} is a directory: give a file name in it, e.g. {flag} {}",
                path.join(eg).display()
            );
        }
        if !m.is_file() {
            bail!(
                "{who}{via} is no regular file (a device or FIFO): ovbench rewrites its files whole after every row; give a regular file{}",
                if stdout_ok { ", or - for stdout" } else { "" }
            );
        }
    }
    let Some(name) = p.file_name() else {
        bail!("{who}{via} names no file: give a file name");
    };
    if name.len() > NAME_MAX {
        bail!(
            "{who}: its file name is {} bytes, and a file system takes at most {NAME_MAX}: give a shorter name",
            name.len()
        );
    }
    let dir = dir_of(&p);
    if !dir.is_dir() {
        bail!(
            "{who}{via}: its directory {} does not exist: create it or give another path",
            dir.display()
        );
    }
    Ok(Target::File(p))
}

/// The directory a file `p` goes in (`.` for a bare name).
fn dir_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The temporary name `p` is written under before the rename:
/// `.NAME.PID.tmp` beside it, NAME cut so that the whole stays within
/// [`NAME_MAX`] bytes.
pub fn temp_name(p: &Path) -> PathBuf {
    let tail = format!(".{}.tmp", std::process::id());
    let name = p.file_name().map_or(&[][..], OsStr::as_bytes);
    let keep = NAME_MAX.saturating_sub(1 + tail.len()).min(name.len());
    let mut t = b".".to_vec();
    t.extend_from_slice(&name[..keep]);
    t.extend_from_slice(tail.as_bytes());
    dir_of(p).join(OsString::from_vec(t))
}

/// Create `p` (it must not exist) and remove it again.
fn probe(p: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)?;
    std::fs::remove_file(p)
}

/// Before any rank starts: `path` resolves ([`resolve`], which also
/// keeps its name within NAME_MAX) and its temporary name can be created.
/// The file's own name is never created to try it: every rank of a job
/// runs this check, and one killed between making and removing a probe
/// under that name left an empty file where the results go. The
/// temporary name's success answers for it: the same directory, the same
/// characters, and at least as long unless cut to NAME_MAX.
pub fn check(flag: &str, path: &Path, stdout_ok: bool) -> Result<Target> {
    let t = resolve(flag, path, stdout_ok)?;
    if let Target::File(p) = &t {
        let who = named(flag, path);
        let fail = |e: std::io::Error| {
            anyhow::anyhow!(
                "{who}: cannot create a file there ({e}): check that its directory exists and is writable"
            )
        };
        probe(&temp_name(p)).map_err(fail)?;
    }
    Ok(t)
}

/// Write `contents` to the file `path` names (of `flag`), atomically: a
/// temporary file beside the symlinks' target, synced, renamed over it.
pub fn write_atomic(flag: &str, path: &Path, contents: &str) -> Result<()> {
    let Target::File(p) = resolve(flag, path, false)? else {
        unreachable!("stdout is refused by resolve");
    };
    let tmp = temp_name(&p);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&tmp, &p)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!(
            "{}: cannot write it ({e}): check that its directory exists and is writable",
            named(flag, path)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ovbench-out-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_symlink_stays_a_link_and_its_target_is_written() {
        let d = dir("link");
        std::fs::write(d.join("real.json"), "old").unwrap();
        std::os::unix::fs::symlink("real.json", d.join("link.json")).unwrap();
        write_atomic("--json", &d.join("link.json"), "new").unwrap();
        assert!(std::fs::symlink_metadata(d.join("link.json"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("real.json")).unwrap(), "new");
        // A dangling link creates its target.
        std::os::unix::fs::symlink("made.json", d.join("dangling.json")).unwrap();
        write_atomic("--json", &d.join("dangling.json"), "x").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("made.json")).unwrap(), "x");
        std::os::unix::fs::symlink("loop.json", d.join("loop.json")).unwrap();
        let e = format!(
            "{:#}",
            resolve("--json", &d.join("loop.json"), true).unwrap_err()
        );
        assert!(e.contains("a loop of symlinks"), "{e}");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 5);
    }

    #[test]
    fn temporary_names_stay_within_name_max() {
        let long = "x".repeat(NAME_MAX);
        let t = temp_name(&Path::new("/tmp").join(&long));
        assert!(t.file_name().unwrap().len() <= NAME_MAX, "{t:?}");
        let t = temp_name(Path::new("out.json"));
        assert_eq!(
            t,
            PathBuf::from(format!("./.out.json.{}.tmp", std::process::id()))
        );
    }

    #[test]
    fn names_that_cannot_be_made_are_found_first() {
        let d = dir("check");
        let e = format!(
            "{:#}",
            check("--json", &d.join("y".repeat(300)), true).unwrap_err()
        );
        assert!(e.contains("300 bytes") && e.contains("at most 255"), "{e}");
        // A FIFO here, never /dev/null: were the guard broken, the
        // rename would replace the device.
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()));
        let e = format!("{:#}", check("--csv", &fifo, false).unwrap_err());
        assert!(e.contains("no regular file"), "{e}");
        std::fs::remove_file(&fifo).unwrap();
        let e = format!("{:#}", check("--csv", Path::new("-"), false).unwrap_err());
        assert!(e.contains("only --json -"), "{e}");
        assert_eq!(
            check("--json", Path::new("-"), true).unwrap(),
            Target::Stdout
        );
        let name = d.join(OsStr::from_bytes(b"r\xe9sultat.json"));
        assert!(check("--json", &name, true).is_ok());
        write_atomic("--json", &name, "{}").unwrap();
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    }
}
