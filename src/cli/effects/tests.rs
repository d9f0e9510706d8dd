use clap::{CommandFactory, Parser};

use super::*;

/// Every option of every command, as clap builds them (globals included).
fn every_option() -> Vec<(String, String)> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    for sub in cmd.get_subcommands() {
        for a in sub.get_arguments() {
            let id = a.get_id().as_str();
            if id != "help" && id != "version" {
                out.push((sub.get_name().to_string(), id.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_option_of_every_command_has_an_entry() {
    let all = every_option();
    assert!(
        all.len() > 300,
        "only {} (command, option) pairs",
        all.len()
    );
    let missing: Vec<_> = all.iter().filter(|(_, id)| effect(id).is_none()).collect();
    assert!(missing.is_empty(), "options without an entry: {missing:?}");
    // A command's own option acts in it.
    let mut cmd = Cli::command();
    cmd.build();
    for sub in cmd.get_subcommands() {
        for a in sub.get_arguments().filter(|a| !a.is_global_set()) {
            let id = a.get_id().as_str();
            if let Some(cmds) = effect(id).and_then(|e| e.commands) {
                assert!(
                    cmds.contains(&sub.get_name()),
                    "--{id} is an option of `{}`, whose entry leaves it out",
                    sub.get_name()
                );
            }
        }
    }
    // And no entry is stale.
    for e in EFFECTS {
        assert!(
            all.iter().any(|(_, id)| id == e.id),
            "the entry for {} names no option",
            e.id
        );
    }
}

fn parsed(line: &str) -> Cli {
    let mut cli = Cli::try_parse_from(line.split_whitespace()).unwrap();
    let m = Cli::command().get_matches_from(line.split_whitespace());
    cli.given = super::super::given_ids(&m);
    cli.protos = super::super::given_protos(&m);
    cli
}

#[test]
fn refusals_come_from_the_table() {
    let cases = [
        (
            "ovbench latency --transport sim --hosts a,b",
            None,
            "--hosts",
        ),
        (
            "ovbench latency --transport sim --launcher ssh",
            None,
            "--launcher",
        ),
        (
            "ovbench latency --transport sim --bootstrap h:1",
            None,
            "--bootstrap",
        ),
        (
            "ovbench latency --transport sim --hostfile f",
            None,
            "--hostfile",
        ),
        (
            "ovbench latency --bootstrap h:1",
            Some(Launch::Local),
            "--bootstrap",
        ),
        (
            "ovbench latency --oversubscribe",
            Some(Launch::Job),
            "--oversubscribe",
        ),
        ("ovbench latency --ucx-tls posix", None, "--transport ucx"),
        ("ovbench latency --op write", None, "--proto raw"),
        ("ovbench latency --frag-size 64K", None, "--proto pipelined"),
        (
            "ovbench latency --proto eager --reg-cache off",
            None,
            "--proto rdma-write",
        ),
        (
            "ovbench overlap --xfer-table t --xfer-reps 3",
            None,
            "--xfer-table",
        ),
    ];
    for (line, launch, want) in cases {
        let r = refusal(&parsed(line), launch);
        assert!(
            r.as_deref().is_some_and(|m| m.contains(want)),
            "{line}: {r:?}"
        );
    }
    for (line, launch) in [
        ("ovbench latency --transport sim --sim L=1us", None),
        ("ovbench latency --bootstrap h:1", Some(Launch::Job)),
        (
            "ovbench latency --proto eager,pipelined --frag-size 4K",
            None,
        ),
        ("ovbench latency --proto raw --op write", None),
        ("ovbench overlap --xfer-reps 3", None),
        (
            "ovbench latency --np 4 --oversubscribe",
            Some(Launch::Local),
        ),
    ] {
        assert_eq!(refusal(&parsed(line), launch), None, "{line}");
    }
}
