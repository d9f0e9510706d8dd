//! The job secret reaches the ranks through their environment only: it is
//! in no process's command line, and not in the JSON, the CSV, stdout or
//! stderr of a real two-rank TCP job.

mod common;

use std::time::{Duration, Instant};

use common::{children, command, drain, Scratch};

const VAR: &str = "OVBENCH_SECRET";

/// `VAR`'s value in `pid`'s environment, once the rank has exec'd.
fn secret_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        let kv = std::str::from_utf8(kv).ok()?;
        kv.strip_prefix(VAR)?.strip_prefix('=').map(str::to_string)
    })
}

fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}

/// The longest run of hex digits in `s`.
fn longest_hex_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

#[test]
fn the_secret_is_in_no_command_line_json_or_output() {
    let dir = Scratch::new("secret");
    let json = dir.join("s.json");
    let csv = dir.join("s.csv");
    let mut child = command(&[
        "latency", "--sizes", "0,1K", "--iters", "4000", "--warmup", "10",
    ])
    .arg("--json")
    .arg(&json)
    .arg("--csv")
    .arg(&csv)
    .spawn()
    .expect("start ovbench");
    let launcher = child.id();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    // While the job runs: the ranks' secret (from their environment, where
    // the launcher puts it) and every command line of the job.
    let mut secrets = Vec::new();
    let mut cmdlines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the job ran past 120 s");
        cmdlines.extend(cmdline(launcher));
        for rank in children(launcher) {
            if let Some(s) = secret_of(rank) {
                // Only an exec'd rank has the variable: its cmdline is final.
                cmdlines.extend(cmdline(rank));
                secrets.push(s);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "ovbench failed:\n{stdout}\n{stderr}");
    secrets.sort();
    secrets.dedup();
    assert_eq!(
        secrets.len(),
        1,
        "expected one job secret in the ranks' environment, saw {secrets:?}"
    );
    let secret = &secrets[0];
    assert_eq!(secret.len(), 64, "{secret}");
    assert!(
        cmdlines.iter().any(|c| c.contains("latency")),
        "{cmdlines:?}"
    );
    for c in &cmdlines {
        assert!(
            !c.contains(secret.as_str()),
            "the secret is on a command line: {c}"
        );
        assert!(!c.contains(VAR), "{c}");
    }

    let json = std::fs::read_to_string(&json).unwrap();
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(json.contains("\"complete\": true") || json.contains("\"complete\":true"));
    for (what, text) in [
        ("the JSON", &json),
        ("the CSV", &csv),
        ("stdout", &stdout),
        ("stderr", &stderr),
    ] {
        assert!(!text.contains(secret.as_str()), "the secret is in {what}");
        assert!(!text.contains(VAR), "{VAR} is named in {what}");
        // Nor any secret-sized hex string (a git commit is 40 digits).
        assert!(
            longest_hex_run(text) < 64,
            "{what} holds a 64-hex-digit run:\n{text}"
        );
    }
}
