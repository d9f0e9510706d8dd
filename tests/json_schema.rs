//! The JSON every command writes conforms to docs/schema/ovbench.schema.json
//! (validated with the `jsonschema` crate), and the schema is strict
//! enough to catch real mistakes: each one in
//! `schema_refuses_real_mistakes` is made to a real document and must be
//! refused.
#![cfg(feature = "sim")]

mod sim_commands;

use serde_json::{json, Value};

fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schema/ovbench.schema.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&schema())
        .unwrap_or_else(|e| panic!("docs/schema/ovbench.schema.json does not compile: {e}"))
}

/// Every error the validator finds, one per line with its place in the
/// document.
fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn schema_is_valid_draft_2020_12() {
    let s = schema();
    jsonschema::meta::validate(&s).unwrap_or_else(|e| panic!("the schema itself: {e}"));
    assert_eq!(
        s["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "validated as draft 2020-12 here"
    );
    assert_eq!(
        s["properties"]["schema"]["const"],
        ovbench::export::SCHEMA,
        "the schema file describes the SCHEMA the writer stamps"
    );
}

#[test]
fn every_command_is_run_here() {
    // The schema's command list and this test's runs name the same commands.
    let s = schema();
    let mut in_schema: Vec<&str> = s["$defs"]["header"]["properties"]["command"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut run: Vec<&str> = sim_commands::COMMANDS.iter().map(|(c, _)| *c).collect();
    in_schema.sort_unstable();
    run.sort_unstable();
    assert_eq!(in_schema, run);
    // And every subcommand of the binary is one of them.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_ovbench"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let listed: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands: section in --help")
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        // The tools measure nothing and write no result file.
        .filter(|c| !["plot", "compare", "devices", "completions"].contains(c))
        .collect();
    for c in &listed {
        assert!(run.contains(c), "`ovbench {c}` is not run by this test");
    }
    assert_eq!(listed.len(), run.len(), "{listed:?}");
}

#[test]
fn every_command_writes_json_the_schema_accepts() {
    let v = validator();
    let runs: Vec<_> = sim_commands::COMMANDS
        .iter()
        .map(|(cmd, _)| sim_commands::run(cmd))
        .collect();
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            let errs = errors(&v, &r.json);
            (!errs.is_empty()).then(|| format!("{}:\n  {}", r.command_line, errs.join("\n  ")))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "JSON that docs/schema/ovbench.schema.json refuses:\n{}",
        failed.join("\n")
    );
    for ((cmd, _), r) in sim_commands::COMMANDS.iter().zip(&runs) {
        // A document with nothing in it would validate too: each run has rows.
        let rows: usize = r.json["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["rows"].as_array().map_or(0, |r| r.len()))
            .sum();
        assert!(rows > 0, "{}: no rows", r.command_line);
        assert_eq!(r.json["complete"], true, "{}", r.command_line);
        assert_eq!(r.json["header"]["command"], *cmd);
    }
}

/// Apply `f` to a copy of `doc`; the schema must refuse the result.
fn refused(v: &jsonschema::Validator, doc: &Value, what: &str, f: impl FnOnce(&mut Value)) {
    let mut bad = doc.clone();
    f(&mut bad);
    assert!(
        !v.is_valid(&bad),
        "the schema accepts a document with {what}"
    );
}

#[test]
fn schema_refuses_real_mistakes() {
    let v = validator();
    let doc = sim_commands::run("latency").json;
    let overhead = sim_commands::run("overhead").json;
    assert!(v.is_valid(&doc) && v.is_valid(&overhead));

    for key in ["schema", "header", "tables", "summary", "notes", "complete"] {
        refused(&v, &doc, &format!("no `{key}`"), |d| {
            d.as_object_mut().unwrap().remove(key);
        });
    }
    refused(&v, &doc, "the older schema id", |d| {
        d["schema"] = json!("ovbench/1")
    });
    refused(&v, &doc, "every row twice (ovbench/1's `results`)", |d| {
        d["results"] = d["tables"][0]["rows"].clone();
    });
    refused(&v, &doc, "`complete` as a string", |d| {
        d["complete"] = json!("yes")
    });
    refused(&v, &doc, "a note that is not a string", |d| {
        d["notes"] = json!([1])
    });
    refused(&v, &doc, "an unknown command", |d| {
        d["header"]["command"] = json!("ping")
    });
    refused(&v, &doc, "no header.environment", |d| {
        d["header"].as_object_mut().unwrap().remove("environment");
    });
    refused(&v, &doc, "a pid as a string", |d| {
        d["header"]["environment"]["ranks"][0]["pid"] = json!("42")
    });
    refused(&v, &doc, "an eager limit of unknown source", |d| {
        d["header"]["communicator"]["eager_limit"]["source"] = json!("guessed")
    });
    refused(&v, &doc, "an eager limit as a bare number", |d| {
        d["header"]["communicator"]["eager_limit"] = json!(16384)
    });
    refused(&v, &doc, "other units", |d| {
        d["header"]["units"]["time"] = json!("us")
    });
    refused(&v, &doc, "a table without rows", |d| {
        d["tables"][0].as_object_mut().unwrap().remove("rows");
    });
    refused(&v, &doc, "a row that is not an object", |d| {
        d["tables"][0]["rows"][0] = json!(8)
    });
    refused(&v, &doc, "p50_ns as a string", |d| {
        d["tables"][0]["rows"][0]["p50_ns"] = json!("1600.0")
    });
    refused(&v, &doc, "size in KiB as a string", |d| {
        d["tables"][0]["rows"][0]["size"] = json!("4K")
    });
    refused(&v, &doc, "a fractional size", |d| {
        d["tables"][0]["rows"][0]["size"] = json!(4.5)
    });
    refused(&v, &doc, "a negative size", |d| {
        d["tables"][0]["rows"][0]["size"] = json!(-8)
    });
    refused(&v, &doc, "a rate as a string", |d| {
        d["tables"][0]["rows"][0]["bytes_per_sec"] = json!("fast")
    });
    refused(&v, &doc, "a summary figure as a string", |d| {
        d["summary"]["L_ns"] = json!("1.1 us")
    });
    refused(&v, &overhead, "an invalid row without its reason", |d| {
        d["tables"][0]["rows"][0]["valid"] = json!(false)
    });
    let logp = sim_commands::run("logp").json;
    refused(&v, &logp, "a histogram that is not base64 text", |d| {
        d["tables"][0]["rows"][1]["os_histogram"] = json!("not base64!")
    });
    refused(&v, &logp, "a histogram as a list of numbers", |d| {
        d["tables"][0]["rows"][1]["g_histogram"] = json!([500.0, 501.0])
    });
    refused(&v, &overhead, "`valid` as a string", |d| {
        d["tables"][0]["rows"][0]["valid"] = json!("ok")
    });
    // And what a row may carry: an invalid row with its reason, null
    // figures, an interval object for a rate.
    let mut fine = overhead.clone();
    fine["tables"][0]["rows"][0]["valid"] = json!(false);
    fine["tables"][0]["rows"][0]["reason"] = json!("base_t unstable");
    fine["tables"][0]["rows"][0]["overhead_ns"] = Value::Null;
    fine["tables"][0]["rows"][0]["x_bytes_per_sec"] =
        json!({"mean": 1.0, "level": 0.95, "lower": 0.5, "upper": 2.0});
    let errs = errors(&v, &fine);
    assert!(errs.is_empty(), "{errs:?}");
}

/// The histogram at `row[key]`, decoded: its sample count.
fn count(row: &Value, key: &str) -> u64 {
    let text = row[key]
        .as_str()
        .unwrap_or_else(|| panic!("no `{key}` histogram in {row}"));
    let h = ovbench::stats::hist::decode(text).unwrap_or_else(|e| panic!("`{key}`: {e}"));
    ovbench::stats::hist::count(&h)
}

/// Every row of the tables of `doc` whose title starts with `title`.
fn rows<'a>(doc: &'a Value, title: &str) -> Vec<&'a Value> {
    let out: Vec<&Value> = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["title"].as_str().unwrap().starts_with(title))
        .flat_map(|t| t["rows"].as_array().unwrap())
        .collect();
    assert!(!out.is_empty(), "no table `{title}…` in {doc}");
    out
}

#[test]
fn rows_keep_the_samples_compare_tests() {
    // Each histogram holds as many samples as its row says were taken.
    let logp = sim_commands::run("logp").json;
    for r in rows(&logp, "LogP parameters") {
        assert_eq!(count(r, "os_histogram"), r["os_samples"].as_u64().unwrap());
        assert_eq!(count(r, "or_histogram"), r["or_samples"].as_u64().unwrap());
        if r["size"] == 0 {
            // g(0) is one saturation test, no repetitions.
            assert!(r["g_histogram"].is_null(), "{r}");
        } else {
            // g's are RTT's repetitions, taken in the rounds with os.
            assert_eq!(count(r, "g_histogram"), r["os_samples"].as_u64().unwrap());
        }
    }
    let bcast = sim_commands::run("bcast").json;
    let methods = rows(&bcast, "binomial broadcast");
    for r in methods.iter().filter(|r| r["method"] != "max-oli") {
        let n = r["measurements"].as_u64().unwrap();
        assert_eq!(count(r, "histogram"), n, "{r}");
    }
    assert!(methods.len() > 1, "--method all gives every method's row");
    let overlap = sim_commands::run("overlap").json;
    for r in rows(&overlap, "overlap, protocol") {
        let n = r["samples"].as_u64().unwrap();
        assert_eq!(count(r, "sender_wait_histogram"), n, "{r}");
        assert_eq!(count(r, "receiver_wait_histogram"), n, "{r}");
    }
    let commtest = sim_commands::run("commtest").json;
    for r in rows(&commtest, "commtest") {
        if r["time_ns"].is_null() {
            assert!(r["histogram"].is_null(), "{r}");
        } else {
            assert_eq!(count(r, "histogram"), r["samples"].as_u64().unwrap(), "{r}");
        }
    }
}
