//! The CSV export: one block per table, a `# title` comment line, a
//! header of the rows' keys (nested objects flattened as `ops_sends`,
//! arrays as `cpu_0_user_pct`), then one line per row. Fields with a
//! comma, quote or newline are quoted (RFC 4180).

use serde_json::Value;

use super::{Document, Exporter};

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

impl Exporter for CsvExporter {
    fn render(&self, doc: &Document) -> String {
        let mut s = String::new();
        for (i, t) in doc.tables.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            if !t.title.is_empty() {
                s.push_str(&format!("# {}\n", t.title));
            }
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
                continue;
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
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flattens_nested_keys_and_quotes() {
        let mut d = Document::new(json!({}));
        d.start_table("bw", &[]);
        d.push_row(json!({"size": 8, "bytes_per_sec": 1.5e6, "ops": {"sends": 64, "bytes": 512}}));
        d.push_row(json!({"size": 16, "bytes_per_sec": 3e6, "ops": {"sends": 64, "bytes": 1024}, "note": "a,b"}));
        let out = CsvExporter.render(&d);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "# bw");
        assert_eq!(lines[1], "size,bytes_per_sec,ops_sends,ops_bytes,note");
        assert_eq!(lines[2], "8,1500000.0,64,512,");
        assert_eq!(lines[3], "16,3000000.0,64,1024,\"a,b\"");
    }

    #[test]
    fn arrays_become_indexed_columns() {
        let mut d = Document::new(json!({}));
        d.push_row(json!({"cpu": [{"user_pct": 99.0}, {"user_pct": 98.5}]}));
        let out = CsvExporter.render(&d);
        assert!(
            out.starts_with("cpu_0_user_pct,cpu_1_user_pct\n99.0,98.5\n"),
            "{out}"
        );
    }
}
