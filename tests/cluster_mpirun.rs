//! ovbench's own transports as ranks of Open MPI's mpirun: addresses
//! exchanged through mpirun's PMIx server (with ovbench's bootstrap
//! service switched off, to show PMIx connects alone), 2 and 4 ranks over
//! tcp and UCX, the launcher's binding kept, `--np` refused under mpirun,
//! and a killed rank ending the job within 5 s with no process left.
//!
//! Needs the `pmix` feature and Open MPI's mpirun.openmpi (ci/deps); runs
//! as root with Open MPI's allow-run-as-root settings and
//! `--oversubscribe` (4 ranks on 2 cores).

#![cfg(feature = "pmix")]

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::{
    assert_holds, assert_none_left, exe, json, mpirun, run, scratch, serial, short_bcast,
    table_rows, words, Job,
};

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `args` under `mpirun -np N` with `--json`; the document.
fn pmix_run(np: u32, name: &str, args: &[&str]) -> serde_json::Value {
    let _g = serial();
    let dir = scratch(name);
    let out = dir.join("out.json");
    let mut all: Vec<&str> = args.to_vec();
    let out_s = out.to_string_lossy().into_owned();
    all.extend(["--json", &out_s]);
    run(mpirun(np, &all), LIMIT).expect_ok(name);
    assert_none_left(Duration::from_secs(5));
    let doc = json(&out);
    let launch = &doc["header"]["launch"];
    assert_eq!(launch["exchange"], "pmix", "{launch}");
    assert_eq!(launch["launcher"], "mpirun (Open MPI)", "{launch}");
    doc
}

#[test]
fn tcp_two_ranks_latency_through_pmix() {
    let doc = pmix_run(
        2,
        "tcp2",
        &["latency", "--sizes", "8,64K", "--iters", "200", "--verify"],
    );
    assert_eq!(table_rows(&doc), 2);
    // mpirun binds each of 2 ranks to a core: kept, not redone.
    let binding = doc["header"]["launch"]["binding"]
        .as_str()
        .unwrap_or_default();
    assert!(binding.starts_with("kept from mpirun"), "{binding}");
}

#[test]
fn tcp_four_ranks_bcast_through_pmix() {
    let doc = pmix_run(4, "tcp4", &short_bcast(&[]));
    assert!(table_rows(&doc) >= 1);
}

#[cfg(feature = "ucx")]
#[test]
fn ucx_two_and_four_ranks_through_pmix() {
    let doc = pmix_run(
        2,
        "ucx2",
        &[
            "latency",
            "--transport",
            "ucx",
            "--sizes",
            "8,64K",
            "--iters",
            "200",
            "--verify",
        ],
    );
    assert_eq!(table_rows(&doc), 2);
    let doc = pmix_run(4, "ucx4", &short_bcast(&["--transport", "ucx"]));
    assert!(table_rows(&doc) >= 1);
}

/// `--bootstrap off`: no rank starts or reaches ovbench's service, so the
/// run connects through PMIx alone; the same switch without PMIx fails.
#[test]
fn pmix_connects_with_the_bootstrap_service_off() {
    let doc = pmix_run(
        2,
        "off",
        &[
            "latency",
            "--bootstrap",
            "off",
            "--sizes",
            "8",
            "--iters",
            "200",
            "--verify",
        ],
    );
    assert_eq!(table_rows(&doc), 1);
    let detail = doc["header"]["launch"]["exchange_detail"]
        .as_str()
        .unwrap_or_default();
    assert!(detail.starts_with("PMIx"), "{detail}");
    // An Open MPI environment without a PMIx server: off means off.
    let _g = serial();
    let mut c = Command::new(exe());
    c.args(["latency", "--bootstrap", "off", "--sizes", "8"])
        .env("OMPI_COMM_WORLD_RANK", "0")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
        .env("OMPI_MCA_ess_base_jobid", "7")
        .env_remove("PMIX_NAMESPACE");
    let r = run(c, Duration::from_secs(30));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_holds(&r.stderr, &["--bootstrap off", "no PMIx"]);
}

#[test]
fn np_under_mpirun_names_the_command_to_use() {
    let _g = serial();
    let r = run(mpirun(2, &["latency", "--np", "4"]), LIMIT);
    assert_ne!(r.code, Some(0));
    assert_holds(&r.stderr, &["run `mpirun -np 4 ovbench"]);
    assert_none_left(Duration::from_secs(5));
}

/// Rank 1 killed mid-run: mpirun ends the job within 5 s, a message
/// names rank 1, and no rank survives.
#[test]
fn a_killed_rank_ends_the_mpirun_job() {
    let _g = serial();
    let job = Job::start(mpirun(
        2,
        &words("latency --sizes 8 --iters 1000000000 --timeout 60"),
    ));
    cluster::kill_rank_1(job, "OMPI_COMM_WORLD_RANK=1", &["rank 1"]);
}
