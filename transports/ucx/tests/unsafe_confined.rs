//! The crate's FFI stays in its per-resource modules (`src/ffi/`): every
//! other source file calls their safe functions only, and does not even
//! name the keyword (as `git grep -l -w unsafe -- src` would show it).

use std::fs;
use std::path::{Path, PathBuf};

const WORD: &str = "unsafe";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `text` holds `WORD` as a whole word (as `git grep -w`).
fn names_word(text: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(WORD).any(|(at, _)| {
        !ident(text[..at].chars().next_back()) && !ident(text[at + WORD.len()..].chars().next())
    })
}

#[test]
fn only_the_ffi_modules_name_the_keyword() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 10,
        "found the sources under {}",
        src.display()
    );
    let ffi = src.join("ffi");
    let offenders: Vec<_> = files
        .iter()
        .filter(|f| !f.starts_with(&ffi))
        .filter(|f| names_word(&fs::read_to_string(f).expect("readable source")))
        .collect();
    assert!(
        offenders.is_empty(),
        "outside src/ffi/, these name `{WORD}`; move the code into the resource's module there (and reword comments): {offenders:?}"
    );
}

#[test]
fn the_word_match_is_whole_words_only() {
    assert!(names_word("x unsafe {"));
    assert!(names_word("`unsafe`"));
    assert!(!names_word("unsafely"));
    assert!(!names_word("not_unsafe_ptr"));
}
