//! The one reader of input files (docs/files.md): the result JSON of
//! `plot` and `compare`, `--xfer-table` and `--hostfile`. A regular file,
//! a pipe or a FIFO is read, up to a cap; `-` is stdin; a directory or a
//! device is refused before any byte is read. The text must be UTF-8
//! without NUL bytes, and JSON nests at most [`JSON_DEPTH`] deep. Every
//! refusal names the file, and the line or byte offset where one applies.

use std::fs::FileType;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Result};
use serde_json::Value;

/// The cap of a `--xfer-table` or `--hostfile` file (a line per size or
/// host: a few KiB in practice).
pub const TEXT_CAP: u64 = 1 << 20;
/// The cap of a result file (histograms included, a few MiB at most).
pub const JSON_CAP: u64 = 64 << 20;
/// How deep a result file's arrays and objects may nest (ovbench's own
/// files nest 6 deep; serde_json's own limit is 128).
pub const JSON_DEPTH: usize = 32;

/// How `flag` and `path` are named in a message: `--xfer-table t.txt`,
/// or the file alone for the tools' positional files.
pub fn named(flag: &str, path: &Path) -> String {
    let file = if is_stdin(path) {
        "- (stdin)".to_string()
    } else {
        path.display().to_string()
    };
    if flag.is_empty() {
        file
    } else {
        format!("{flag} {file}")
    }
}

/// Whether `path` means stdin (or stdout, for an output).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What a file that is no regular file, pipe or FIFO is.
fn refused_kind(t: &FileType) -> Option<&'static str> {
    if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// Stdin, read once per process (the launcher's checks and a simulated
/// rank 0 read the same `-`), up to the largest cap.
fn stdin_bytes() -> &'static Result<Vec<u8>, String> {
    static STDIN: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    STDIN.get_or_init(|| {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .take(JSON_CAP + 1)
            .read_to_end(&mut buf)
            .map(|_| buf)
            .map_err(|e| e.to_string())
    })
}

/// The bytes of `path` (of `flag`), at most `cap` of them.
fn read_bytes(flag: &str, path: &Path, cap: u64) -> Result<Vec<u8>> {
    let who = named(flag, path);
    let over = || {
        anyhow::anyhow!(
            "{who}: larger than the {} KiB this file may hold: give the file ovbench wrote, not another",
            cap >> 10
        )
    };
    if is_stdin(path) {
        let b = stdin_bytes()
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{who}: cannot read stdin: {e}"))?;
        if b.len() as u64 > cap {
            return Err(over());
        }
        return Ok(b.to_vec());
    }
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow::anyhow!(
                "{who}: cannot read it: no such file; check the name (or give - for stdin)"
            )
        }
        _ => anyhow::anyhow!("{who}: cannot read it: {e}"),
    })?;
    if let Some(kind) = refused_kind(&meta.file_type()) {
        bail!("{who} is {kind}: give a regular file, a pipe, or - for stdin");
    }
    if meta.is_file() && meta.len() > cap {
        return Err(over());
    }
    let f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{who}: cannot read it: {e}"))?;
    let mut buf = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| anyhow::anyhow!("{who}: cannot read it: {e}"))?;
    if buf.len() as u64 > cap {
        return Err(over());
    }
    Ok(buf)
}

/// The line (from 1) that byte `offset` of `b` is on.
fn line_of(b: &[u8], offset: usize) -> usize {
    b[..offset.min(b.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}

/// The text of `path` (of `flag`): UTF-8, no NUL byte, at most `cap` bytes.
pub fn read_text(flag: &str, path: &Path, cap: u64) -> Result<String> {
    let who = named(flag, path);
    let b = read_bytes(flag, path, cap)?;
    if let Some(at) = b.iter().position(|&c| c == 0) {
        bail!(
            "{who}: binary content (a NUL byte at offset {at}, line {}): give the text file ovbench wrote",
            line_of(&b, at)
        );
    }
    String::from_utf8(b).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        anyhow::anyhow!(
            "{who}: not UTF-8 text (byte {:#04x} at offset {at}, line {}): give the text file ovbench wrote",
            e.as_bytes()[at],
            line_of(e.as_bytes(), at)
        )
    })
}

/// Where `text` first nests deeper than `cap` (line and column from 1).
fn too_deep(text: &str, cap: usize) -> Option<(usize, usize)> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let (mut line, mut col) = (1, 0);
    for c in text.chars() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
        }
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '[' | '{' => {
                depth += 1;
                if depth > cap {
                    return Some((line, col));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A result file's JSON: [`read_text`] under [`JSON_CAP`], then parsed
/// with its nesting capped at [`JSON_DEPTH`].
pub fn read_json(flag: &str, path: &Path) -> Result<Value> {
    let who = named(flag, path);
    let text = read_text(flag, path, JSON_CAP)?;
    if text.trim().is_empty() {
        bail!("{who}: empty: give a file written by ovbench --json");
    }
    if let Some((line, col)) = too_deep(&text, JSON_DEPTH) {
        bail!(
            "{who}:{line}:{col}: nested deeper than {JSON_DEPTH} levels: not a file of ovbench --json"
        );
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{who}:{}:{}: not JSON ({e}): give a file written by ovbench --json",
            e.line(),
            e.column()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ovbench-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn devices_and_directories_are_refused_before_reading() {
        for (p, kind) in [
            ("/dev/zero", "character device"),
            ("/dev/null", "character device"),
            ("/", "directory"),
        ] {
            let e = read_text("--hostfile", Path::new(p), TEXT_CAP).unwrap_err();
            let m = format!("{e:#}");
            assert!(m.starts_with(&format!("--hostfile {p} is a {kind}")), "{m}");
        }
    }

    #[test]
    fn the_cap_binds_and_content_is_checked_with_its_place() {
        let p = scratch("big", &vec![b'8'; 2048]);
        let e = format!("{:#}", read_text("--xfer-table", &p, 1024).unwrap_err());
        assert!(e.contains("larger than the 1 KiB"), "{e}");
        let p = scratch("nul", b"8 100\n16\0 200\n");
        let e = format!("{:#}", read_text("", &p, TEXT_CAP).unwrap_err());
        assert!(e.contains("NUL byte at offset 8, line 2"), "{e}");
        let p = scratch("latin1", b"node1\nn\xe9ud2\n");
        let e = format!("{:#}", read_text("", &p, TEXT_CAP).unwrap_err());
        assert!(e.contains("byte 0xe9 at offset 7, line 2"), "{e}");
        let p = scratch("ok", "h\u{e9}te\n".as_bytes());
        assert_eq!(read_text("", &p, TEXT_CAP).unwrap(), "h\u{e9}te\n");
    }

    #[test]
    fn json_nesting_is_capped_and_errors_give_line_and_column() {
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        let p = scratch("deep.json", deep.as_bytes());
        let e = format!("{:#}", read_json("", &p).unwrap_err());
        assert!(e.contains(":1:33: nested deeper than 32"), "{e}");
        // Brackets inside strings do not nest.
        let p = scratch(
            "str.json",
            format!("{{\"a\": \"{}\"}}", "[".repeat(99)).as_bytes(),
        );
        assert!(read_json("", &p).is_ok());
        let p = scratch("bad.json", b"{\n  \"a\": 1,\n  x\n}");
        let e = format!("{:#}", read_json("", &p).unwrap_err());
        assert!(e.contains("bad.json:3:3: not JSON"), "{e}");
    }
}
