//! `--proto` with a list: each protocol measured in turn (its own table),
//! then the side-by-side table with ratios to the first, all in one JSON
//! that the schema accepts and `plot` and `compare` read as one run per
//! protocol; under sim and over real TCP ranks. Bad lists are refused
//! before anything runs.

mod common;

use std::time::Duration;

use common::{ovbench, words, Scratch};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

fn schema_errors(doc: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/schema/ovbench.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    v.iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn check_combined(scratch: &str, command: &str, protos: &[&str]) {
    let d = &Scratch::new(scratch);
    let json = d.join("all.json");
    let mut a = words(command);
    let list = protos.join(",");
    a.extend(["--proto", &list, "-q", "--json", json.to_str().unwrap()]);
    let r = ovbench(&a, LIMIT).expect_ok();
    // Each protocol's table, then the side-by-side one.
    let tables = r.stdout.matches("# latency: ").count();
    assert_eq!(tables, protos.len(), "{}", r.stdout);
    let side = r
        .stdout
        .split("# side by side")
        .nth(1)
        .expect("side-by-side table");
    assert!(side.contains("B/A") && side.contains("B vs A"), "{side}");
    for p in protos {
        assert!(side.contains(&format!("--proto {p}")), "{side}");
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(schema_errors(&doc), Vec::<String>::new());
    let runs = doc["protocols"].as_array().unwrap();
    assert_eq!(runs.len(), protos.len());
    for (run, p) in runs.iter().zip(protos) {
        assert_eq!(run["header"]["options"]["proto"], *p);
    }
    let rows = doc["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        let v = row["values"].as_array().unwrap();
        let r = row["ratios"].as_array().unwrap();
        assert_eq!(r[0], 1.0);
        let want = v[1].as_f64().unwrap() / v[0].as_f64().unwrap();
        assert!((r[1].as_f64().unwrap() - want).abs() < 1e-9);
    }
    // plot draws a series per protocol; compare reads the one file.
    let fig = d.join("all.svg");
    ovbench(
        &["plot", json.to_str().unwrap(), "-o", fig.to_str().unwrap()],
        LIMIT,
    )
    .expect_ok();
    let svg = std::fs::read_to_string(&fig).unwrap();
    for p in protos {
        // (raw is labelled with its operation: raw-send)
        assert!(svg.contains(&format!(" {p}")), "{p} in the legend");
    }
    assert_eq!(
        svg.matches(": p50").count(),
        protos.len(),
        "a series per protocol"
    );
    let r = ovbench(&["compare", json.to_str().unwrap()], LIMIT).expect_ok();
    assert!(r.stdout.contains("# B: "), "{}", r.stdout);
    // Nothing left behind but the file asked for.
    let left: Vec<_> = std::fs::read_dir(&**d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".ovbench-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn sim_protocols_side_by_side() {
    check_combined(
        "protolist-sim",
        "latency --transport sim --sizes 8,64K --iters 50",
        &["eager", "rdma-read", "rdma-write"],
    );
}

#[test]
fn tcp_protocols_side_by_side() {
    check_combined(
        "protolist-tcp",
        "latency --transport tcp --sizes 8,1K --iters 50",
        &["eager", "rdma-write", "raw"],
    );
}

#[test]
fn bad_lists_are_refused_before_running() {
    let _s = common::serial();
    for (args, says) in [
        (vec!["latency", "--proto", "eager,fast"], "'fast'"),
        (vec!["latency", "--proto", "eager,eager"], "named twice"),
        (
            vec!["latency", "--proto", "eager,auto", "--csv", "/tmp/x.csv"],
            "--csv",
        ),
        (vec!["latency", "--proto", "eager,native"], "--proto native"),
    ] {
        let r = ovbench(&args, LIMIT);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?} ran: {}", r.stdout);
    }
}
