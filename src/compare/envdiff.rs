//! The differences between runs' environments that can explain a
//! difference in their figures: ovbench's version and commit, the host,
//! CPU, cores and pinning, frequency governors, kernel, library versions,
//! the user's UCX_/FI_/MCA variables, and the options and communicator
//! the run used. What differs between any two runs is listed, one line per
//! field, with each run's value.

use serde_json::Value;

use crate::plot::load::RunFile;

/// Header fields that differ on every run and explain nothing.
const IGNORED: &[&str] = &[
    "/environment/date",
    "/environment/command_line",
    "/options/json",
    "/options/csv",
    "/csv_files",
];

/// The header parts compared.
const PARTS: &[&str] = &[
    "/environment",
    "/options",
    "/communicator",
    "/clock/source",
    "/sim_model",
    "/warnings",
];

/// Flatten `v` under `path` into (path, value as text); per-rank pids are
/// left out (they always differ), their pinning kept.
fn flatten(path: &str, v: &Value, out: &mut Vec<(String, String)>) {
    // The TCP transport's listening port is new on every run.
    if IGNORED.contains(&path) || path.ends_with("/pid") || path.ends_with("/listen") {
        return;
    }
    match v {
        // A transport's `extra`: [name, value] pairs, compared one by one.
        Value::Array(a) if !a.is_empty() && a.iter().all(is_pair) => {
            for p in a {
                let name = p[0].as_str().unwrap_or("?");
                flatten(&format!("{path}/{name}"), &p[1], out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&format!("{path}/{k}"), x, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{path}/{i}"), x, out);
            }
        }
        Value::String(s) if s.is_empty() => out.push((path.to_string(), "\"\"".into())),
        Value::String(s) => out.push((path.to_string(), s.clone())),
        other => out.push((path.to_string(), other.to_string())),
    }
}

fn is_pair(v: &Value) -> bool {
    matches!(v.as_array(), Some(p) if p.len() == 2 && p[0].is_string())
}

fn fields(run: &RunFile) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in PARTS {
        if let Some(v) = run.header.pointer(p) {
            flatten(p, v, &mut out);
        }
    }
    out
}

/// One line per differing field: `options.proto: A auto, B eager`.
pub fn differences(runs: &[RunFile]) -> Vec<String> {
    let all: Vec<Vec<(String, String)>> = runs.iter().map(fields).collect();
    let mut paths: Vec<&String> = Vec::new();
    for f in &all {
        for (p, _) in f {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for p in paths {
        let values: Vec<Option<&String>> = all
            .iter()
            .map(|f| f.iter().find(|(q, _)| q == p).map(|(_, v)| v))
            .collect();
        if values.windows(2).all(|w| w[0] == w[1]) {
            continue;
        }
        let each: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "{} {}",
                    (b'A' + (i % 26) as u8) as char,
                    v.map_or("(absent)", |s| s.as_str())
                )
            })
            .collect();
        let name = p.trim_start_matches('/').replace('/', ".");
        out.push(format!("{name}: {}", each.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(header: Value) -> RunFile {
        RunFile {
            path: "x.json".into(),
            command: "latency".into(),
            label: "x".into(),
            header,
            tables: Vec::new(),
            summary: Value::Null,
            invalid: 0,
        }
    }

    #[test]
    fn lists_what_differs_and_nothing_else() {
        let a = run(json!({
            "environment": {"date": "1", "git_commit": "abc", "libraries": {"UCX": "1.13"},
                            "fabric_env": {}, "ranks": [{"rank": 0, "pid": 1, "affinity": [0]}]},
            "options": {"proto": "auto"}
        }));
        let b = run(json!({
            "environment": {"date": "2", "git_commit": "abc", "libraries": {"UCX": "1.14"},
                            "fabric_env": {"UCX_TLS": "posix"}, "ranks": [{"rank": 0, "pid": 2, "affinity": [1]}]},
            "options": {"proto": "auto"}
        }));
        let d = differences(&[a, b]);
        assert_eq!(
            d,
            vec![
                "environment.libraries.UCX: A 1.13, B 1.14",
                "environment.ranks.0.affinity: A [0], B [1]",
                "environment.fabric_env.UCX_TLS: A (absent), B posix",
            ],
            "{d:#?}"
        );
    }
}
