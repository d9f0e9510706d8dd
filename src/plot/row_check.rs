//! The rows of a result file, checked against the schema's rules for a
//! row (docs/schema/ovbench.schema.json, `$defs/row`) before `plot` or
//! `compare` reads a figure from them: a field of the wrong type, a number
//! no measurement can have, or a histogram that does not decode is refused
//! with where it is (`file:tables[t].rows[r]:field`), never drawn or
//! compared. A histogram that is absent (`null`) stays a row without
//! samples; one that is there and unreadable is a damaged file.

use serde_json::{Map, Value};

use crate::stats::hist;

/// The largest magnitude a figure may have: 10^18 ns is 31 years, 10^18
/// B/s an exabyte a second. Beyond it a number is no measurement (a file
/// edited by hand, or damaged), whatever f64 can hold.
pub const SANE: f64 = 1e18;

/// Keys that hold counts: non-negative integers.
const COUNTS: [&str; 7] = [
    "size",
    "iterations",
    "warmup",
    "samples",
    "messages",
    "step",
    "rank",
];

/// The first problem of `row`, as `(field, what is wrong)`.
pub fn problem(row: &Value) -> Option<(String, String)> {
    let Some(obj) = row.as_object() else {
        return Some((String::new(), format!("{} is not an object", kind(row))));
    };
    if obj.is_empty() {
        return Some((String::new(), "the row is empty".into()));
    }
    if let Some(p) = fields(obj, "") {
        return Some(p);
    }
    match (obj.get("valid"), obj.get("reason")) {
        (Some(Value::Bool(false)), None) => {
            Some(("reason".into(), "missing where valid is false".into()))
        }
        (None, Some(_)) => Some(("valid".into(), "missing beside a reason".into())),
        _ => None,
    }
}

/// The unit-suffixed, count and mark fields of `obj` (and of the objects
/// nested in it, named `prefix.key` / `prefix[i]`).
fn fields(obj: &Map<String, Value>, prefix: &str) -> Option<(String, String)> {
    for (k, v) in obj {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let bad = field(k, v).map(|what| (name.clone(), what));
        if bad.is_some() {
            return bad;
        }
        let nested = match v {
            Value::Object(o) if !k.ends_with("_per_sec") => fields(o, &name),
            Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
                x.as_object()
                    .and_then(|o| fields(o, &format!("{name}[{i}]")))
            }),
            _ => None,
        };
        if nested.is_some() {
            return nested;
        }
    }
    None
}

/// What is wrong with field `key` holding `v`, if anything.
fn field(key: &str, v: &Value) -> Option<String> {
    if key == "histogram" || key.ends_with("_histogram") {
        return match v {
            Value::Null => None,
            Value::String(s) => hist::decode(s)
                .err()
                .map(|e| format!("a histogram that does not decode ({e}): the file is damaged")),
            _ => Some(format!(
                "{} where a histogram (base64) or null belongs",
                kind(v)
            )),
        };
    }
    if key.ends_with("_ns") || key.ends_with("_pct") {
        return figure(v);
    }
    if key.ends_with("_per_sec") {
        return match v {
            Value::Object(o) => o.values().find_map(figure),
            _ => figure(v),
        };
    }
    if key.ends_with("_bytes") || COUNTS.contains(&key) {
        return match v {
            Value::Null if key.ends_with("_bytes") => None,
            Value::Number(n) if n.as_u64().is_some_and(|x| (x as f64) <= SANE) => None,
            _ => Some(format!(
                "{} where a count (an integer from 0) belongs",
                show(v)
            )),
        };
    }
    match (key, v) {
        ("window", Value::Number(n)) if n.as_u64().is_some_and(|w| w >= 1) => None,
        ("window", _) => Some(format!(
            "{} where a window (an integer from 1) belongs",
            show(v)
        )),
        ("valid", Value::Bool(_)) | ("reason", Value::String(_)) => None,
        ("valid", _) => Some(format!("{} where true or false belongs", show(v))),
        ("reason", _) => Some(format!("{} where a sentence belongs", show(v))),
        _ => None,
    }
}

/// A figure: a number of sane magnitude, or null.
fn figure(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.is_finite() && x.abs() <= SANE => None,
            _ => Some(format!(
                "{} is beyond any measurement (|x| > 1e18)",
                short(&n.to_string())
            )),
        },
        _ => Some(format!("{} where a number or null belongs", show(v))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `v` as a short quote for the message.
fn show(v: &Value) -> String {
    match v {
        Value::Number(_) | Value::String(_) | Value::Bool(_) => short(&v.to_string()),
        _ => kind(v).into(),
    }
}

/// At most 24 characters of `s`.
fn short(s: &str) -> String {
    if s.chars().count() <= 24 {
        return s.into();
    }
    let head: String = s.chars().take(20).collect();
    format!("{head}… ({} characters)", s.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn what(row: Value) -> Option<(String, String)> {
        problem(&row)
    }

    #[test]
    fn an_ovbench_row_passes() {
        let h = hist::encode(&[1000.0, 2000.0]).unwrap();
        let row = json!({"size": 8, "iterations": 10, "p50_ns": 12.5, "mean_ci": {"lower_ns": 1.0},
            "histogram": h, "window_histogram": null, "bytes_per_sec": {"mean": 1e9, "lower": null},
            "total_bytes": 8, "runs": [{"overhead_ns": -3.0}], "valid": false, "reason": "time < 0"});
        assert_eq!(what(row), None);
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases = [
            (json!({"p50_ns": "12"}), "p50_ns", "where a number or null"),
            (json!({"size": -1}), "size", "count"),
            (json!({"size": 1.5}), "size", "count"),
            (json!({"window": 0}), "window", "from 1"),
            (json!({"valid": "yes"}), "valid", "true or false"),
            (json!({"valid": false}), "reason", "missing"),
            (json!({"histogram": 3}), "histogram", "base64"),
            (json!({"histogram": "AAAA"}), "histogram", "does not decode"),
            (
                json!({"runs": [{}, {"overhead_ns": true}]}),
                "runs[1].overhead_ns",
                "number",
            ),
            (
                json!({"bytes_per_sec": {"mean": "x"}}),
                "bytes_per_sec",
                "number",
            ),
        ];
        for (row, field, says) in cases {
            let (f, w) = what(row.clone()).unwrap_or_else(|| panic!("{row} passed"));
            assert_eq!(f, field, "{row}");
            assert!(w.contains(says), "{row}: {w}");
        }
        assert!(what(json!({})).is_some());
        assert!(what(json!([1])).is_some());
    }

    #[test]
    fn a_number_beyond_any_measurement_is_refused() {
        let huge: Value =
            serde_json::from_str(&format!("{{\"p50_ns\": 1{}}}", "0".repeat(308))).unwrap();
        let (f, w) = what(huge).unwrap();
        assert_eq!(f, "p50_ns");
        assert!(w.starts_with("1e+308 is beyond any measurement"), "{w}");
        assert_eq!(what(json!({"p50_ns": 1e18})), None);
        assert!(what(json!({"p50_ns": -1.1e18})).is_some());
    }
}
