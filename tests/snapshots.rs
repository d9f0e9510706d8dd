//! Snapshots of what every command prints and writes under
//! `--transport sim`: the table on stdout, the JSON file and the CSV
//! files, one test per command, with the `insta` crate
//! (`tests/snapshots/snapshots__<command>_{table,json,csv}.snap`).
//!
//! The simulator runs in virtual time, so every number is exactly
//! repeatable and stays in the snapshots; only the environment is
//! redacted (`[redacted]`): the command line and file paths, version,
//! git commit and date, host names, kernel, CPU model, core count and
//! map, each rank's pid and affinity, governors, library versions, the
//! user's fabric variables, the host-derived warnings, and overhead's
//! load averages. The virtual clock's figures are not redacted: under sim
//! they are constants of the model, not a calibration.
//!
//! A snapshot that differs fails the test, showing the diff; nothing is
//! written unless asked, here or in CI (`INSTA_UPDATE` defaults to `no`
//! in this file, and CI refuses `always`). When a change to the output is
//! meant, update and review:
//!
//! ```text
//! INSTA_UPDATE=always cargo test -p ovbench --test snapshots
//! git diff tests/snapshots/          # every changed line is intended?
//! ```
//!
//! (or, with cargo-insta installed, `cargo insta test -p ovbench --test
//! snapshots --review`). Commit the `.snap` files with the change.
#![cfg(feature = "sim")]

mod sim_commands;

use serde_json::Value;

const REDACTED: &str = "[redacted]";

/// Never write snapshots silently: `INSTA_UPDATE` is `no` unless set, and
/// an update mode is refused under CI.
fn no_silent_updates() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        match std::env::var("INSTA_UPDATE") {
            Err(_) => std::env::set_var("INSTA_UPDATE", "no"),
            Ok(mode) => assert!(
                std::env::var_os("CI").is_none()
                    || !matches!(mode.as_str(), "always" | "unseen" | "force"),
                "INSTA_UPDATE={mode} under CI would accept new output unreviewed"
            ),
        }
        assert!(
            std::env::var_os("CI").is_none() || std::env::var_os("INSTA_FORCE_PASS").is_none(),
            "INSTA_FORCE_PASS under CI would pass every snapshot"
        );
    });
}

/// The printed lines that describe the machine, the build or the run's
/// moment, by their opening: the rest of the line is redacted.
const ENV_LINES: &[&str] = &[
    "# command: ",
    "# ovbench ",
    "# host: ",
    "# cpu: ",
    "# core map: ",
    "# governor: ",
    "# libraries: ",
];

/// The printed table with the environment redacted.
fn redact_text(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        // Warnings come from the host's cores and governors: how many
        // there are depends on the machine.
        // So do the user's UCX_*/FI_* variables (tests/sim_commands clears
        // them for its runs).
        if line.starts_with("# WARNING: ") || line.starts_with("# env: ") {
            continue;
        }
        let line = if let Some(p) = ENV_LINES.iter().find(|p| line.starts_with(*p)) {
            format!("{p}{REDACTED}")
        } else if line.starts_with("# rank ") && line.contains(": host ") {
            let head = line.split(": host ").next().unwrap();
            format!("{head}: host {REDACTED}")
        } else if let Some(at) = line.find("load average") {
            format!("{}load average {REDACTED}", &line[..at])
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The environment keys of `header.environment`.
const ENV_KEYS: &[&str] = &[
    "command_line",
    "version",
    "git_commit",
    "date",
    "hostname",
    "cpu_model",
    "cores",
    "core_map",
    "governors",
    "kernel",
    "libraries",
    "fabric_env",
];

/// The JSON document with the environment redacted, pretty-printed in the
/// writer's key order.
fn redact_json(doc: &Value, dir: &str) -> String {
    let mut d = doc.clone();
    let h = &mut d["header"];
    let env = h["environment"]
        .as_object_mut()
        .expect("header.environment");
    for k in ENV_KEYS {
        if let Some(v) = env.get_mut(*k) {
            *v = REDACTED.into();
        }
    }
    for r in env
        .get_mut("ranks")
        .and_then(Value::as_array_mut)
        .expect("environment.ranks")
    {
        for k in ["hostname", "pid", "affinity"] {
            if let Some(v) = r.get_mut(k) {
                *v = REDACTED.into();
            }
        }
    }
    h["warnings"] = REDACTED.into();
    for f in h["csv_files"].as_array_mut().into_iter().flatten() {
        let rel = f["file"].as_str().unwrap_or("").replace(dir, "[dir]");
        f["file"] = rel.into();
    }
    // overhead's load averages and CPU count.
    if let Some(s) = d["summary"].as_object_mut() {
        for k in ["load1_start", "load1_end", "cpus"] {
            if let Some(v) = s.get_mut(k) {
                *v = REDACTED.into();
            }
        }
    }
    for n in d["notes"].as_array_mut().into_iter().flatten() {
        if let Some(at) = n.as_str().and_then(|s| s.find("load average")) {
            *n = format!("{}load average {REDACTED}", &n.as_str().unwrap()[..at]).into();
        }
    }
    let text = serde_json::to_string_pretty(&d).unwrap();
    assert!(
        !text.contains(dir),
        "a path of the scratch directory is left in the JSON"
    );
    text
}

/// Every CSV file, each after a `==> name <==` line.
fn csv_files(files: &[(String, String)]) -> String {
    files
        .iter()
        .map(|(name, text)| format!("==> {name} <==\n{text}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn snapshot(cmd: &str) {
    no_silent_updates();
    let r = sim_commands::run(cmd);
    // The JSON file as written is what is redacted (not a re-read copy).
    let doc: Value = serde_json::from_str(&r.json_text).unwrap();
    insta::with_settings!({
        description => format!("ovbench {cmd} --transport sim {}", sim_commands::args(cmd).join(" ")),
        omit_expression => true,
        prepend_module_to_snapshot => true,
    }, {
        insta::assert_snapshot!(format!("{cmd}_table"), redact_text(&r.stdout));
        insta::assert_snapshot!(format!("{cmd}_json"), redact_json(&doc, &r.dir));
        insta::assert_snapshot!(format!("{cmd}_csv"), csv_files(&r.csv));
    });
}

macro_rules! snapshot_tests {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            snapshot(stringify!($name));
        }
    )*};
}

snapshot_tests!(latency, bw, bibw, msgrate, overhead, overlap, logp, bcast, commtest);

#[test]
fn every_command_has_a_snapshot_test() {
    // The list above and the shared run list name the same commands.
    let here = [
        "latency", "bw", "bibw", "msgrate", "overhead", "overlap", "logp", "bcast", "commtest",
    ];
    let run: Vec<&str> = sim_commands::COMMANDS.iter().map(|(c, _)| *c).collect();
    assert_eq!(here.to_vec(), run);
}

#[test]
fn redaction_keeps_numbers_and_removes_the_environment() {
    let text = "# command: /x/ovbench latency --json /tmp/a.json\n# ovbench 0.1.0 (commit abc), 2026-01-01T00:00:00Z\n# rank 0: host vm, pid 12, cpus 0-1\n# WARNING: frequency governor is powersave\n# note: load average (1 min) at start: 2.57 on 2 CPUs\n          8         20       1.60\n";
    assert_eq!(
        redact_text(text),
        "# command: [redacted]\n# ovbench [redacted]\n# rank 0: host [redacted]\n# note: load average [redacted]\n          8         20       1.60\n"
    );
}
