//! Help a person can use: every subcommand's `--help` has examples and
//! lists the values of every flag that takes one of a fixed set; the
//! unified flag names and their aliases parse alike; `ovbench completions`
//! writes scripts that the shell loads.

mod common;

use std::time::Duration;

use common::ovbench;

const LIMIT: Duration = Duration::from_secs(60);

fn subcommands() -> Vec<String> {
    let cmd = ovbench::cli::Cli::command_checked();
    cmd.get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn every_subcommand_has_examples_and_enum_values() {
    let cmd = ovbench::cli::Cli::command_checked();
    let subs = subcommands();
    assert!(subs.len() >= 12, "{subs:?}");
    for name in &subs {
        let r = ovbench(&[name, "--help"], LIMIT).expect_ok();
        assert!(
            r.stdout.contains("Examples:"),
            "`ovbench {name} --help` has no examples"
        );
        assert!(
            r.stdout.contains(&format!("ovbench {name}")),
            "{name}'s examples run {name}"
        );
        let sub = cmd.find_subcommand(name).unwrap();
        for arg in sub.get_arguments().chain(cmd.get_arguments()) {
            let values = arg.get_possible_values();
            if values.is_empty() || arg.is_hide_set() || !arg.get_action().takes_values() {
                continue;
            }
            for v in values.iter().filter(|v| !v.is_hide_set()) {
                assert!(
                    r.stdout.contains(v.get_name()),
                    "`ovbench {name} --help`: {} lacks value {}",
                    arg.get_id(),
                    v.get_name()
                );
            }
        }
    }
    // The flags that take a fixed set list it (not only a free-text value).
    let lat = cmd.find_subcommand("latency").unwrap();
    for id in [
        "transport",
        "proto",
        "op",
        "reg_cache",
        "progress",
        "progress_bar",
    ] {
        let a = lat
            .get_arguments()
            .chain(cmd.get_arguments())
            .find(|a| a.get_id() == id);
        let a = a.unwrap_or_else(|| panic!("{id}"));
        assert!(!a.get_possible_values().is_empty(), "{id} lists no values");
    }
}

#[test]
fn unified_names_and_their_aliases_parse_alike() {
    use ovbench::cli::{Cli, Command};
    use ovbench::methods::MethodCommand;
    let parse = |args: &[&str]| {
        let mut v = vec!["ovbench"];
        v.extend_from_slice(args);
        let m = Cli::command_checked().try_get_matches_from(v).unwrap();
        Cli::from_matches(&m).unwrap()
    };
    for flag in ["--iters", "--iterations"] {
        match parse(&["overhead", flag, "7"]).command {
            Command::Method(MethodCommand::Overhead(a)) => assert_eq!(a.iterations, Some(7)),
            c => panic!("{c:?}"),
        }
        match parse(&["commtest", flag, "7"]).command {
            Command::Method(MethodCommand::Commtest(a)) => assert_eq!(a.iterations, 7),
            c => panic!("{c:?}"),
        }
    }
    for flag in ["--sizes", "--msgsize"] {
        match parse(&["bcast", flag, "64K"]).command {
            Command::Method(MethodCommand::Bcast(a)) => assert_eq!(a.msgsize.bytes(), 65536),
            c => panic!("{c:?}"),
        }
    }
    match parse(&["logp", "--sizes", "1K:64K"]).command {
        Command::Method(MethodCommand::Logp(a)) => {
            assert_eq!((a.min_size.bytes(), a.max_size.bytes()), (1024, 65536))
        }
        c => panic!("{c:?}"),
    }
    let r = ovbench(&["logp", "--sizes", "1K:64K", "--max-size", "8K"], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = ovbench(&["logp", "--sizes", "64K"], LIMIT);
    assert!(r.stderr.contains("MIN:MAX"), "{}", r.stderr);
}

#[test]
fn completions_load_in_the_shell() {
    let r = ovbench(&["completions", "bash"], LIMIT).expect_ok();
    for sub in subcommands() {
        assert!(r.stdout.contains(&sub), "bash completion lacks {sub}");
    }
    assert!(r.stdout.contains("--progress-bar"));
    // bash sources it and registers the completion.
    let dir = common::scratch("completions");
    let file = dir.join("ovbench.bash");
    std::fs::write(&file, &r.stdout).unwrap();
    let registered = common::stdout_of(std::process::Command::new("bash").args([
        "-c",
        &format!("source {} && complete -p ovbench", file.display()),
    ]));
    assert!(registered.contains("ovbench"), "{registered}");
    let z = ovbench(&["completions", "zsh"], LIMIT).expect_ok();
    assert!(
        z.stdout.starts_with("#compdef ovbench"),
        "{}",
        &z.stdout[..40]
    );
    let f = ovbench(&["completions", "fish"], LIMIT).expect_ok();
    assert!(f.stdout.contains("complete -c ovbench"));
    // A benchmark's option on a tool is refused, not ignored.
    let r = ovbench(&["devices", "--transport", "ucx"], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--transport is an option of the benchmarks"),
        "{}",
        r.stderr
    );
    let bad = ovbench(&["completions", "tcsh"], LIMIT);
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("bash"), "{}", bad.stderr);
}
