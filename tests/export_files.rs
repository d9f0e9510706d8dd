//! The files a run writes open in the tools users read them with: each
//! CSV file is one table with its header row first (Python's
//! `csv.DictReader` takes its column names from it), the JSON header lists
//! every CSV file, and `--json` and `--csv` naming one file is refused
//! before anything runs. An output through a symlink keeps the link, a
//! non-UTF-8 name works, `--json -` puts the JSON alone on stdout, and
//! `plot -` reads stdin (docs/files.md).
#![cfg(feature = "sim")]

mod common;

use std::path::Path;
use std::process::Command;

use common::{command, scratch, stdout_of, words};

/// The column names Python's csv.DictReader reads from `path`, and its
/// row count.
fn dict_reader(path: &Path) -> (Vec<String>, usize) {
    let py = "import csv,sys,json\nr=csv.DictReader(open(sys.argv[1]))\nrows=list(r)\nprint(json.dumps([r.fieldnames,len(rows)]))";
    let out = stdout_of(Command::new("python3").args(["-c", py]).arg(path));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names = v[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    (names, v[1].as_u64().unwrap() as usize)
}

#[test]
fn every_table_is_a_csv_file_python_reads_and_the_json_lists_them() {
    let dir = scratch("tables");
    let (json, csv) = (dir.join("o.json"), dir.join("o.csv"));
    stdout_of(
        command(&words(
            "overlap --transport sim --sizes 10K --iters 2 --steps 1",
        ))
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv),
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let files = doc["header"]["csv_files"].as_array().unwrap();
    let tables = doc["tables"].as_array().unwrap();
    assert_eq!(files.len(), tables.len());
    assert!(files.len() >= 3, "{files:?}");
    for (f, t) in files.iter().zip(tables) {
        let path = Path::new(f["file"].as_str().unwrap());
        assert!(path.exists(), "{path:?}");
        let (names, rows) = dict_reader(path);
        assert_eq!(rows, t["rows"].as_array().unwrap().len(), "{path:?}");
        let first = t["rows"][0].as_object().unwrap();
        // Flat keys keep their names; nested objects flatten to a_b.
        for k in first.keys().filter(|k| !first[k.as_str()].is_object()) {
            assert!(names.contains(k), "{path:?}: {k} not in {names:?}");
        }
    }
    assert_eq!(files[0]["file"], csv.display().to_string());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn json_and_csv_on_one_file_is_refused_before_anything_runs() {
    let dir = scratch("same");
    for (j, c) in [("x.csv", "x.csv"), ("x.totals.csv", "x.csv")] {
        let out = Command::new(env!("CARGO_BIN_EXE_ovbench"))
            .args(["latency", "--transport", "sim", "--sizes", "8"])
            .arg("--json")
            .arg(dir.join(j))
            .arg("--csv")
            .arg(dir.join(c))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("same file"), "{err}");
        assert!(out.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The JSON document at `path`.
fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn an_output_through_a_symlink_keeps_the_link_and_non_utf8_names_work() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("links");
    std::fs::create_dir(dir.join("real")).unwrap();
    std::os::unix::fs::symlink("real/r.json", dir.join("link.json")).unwrap();
    let run = "latency --transport sim --sizes 8 --iters 10";
    stdout_of(
        command(&words(run))
            .arg("--json")
            .arg(dir.join("link.json")),
    );
    let link = std::fs::symlink_metadata(dir.join("link.json")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    assert_eq!(json_of(&dir.join("real/r.json"))["complete"], true);
    // The panic (env::shell_words on std::env::args).
    let odd = dir.join(std::ffi::OsStr::from_bytes(b"r\xe9sultat.json"));
    stdout_of(command(&words(run)).arg("--json").arg(&odd));
    let line = json_of(&odd)["header"]["environment"]["command_line"].clone();
    assert!(
        line.as_str().unwrap().ends_with("r\\xe9sultat.json'"),
        "{line}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn json_dash_is_stdout_alone_the_tables_go_to_stderr_and_plot_reads_stdin() {
    let dir = scratch("stdout");
    let out = command(&words(
        "latency --transport sim --sizes 8:64 --iters 10 --json -",
    ))
    .current_dir(&dir)
    .output()
    .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is the JSON");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["tables"][0]["rows"].as_array().unwrap().len(), 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("# command:") && err.contains("# latency"),
        "{err}"
    );
    assert!(!dir.join("-").exists(), "a file named - was written");
    let saved = dir.join("lat.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let fig = dir.join("lat.svg");
    stdout_of(
        command(&["plot", "-", "-o"])
            .arg(&fig)
            .stdin(std::fs::File::open(&saved).unwrap()),
    );
    assert!(std::fs::metadata(&fig).unwrap().len() > 0);
    std::fs::remove_dir_all(&dir).ok();
}
