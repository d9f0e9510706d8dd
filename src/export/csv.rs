//! The CSV export: one file per table, opening with the header of the
//! rows' keys (nested objects flattened as `ops_sends`, arrays as
//! `cpu_0_user_pct`), then one line per row — the form any CSV reader
//! takes as it is; titles and metadata stay in the JSON. `--csv out.csv`
//! holds the first table, and each further table goes to
//! `out.<table>.csv` (see [`table_paths`]). Fields with a comma, quote or
//! newline are quoted (RFC 4180).

use serde_json::Value;

use std::path::{Path, PathBuf};

use super::Table;

#[derive(Debug, Default)]
pub struct CsvExporter;

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}_{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&key(k), v, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&key(&i.to_string()), v, out);
            }
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl CsvExporter {
    /// One table as a CSV file: the header row, then the rows. Empty when
    /// the table has no rows yet.
    pub fn render_table(&self, t: &Table) -> String {
        let mut s = String::new();
        // The column set is the union of the rows' keys, in first-seen order.
        let rows: Vec<Vec<(String, String)>> = t
            .rows
            .iter()
            .map(|r| {
                let mut cells = Vec::new();
                flatten("", r, &mut cells);
                cells
            })
            .collect();
        let mut keys: Vec<&str> = Vec::new();
        for r in &rows {
            for (k, _) in r {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        if keys.is_empty() {
            return s;
        }
        let head: Vec<String> = keys.iter().map(|k| field(k)).collect();
        s.push_str(&head.join(","));
        s.push('\n');
        for r in &rows {
            let line: Vec<String> = keys
                .iter()
                .map(|k| {
                    r.iter()
                        .find(|(rk, _)| rk == k)
                        .map_or(String::new(), |(_, v)| field(v))
                })
                .collect();
            s.push_str(&line.join(","));
            s.push('\n');
        }
        s
    }
}

/// A table title as a file-name part: lower case, runs of other
/// characters as one `-` (`per-process totals by size` →
/// `per-process-totals-by-size`).
fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "table".into()
    } else {
        out
    }
}

/// The file of each table: the first at `base`, table k after it at
/// `base`'s stem `.<slug of its title>.csv`, made unique by its index
/// where two titles give one name. The slug is cut so that the name
/// stays within `NAME_MAX` (`--csv`'s own name leaves room for it,
/// [`crate::files::run_files::CSV_TABLE_ROOM`]); non-UTF-8 names are kept
/// byte for byte.
pub fn table_paths(base: &Path, titles: &[&str]) -> Vec<PathBuf> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let stem = base.with_extension("");
    let stem_name = stem.file_name().map_or(&[][..], |n| n.as_bytes());
    let name = |slug: &str, suffix: &str| {
        let room =
            crate::files::output::NAME_MAX.saturating_sub(stem_name.len() + 5 + suffix.len());
        let mut n = stem_name.to_vec();
        n.push(b'.');
        n.extend_from_slice(&slug.as_bytes()[..slug.len().min(room)]);
        n.extend_from_slice(suffix.as_bytes());
        n.extend_from_slice(b".csv");
        stem.with_file_name(std::ffi::OsString::from_vec(n))
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for (k, t) in titles.iter().enumerate() {
        let p = if k == 0 {
            base.to_path_buf()
        } else {
            let mut p = name(&slug(t), "");
            if out.contains(&p) || p == base {
                p = name(&slug(t), &format!("-{k}"));
            }
            p
        };
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Document;
    use serde_json::json;

    #[test]
    fn header_row_first_nested_keys_flattened_and_quoted() {
        let mut d = Document::new(json!({}));
        d.start_table("bw", &[]);
        d.push_row(json!({"size": 8, "bytes_per_sec": 1.5e6, "ops": {"sends": 64, "bytes": 512}}));
        d.push_row(json!({"size": 16, "bytes_per_sec": 3e6, "ops": {"sends": 64, "bytes": 1024}, "note": "a,b"}));
        let out = CsvExporter.render_table(&d.tables[0]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "size,bytes_per_sec,ops_sends,ops_bytes,note");
        assert_eq!(lines[1], "8,1500000.0,64,512,");
        assert_eq!(lines[2], "16,3000000.0,64,1024,\"a,b\"");
    }

    #[test]
    fn arrays_become_indexed_columns() {
        let mut d = Document::new(json!({}));
        d.push_row(json!({"cpu": [{"user_pct": 99.0}, {"user_pct": 98.5}]}));
        let out = CsvExporter.render_table(&d.tables[0]);
        assert!(
            out.starts_with("cpu_0_user_pct,cpu_1_user_pct\n99.0,98.5\n"),
            "{out}"
        );
    }

    #[test]
    fn each_further_table_has_a_file_of_its_own() {
        let p = table_paths(
            Path::new("/tmp/out.csv"),
            &[
                "overlap, protocol eager",
                "per-process totals by size",
                "per-process totals by size",
            ],
        );
        assert_eq!(p[0], Path::new("/tmp/out.csv"));
        assert_eq!(p[1], Path::new("/tmp/out.per-process-totals-by-size.csv"));
        assert_eq!(p[2], Path::new("/tmp/out.per-process-totals-by-size-2.csv"));
    }
}
