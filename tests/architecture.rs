//! Rules of the tree's layout that the compiler cannot see, checked on
//! every CI run so a later change cannot quietly undo them:
//!
//! * the fabric crates call their C libraries only from their FFI
//!   modules (every other file names no `unsafe`);
//! * the conformance suite and the test harnesses are a dev-dependency:
//!   the release binary's dependency graph (`cargo tree -e normal,build`)
//!   does not hold them;
//! * every fabric keeps its memory in core's region table and runs its
//!   progress thread (and the MPI watchdog) on core's kits;
//! * no macro writes communicator or transport code in the transport
//!   crates (shared code is shared as functions and types); the
//!   conformance crate's one macro writes `#[test]` functions only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Whether `text` holds `word` as a whole word (as `git grep -w` finds it).
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(at, _)| {
        !ident(text[..at].chars().next_back()) && !ident(text[at + word.len()..].chars().next())
    })
}

/// The files under `crate_dir/src` that name `unsafe` outside `allowed`
/// (paths relative to `src`; a directory allows everything in it).
fn unsafe_outside(crate_dir: &str, allowed: &[&str]) -> Vec<PathBuf> {
    let src = root().join(crate_dir).join("src");
    let files = rust_files(&src);
    assert!(files.len() > 5, "found the sources of {crate_dir}");
    files
        .into_iter()
        .filter(|f| !allowed.iter().any(|a| f.starts_with(src.join(a))))
        .filter(|f| names_word(&fs::read_to_string(f).expect("readable source"), "unsafe"))
        .collect()
}

/// Fails, naming them, where files of `crate_dir` outside `allowed`
/// (paths under its src/) name `unsafe`.
fn assert_unsafe_only_in(crate_dir: &str, allowed: &[&str]) {
    let offenders = unsafe_outside(crate_dir, allowed);
    let places: Vec<String> = allowed.iter().map(|a| format!("src/{a}")).collect();
    assert!(
        offenders.is_empty(),
        "outside {} these name `unsafe`; move the call into the module there that owns its resource: {offenders:?}",
        places.join(" and ")
    );
}

#[test]
fn ucx_calls_its_library_only_from_its_ffi_modules() {
    assert_unsafe_only_in("transports/ucx", &["ffi"]);
}

#[test]
fn libfabric_calls_its_library_only_from_its_ffi_modules() {
    assert_unsafe_only_in("transports/ofi", &["fi", "memory.rs"]);
}

#[test]
fn the_launcher_calls_pmix_only_from_its_client_module() {
    // signals.rs: sigaction and pre-exec hooks; pmix/client.rs: libpmix.
    // The PMI-2 wire protocol (pmi2.rs) is plain safe Rust.
    assert_unsafe_only_in("launcher", &["pmix/client.rs", "signals.rs"]);
}

#[test]
fn mpi_calls_its_library_only_from_its_ffi_modules() {
    assert_unsafe_only_in("transports/mpi", &["ffi"]);
}

#[test]
fn the_word_match_is_whole_words_only() {
    assert!(names_word("x unsafe {", "unsafe"));
    assert!(names_word("`unsafe`", "unsafe"));
    assert!(!names_word("unsafely", "unsafe"));
    assert!(!names_word("not_unsafe_ptr", "unsafe"));
}

#[test]
fn core_and_sim_keep_unsafe_in_the_files_that_own_it() {
    // core: RDTSC (clock.rs) and the page-aligned block that verbs, UCX
    // and libfabric hand their libraries by address (fabric/aligned.rs).
    assert_unsafe_only_in("transports/core", &["clock.rs", "fabric/aligned.rs"]);
    // sim, for many-rank runs: the runner thread's uncontended lock
    // (owned.rs) and the next rank's cache lines (prefetch.rs).
    assert_unsafe_only_in("transports/sim", &["owned.rs", "prefetch.rs"]);
}

#[test]
fn the_release_binary_does_not_link_the_conformance_harness() {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["tree", "-p", "ovbench", "--features", "full"])
        .args(["-e", "normal,build", "--prefix", "none", "--offline"])
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tree.lines().any(|l| l.starts_with("ovbench-core ")),
        "the tree lists the workspace crates:\n{tree}"
    );
    let harness: Vec<_> = tree
        .lines()
        .filter(|l| l.starts_with("ovbench-conformance "))
        .collect();
    assert!(
        harness.is_empty(),
        "the conformance suite is a normal or build dependency of the binary; make it a dev-dependency: {harness:?}"
    );
}

#[test]
fn no_macro_writes_transport_code() {
    let offenders: Vec<_> = rust_files(&root().join("transports"))
        .into_iter()
        .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        .filter(|f| !f.starts_with(root().join("transports/conformance")))
        .filter(|f| {
            fs::read_to_string(f)
                .expect("readable source")
                .contains("macro_rules!")
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "these transport sources define macros; share the code as functions or types: {offenders:?}"
    );
}

#[test]
fn every_fabric_keeps_its_memory_in_the_shared_region_table() {
    let tables = [
        "transports/tcp/src/memory.rs",
        "transports/sim/src/memory.rs",
        "transports/verbs/src/memory.rs",
        "transports/ucx/src/ffi/memory.rs",
        "transports/ofi/src/memory.rs",
        "transports/mpi/src/ffi/memory.rs",
    ];
    for file in tables {
        let text = fs::read_to_string(root().join(file)).expect("readable source");
        assert!(
            text.contains("Regions<"),
            "{file} keeps its regions without core's fabric::regions::Regions; use the shared table"
        );
    }
}

#[test]
fn progress_threads_run_on_the_shared_kit() {
    let kit = root().join("transports/core/src/fabric/progress_thread.rs");
    // The other kit: the watchdog that ends a call stuck in a library.
    let watchdog = root().join("transports/core/src/fabric/watchdog.rs");
    // The conformance crate is a test harness: its threads stand for ranks.
    let harness = root().join("transports/conformance");
    let own_threads: Vec<_> = rust_files(&root().join("transports"))
        .into_iter()
        .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        .filter(|f| *f != kit && *f != watchdog && !f.starts_with(&harness))
        .filter(|f| {
            let text = fs::read_to_string(f).expect("readable source");
            text.contains("std::thread::spawn") || text.contains("thread::Builder")
        })
        .collect();
    assert!(
        own_threads.is_empty(),
        "these start threads of their own; run a progress thread through core's fabric::progress_thread: {own_threads:?}"
    );
    for krate in ["tcp", "ucx", "ofi"] {
        let uses = rust_files(&root().join("transports").join(krate).join("src"))
            .iter()
            .any(|f| {
                fs::read_to_string(f)
                    .expect("readable source")
                    .contains("ProgressThread::spawn")
            });
        assert!(uses, "the {krate} transport starts no ProgressThread");
    }
}
