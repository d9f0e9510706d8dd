//! Bad input fails at once, non-zero, with a message that names what was
//! wrong and what to do.

mod common;

use std::time::Duration;

use common::{assert_holds, ovbench, serial, words};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn bad_size_token_is_named() {
    let _g = serial();
    let r = ovbench(&["latency", "--sizes", "8,1X,1M"], LIMIT);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert_holds(&r.stderr, &["`1X`", "K = 1024"]);
    let r = ovbench(&["bw", "--sizes", "4M:1K"], LIMIT);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("MIN is above MAX"), "{}", r.stderr);
}

#[test]
fn transport_not_compiled_in_names_feature_and_package() {
    let _g = serial();
    if cfg!(feature = "verbs") {
        return; // this build has verbs compiled in: nothing missing to report
    }
    let r = ovbench(&["latency", "--transport", "verbs", "--sizes", "8"], LIMIT);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("--features verbs"), "{}", r.stderr);
    assert_holds(&r.stderr, &["libibverbs-dev librdmacm-dev"]);
    assert!(r.stdout.is_empty(), "nothing measured: {}", r.stdout);
}

#[test]
fn unknown_protocol_lists_the_valid_ones() {
    let _g = serial();
    let r = ovbench(&["latency", "--proto", "rdma-magic"], LIMIT);
    assert_eq!(r.code, Some(2));
    assert_holds(&r.stderr, &["rdma-read", "pipelined"]);
}

#[test]
fn unwritable_json_path_fails_before_measuring() {
    let _g = serial();
    let r = ovbench(
        &words(
            "latency --transport sim --sizes 8 --iters 10 --json /nonexistent-ovbench-dir/out.json",
        ),
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    assert_holds(
        &r.stderr,
        &["/nonexistent-ovbench-dir/out.json", "directory"],
    );
    assert!(!r.stdout.contains("latency: one-way"), "{}", r.stdout);
}

#[test]
fn latency_needs_two_ranks() {
    let _g = serial();
    let r = ovbench(
        &["latency", "--transport", "sim", "--np", "1", "--sizes", "8"],
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("--np 2"), "{}", r.stderr);
}

#[test]
fn an_option_that_does_not_apply_is_refused_naming_where_it_belongs() {
    let _g = serial();
    for (args, want) in [
        (&["latency", "--mtu", "4096"][..], "--transport verbs"),
        (
            &["latency", "--transport", "sim", "--provider", "shm"][..],
            "--transport ofi",
        ),
        (&["latency", "--ucx-tls", "posix"][..], "--transport ucx"),
        (&["latency", "--sim", "L=1us"][..], "--transport sim"),
        (
            &["latency", "--transport", "sim", "--op", "write"][..],
            "--proto raw",
        ),
        (
            &["latency", "--transport", "sim", "--frag-size", "64K"][..],
            "--proto pipelined",
        ),
    ] {
        let r = ovbench(args, LIMIT);
        assert_eq!(r.code, Some(2), "{args:?}: {r:?}");
        let first = r.stderr.lines().next().unwrap_or("");
        assert!(first.contains(want), "{args:?}: {first}");
        assert!(r.stdout.is_empty(), "nothing ran: {}", r.stdout);
    }
}

#[test]
fn more_ranks_than_the_host_can_start_are_refused_at_once() {
    let _g = serial();
    for args in [
        &["latency", "--np", "100000", "--sizes", "8"][..],
        &[
            "latency",
            "--transport",
            "sim",
            "--np",
            "100000",
            "--sizes",
            "8",
        ][..],
    ] {
        let t0 = std::time::Instant::now();
        let r = ovbench(args, LIMIT);
        assert_eq!(r.code, Some(2), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("--np 100000") && r.stderr.contains("fewer ranks"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            t0.elapsed()
        );
        assert!(r.stdout.is_empty(), "nothing ran: {}", r.stdout);
    }
}

#[test]
fn a_negative_number_is_refused_naming_its_option() {
    let _g = serial();
    for (args, flag) in [
        (&["latency", "--sizes", "-1"][..], "--sizes"),
        (&["latency", "--warmup", "-1"][..], "--warmup"),
        (&["latency", "--timeout", "-5"][..], "--timeout"),
        (&["latency", "--np", "-2"][..], "--np"),
    ] {
        let r = ovbench(args, LIMIT);
        assert_eq!(r.code, Some(2), "{args:?}: {r:?}");
        let first = r.stderr.lines().next().unwrap_or("");
        assert!(
            first.contains(flag) && !first.contains("unexpected argument"),
            "{args:?}: {first}"
        );
    }
}

/// More than 64 ranks a core is refused before any rank starts unless
/// `--oversubscribe` says it is meant.
#[test]
fn more_than_64_ranks_a_core_need_oversubscribe() {
    let _g = serial();
    let cpus = ovbench_launcher::current_cpus().map_or(1, |c| c.len());
    let np = (64 * cpus + 1).to_string();
    let r = ovbench(&["latency", "--np", &np, "--sizes", "8"], LIMIT);
    assert_eq!(r.code, Some(2), "{r:?}");
    let first = r.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains(&format!("--np {np}")) && first.contains("--oversubscribe"),
        "{first}"
    );
    assert!(r.stdout.is_empty(), "nothing ran: {}", r.stdout);
}

/// `--help` carries the exit-code table of docs/exit-codes.md.
#[test]
fn help_lists_the_exit_codes() {
    let r = ovbench(&["--help"], LIMIT);
    assert_eq!(r.code, Some(0), "{r:?}");
    for code in [
        "Exit status",
        "2 a command line",
        "1 a failure",
        "128+N",
        "130 Ctrl-C",
    ] {
        assert!(
            r.stdout.contains(code),
            "--help lacks {code:?}:\n{}",
            r.stdout
        );
    }
}
