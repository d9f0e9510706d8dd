//! The contract's conformance suite (ovbench_conformance) on real
//! verbs: 2 and 3 ranks in one process over one device (rxe loops the
//! traffic back), with the extended and the classic CQ.

mod common;

use ovbench_conformance as conformance;
use ovbench_verbs::VerbsOptions;

fn run(name: &str, size: u32, opts: VerbsOptions) {
    if !common::have_device(name) {
        return;
    }
    let make = move |n: u32| common::make_with(n, &opts);
    let results = conformance::run_all(&make, size);
    let mut failed = Vec::new();
    for (check, r) in &results {
        match r {
            Ok(()) => println!("conformance {name} {check}: ok"),
            Err(e) => {
                println!("conformance {name} {check}: FAILED: {e}");
                failed.push(*check);
            }
        }
    }
    println!(
        "conformance {name}: {} of {} checks passed",
        results.len() - failed.len(),
        results.len()
    );
    assert!(failed.is_empty(), "{name}: failed checks: {failed:?}");
}

#[test]
fn two_ranks() {
    run("two_ranks", 2, VerbsOptions::default());
}

#[test]
fn three_ranks() {
    run("three_ranks", 3, VerbsOptions::default());
}

#[test]
fn two_ranks_classic_cq_with_events() {
    run(
        "two_ranks_classic_cq_with_events",
        2,
        VerbsOptions {
            extended_cq: false,
            use_event: true,
            inline_size: 64,
            ..VerbsOptions::default()
        },
    );
}

#[test]
fn three_ranks_through_rdma_cm() {
    run(
        "three_ranks_through_rdma_cm",
        3,
        VerbsOptions {
            cm: true,
            ..VerbsOptions::default()
        },
    );
}
