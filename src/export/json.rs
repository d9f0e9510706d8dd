//! The JSON export, one pretty-printed object (its JSON Schema is
//! docs/schema/ovbench.schema.json):
//!
//! ```text
//! { "schema": "ovbench/5",
//!   "header":  { command, environment, options, communicator, clock, ... },
//!   "tables":  [ { "title", "columns", "rows": [ { "size": 8, "p50_ns": ... }, ... ] }, ... ],
//!   "summary": { run-level figures }, "notes": [ ... ], "complete": bool }
//! ```
//!
//! Each measured row (one per size) is a flat, unit-suffixed object, and
//! appears exactly once: under its table, beside the title and columns
//! that say what it is (each table is also one CSV file). A reader that
//! wants one list takes `tables[*].rows` in order (ci/bench/common.py's
//! `rows`).

use serde_json::{json, Value};

#[cfg(test)]
use super::SCHEMA;
use super::{Document, Exporter};

#[derive(Debug, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, doc: &Document) -> String {
        let tables: Vec<Value> = doc
            .tables
            .iter()
            .map(|t| json!({"title": t.title, "columns": t.columns, "rows": t.rows}))
            .collect();
        let v = json!({
            "schema": doc.schema,
            "header": doc.header,
            "tables": tables,
            "summary": doc.summary,
            "notes": doc.notes,
            "complete": doc.complete,
        });
        let mut s = serde_json::to_string_pretty(&v).expect("JSON values always serialise");
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_header_and_rows_in_order() {
        let mut d = Document::new(json!({"command": "latency", "version": "0.1.0"}));
        d.start_table("latency", &["size[B]", "p50[us]"]);
        d.push_row(json!({"size": 0, "p50_ns": 1500.0, "samples": 10}));
        d.push_row(json!({"size": 8, "p50_ns": 1510.0, "samples": 10}));
        d.start_table("second", &["size[B]"]);
        d.push_row(json!({"size": 64}));
        d.add_summary(json!({"L_ns": 700}));
        let out = JsonExporter.render(&d);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(SCHEMA, "ovbench/5");
        assert_eq!(v["header"]["command"], "latency");
        assert_eq!(v["tables"][0]["rows"][1]["size"], 8);
        assert!(v["tables"][0]["rows"][1].get("table").is_none());
        assert_eq!(v["tables"][0]["columns"][1], "p50[us]");
        assert_eq!(v["tables"][1]["rows"][0]["size"], 64);
        // Each row once: no second, flat list of them.
        assert!(v.get("results").is_none(), "{v}");
        assert_eq!(out.matches("\"size\": 8").count(), 1, "{out}");
        assert_eq!(v["summary"]["L_ns"], 700);
        assert_eq!(v["complete"], false);
        // Keys keep the order the measuring code wrote them in.
        let row = out.find("\"size\": 0").unwrap();
        assert!(row < out.find("\"p50_ns\": 1500.0").unwrap());
    }
}
