//! A one-node Slurm cluster made by the test: munged with a key the test
//! writes, slurmctld and slurmd configured for a root-run CI (SlurmUser
//! root, proctrack/linuxproc, task/none, 4 CPUs declared over the
//! machine's 2 with config_overrides), on ports of their own, started and
//! stopped here. Runs `srun -n 2 ovbench latency`, `srun -n 4 ovbench
//! bcast`, `srun --mpi=pmi2` (PMI-2 wire protocol), `srun --mpi=pmix`
//! (PMIx), `--transport mpi` under srun when this ovbench has it, an
//! ovbench started in an `salloc` shell launching locally, and a rank
//! killed under srun. Prints `scontrol show step` for each run.
//!
//! Needs slurmctld, slurmd, slurm-client and munge (ci/deps).

// Run by ci/test's cluster stage, which builds with pmix (the tool-tests
// stage, without it, leaves them out rather than run them twice).
#![cfg(feature = "pmix")]

mod cluster;

use std::path::Path;
use std::time::Duration;

use cluster::slurm::Slurm;
use cluster::{assert_none_left, exe, json, serial, words, Job};

const LIMIT: Duration = Duration::from_secs(120);

fn launch_of(path: &Path) -> serde_json::Value {
    json(path)["header"]["launch"].clone()
}

/// One cluster for every case: starting Slurm costs seconds.
#[test]
fn ovbench_under_slurm() {
    let _g = serial();
    let slurm = Slurm::up();
    let out = slurm.dir.join("run.json");
    let out_s = out.to_string_lossy().into_owned();
    let lat = [
        "latency", "--sizes", "8,64K", "--iters", "200", "--verify", "--json", &out_s,
    ];

    // srun without an MPI plugin: rank 0's bootstrap service.
    slurm
        .srun(&["-n", "2"], &lat)
        .expect_ok("srun -n 2 ovbench latency");
    let l = launch_of(&out);
    assert_eq!(
        (l["launcher"].as_str(), l["exchange"].as_str()),
        (Some("srun"), Some("bootstrap")),
        "{l}"
    );

    let bc = cluster::short_bcast(&["--json", &out_s]);
    slurm
        .srun(&["-n", "4"], &bc)
        .expect_ok("srun -n 4 ovbench bcast");
    assert_eq!(launch_of(&out)["launcher"], "srun");

    slurm
        .srun(&["--mpi=pmi2", "-n", "2"], &lat)
        .expect_ok("srun --mpi=pmi2 -n 2 ovbench latency");
    let l = launch_of(&out);
    assert_eq!(l["exchange"], "pmi2", "{l}");

    #[cfg(feature = "pmix")]
    {
        slurm
            .srun(&["--mpi=pmix", "-n", "2"], &lat)
            .expect_ok("srun --mpi=pmix -n 2 ovbench latency");
        let l = launch_of(&out);
        assert_eq!(l["exchange"], "pmix", "{l}");
    }

    if cluster::has_mpi_transport() {
        slurm
            .srun(
                &["--mpi=pmix", "-n", "2"],
                &words("latency --transport mpi --sizes 8,64K --iters 200"),
            )
            .expect_ok("srun --mpi=pmix -n 2 ovbench latency --transport mpi");
    } else {
        eprintln!("skipped: srun --mpi=pmix -n 2 ovbench latency --transport mpi (this ovbench has no mpi feature)");
    }

    // An allocation's shell is no step: ovbench launches its ranks itself.
    let mut c = slurm.cmd("salloc");
    c.args(["-n", "2", exe()]).args(lat);
    cluster::run(c, LIMIT).expect_ok("salloc -n 2 ovbench latency");
    assert_eq!(launch_of(&out)["launcher"], "ovbench (local)");
    assert_none_left(Duration::from_secs(5));

    // Rank 1 killed: the step ends within 5 s, a message names rank 1.
    let mut c = slurm.cmd("srun");
    c.args(["-n", "2", exe()])
        .args(words("latency --sizes 8 --iters 1000000000"));
    let job = Job::start(c);
    cluster::kill_rank_1(job, "SLURM_PROCID=1", &["rank 1", "task 1"]);
}
