//! The JSON export: the [`Document`] as one pretty-printed object with
//! `"schema": "ovbench/1"`, the header, the tables and their rows.

use super::{Document, Exporter};

#[derive(Debug, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, doc: &Document) -> String {
        let mut s = serde_json::to_string_pretty(doc).expect("a Document always serialises");
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
        d.add_summary(json!({"L_ns": 700}));
        let out = JsonExporter.render(&d);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schema"], "ovbench/1");
        assert_eq!(v["header"]["command"], "latency");
        assert_eq!(v["tables"][0]["rows"][1]["size"], 8);
        assert_eq!(v["summary"]["L_ns"], 700);
        assert_eq!(v["complete"], false);
        // Keys keep the order the measuring code wrote them in.
        let row = out.find("\"size\": 0").unwrap();
        assert!(row < out.find("\"p50_ns\": 1500.0").unwrap());
    }
}
