//! The progress bar on stderr: shown under a pseudo-terminal (`script`
//! gives the run one), through the local launcher's pipes too, and with
//! `--progress-bar always` into a file; absent when stderr is a file, with
//! `--quiet` and with `--progress-bar never`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{run, serial, Run};

const LIMIT: Duration = Duration::from_secs(120);

/// `ovbench ARGS` under a pseudo-terminal, stdout thrown away: what the
/// terminal shows is stderr alone.
fn on_terminal(args: &str) -> Run {
    let line = format!("{} {args} >/dev/null", env!("CARGO_BIN_EXE_ovbench"));
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    run(&mut cmd, LIMIT).expect_ok()
}

fn has_bar(text: &str, label: &str) -> bool {
    text.contains(&format!("{label} [")) && text.contains("ETA")
}

#[test]
fn bar_shows_on_a_terminal_with_size_and_eta() {
    let _s = serial();
    let r = on_terminal("latency --transport sim --sizes 8,1K --iters 2000");
    assert!(has_bar(&r.stdout, "latency"), "{}", r.stdout);
    assert!(r.stdout.contains("size 1K"), "{}", r.stdout);
    assert!(
        r.stdout.contains("2/2") || r.stdout.contains("1/2"),
        "{}",
        r.stdout
    );
}

#[test]
fn bar_crosses_the_launcher_pipe_to_the_terminal() {
    let _s = serial();
    let r = on_terminal("bw --transport tcp --sizes 8,64 --iters 50");
    assert!(has_bar(&r.stdout, "bw"), "{}", r.stdout);
}

#[test]
fn methods_count_their_rows() {
    let _s = serial();
    let r = on_terminal("overhead --transport sim --sizes 8,1K");
    assert!(r.stdout.contains("overhead: "), "{}", r.stdout);
    assert!(r.stdout.contains("rows done"), "{}", r.stdout);
}

#[test]
fn quiet_and_never_show_nothing() {
    let _s = serial();
    for flag in ["--quiet", "--progress-bar never"] {
        let r = on_terminal(&format!(
            "latency --transport sim --sizes 8,1K --iters 100 {flag}"
        ));
        assert!(!r.stdout.contains("ETA"), "{flag}: {}", r.stdout);
        assert!(r.stdout.trim().is_empty(), "{flag}: {}", r.stdout);
    }
}

#[test]
fn nothing_on_stderr_into_a_file_unless_always() {
    let _s = serial();
    let args = [
        "latency",
        "--transport",
        "sim",
        "--sizes",
        "8,1K",
        "--iters",
        "100",
    ];
    let r = common::ovbench(&args, LIMIT).expect_ok();
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(r.stdout.contains("1024"), "{}", r.stdout);
    let mut always = args.to_vec();
    always.extend(["--progress-bar", "always"]);
    let r = common::ovbench(&always, LIMIT).expect_ok();
    assert!(has_bar(&r.stderr, "latency"), "{}", r.stderr);
    assert!(
        !r.stdout.contains("ETA"),
        "the bar stays off stdout: {}",
        r.stdout
    );
}
