//! `--transport mpi` end to end: the real binary under a real `mpirun`
//! (Open MPI; `OVBENCH_MPIRUN` names another launcher, as ci/mpich does
//! for MPICH's `mpiexec.hydra -n`). As root, so with Open MPI's
//! allow-run-as-root settings, and `--oversubscribe` for 4 ranks on 2
//! cores. Every command runs with MPI's point-to-point (`--proto
//! native`) and ovbench's own protocols over MPI one-sided calls
//! (`--verify` where the command has it); a PMPI profiling library
//! preloaded into the ranks counts MPI_Put, MPI_Get and MPI_Win_flush,
//! and its counts must equal the JSON's; a rank stuck inside MPI is ended
//! by the watchdog; misuse is refused with exit 2.

#![cfg(feature = "mpi")]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{json, run, words, Run, Scratch};

const LIMIT: Duration = Duration::from_secs(120);

/// The launcher and its rank-count flag, e.g. `mpirun --oversubscribe -np`.
fn launcher() -> Vec<String> {
    std::env::var("OVBENCH_MPIRUN")
        .unwrap_or_else(|_| "mpirun --oversubscribe -np".into())
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Whether the launcher is Open MPI's (osc components, PMPI with its mpicc).
fn open_mpi() -> bool {
    !launcher()
        .iter()
        .any(|w| w.contains("hydra") || w.contains("mpiexec"))
}

/// `LAUNCHER NP ovbench ARGS`, with `env`.
fn mpirun_cmd(np: u32, args: &[&str], env: &[(&str, &str)]) -> Command {
    let l = launcher();
    let mut cmd = Command::new(&l[0]);
    cmd.args(&l[1..])
        .arg(np.to_string())
        .arg(env!("CARGO_BIN_EXE_ovbench"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn mpirun(np: u32, args: &[&str], env: &[(&str, &str)]) -> Run {
    run(&mut mpirun_cmd(np, args, env), LIMIT)
}

/// Run `args` with `--transport mpi` and require success; the JSON
/// document written to `out`.
fn mpirun_json(
    np: u32,
    args: &[&str],
    env: &[(&str, &str)],
    out: &Path,
) -> (Run, serde_json::Value) {
    let mut a = args.to_vec();
    let json_path = out.to_str().unwrap();
    a.extend(["--transport", "mpi", "--json", json_path, "--timeout", "60"]);
    let r = mpirun(np, &a, env).expect_ok();
    let doc = json(out);
    (r, doc)
}

/// The MPI one-sided calls ovbench reported, per rank: (puts, gets,
/// flushes, writes, reads).
fn reported(doc: &serde_json::Value) -> Vec<(u64, u64, u64, u64, u64)> {
    let calls = doc["summary"]["mpi_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no mpi_calls in the summary: {doc}"));
    calls
        .iter()
        .map(|c| {
            let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
            (
                n("MPI_Put"),
                n("MPI_Get"),
                n("MPI_Win_flush"),
                n("writes"),
                n("reads"),
            )
        })
        .collect()
}

const PROTOS: &[&str] = &["native", "eager", "rdma-write", "rdma-read", "pipelined"];

#[test]
fn latency_over_every_protocol_verifies_every_byte() {
    let dir = Scratch::new("mpi-latency");
    // Latency runs between ranks 0 and 1: 4 ranks for two of them.
    let runs = PROTOS
        .iter()
        .map(|p| (2, *p))
        .chain([(4, "native"), (4, "rdma-read")]);
    for (np, proto) in runs {
        {
            let out = dir.join(format!("lat-{np}-{proto}.json"));
            let args = [
                "latency", "--proto", proto, "--sizes", "8,1M", "--iters", "10", "--warmup", "2",
                "--verify",
            ];
            let (r, doc) = mpirun_json(np, &args, &[], &out);
            let rows = common::rows(&doc);
            assert_eq!(rows.len(), 2, "{proto}: {}", r.stdout);
            assert_eq!(
                doc["header"]["communicator"]["transport"]["name"], "mpi",
                "{doc}"
            );
            let calls = reported(&doc);
            let (puts, gets): (u64, u64) = calls
                .iter()
                .map(|c| (c.0, c.1))
                .fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
            match proto {
                "native" | "eager" => assert_eq!((puts, gets), (0, 0), "{proto}: {calls:?}"),
                "rdma-read" => assert!(gets > 0 && puts == 0, "{proto}: {calls:?}"),
                _ => assert!(puts > 0 && gets == 0, "{proto}: {calls:?}"),
            }
        }
    }
}

#[test]
fn methods_run_over_mpi_point_to_point_and_own_protocols() {
    let dir = Scratch::new("mpi-methods");
    let cases: &[(u32, &str)] = &[
        (2, "overhead --msgsize 8 --iterations 100"),
        (
            2,
            "overhead --recv --msgsize 1K --iterations 100 --proto rdma-write",
        ),
        (2, "overlap --sizes 10K,1M --iters 10 --steps 2 --verify"),
        (
            2,
            "overlap --sizes 1M --iters 10 --steps 2 --verify --proto pipelined",
        ),
        (2, "logp --max-size 1K --max-its 2"),
        (2, "logp --max-size 256 --max-its 2 --proto eager"),
        (4, "commtest --total 16K"),
        (4, "commtest --total 16K --proto rdma-read"),
        // bcast --method all with the library's MPI_Bcast: the must-show test.
        (
            4,
            "bcast --method oli --reps 10 --proto eager --algorithm binomial",
        ),
    ];
    for (i, &(np, line)) in cases.iter().enumerate() {
        let args = words(line);
        let out = dir.join(format!("m{i}.json"));
        let (r, doc) = mpirun_json(np, &args, &[], &out);
        assert!(
            r.stdout
                .lines()
                .any(|l| !l.starts_with('#') && !l.trim().is_empty()),
            "{args:?}: no table rows:\n{}",
            r.stdout
        );
        assert!(
            doc["complete"] == true || doc["complete"].is_null(),
            "{args:?}"
        );
        let given_proto = args.contains(&"--proto");
        let proto = doc["header"]["communicator"]["protocol"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !given_proto {
            assert!(
                proto.contains("native"),
                "{args:?}: default protocol {proto}"
            );
        }
        assert!(r.stdout.contains("MPI library: "), "{}", r.stdout);
    }
}

/// The must-show commands, as a user types them.
#[test]
fn must_show_overhead_bcast_and_overlap_tables() {
    let dir = Scratch::new("mpi-must-show");
    let r = mpirun(2, &["overhead", "--transport", "mpi"], &[]).expect_ok();
    assert!(
        r.stdout.contains("send overhead") && r.stdout.contains("avail(%)"),
        "{}",
        r.stdout
    );
    let bcast = words("bcast --method all --reps 20");
    let (r, doc) = mpirun_json(4, &bcast, &[], &dir.join("bcast.json"));
    for m in [
        "send-latency",
        "rounds-forward",
        "barrier-dissemination",
        "ack",
        "max OL_i",
    ] {
        assert!(r.stdout.contains(m), "{m} missing:\n{}", r.stdout);
    }
    assert!(r.stdout.contains("library broadcast"), "{}", r.stdout);
    // The library's tree is unknown: nothing that needs it is given.
    let table = |t: &str| {
        doc["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["title"].as_str().unwrap().starts_with(t))
            .unwrap_or_else(|| panic!("no {t} table"))["rows"]
            .as_array()
            .unwrap()
            .clone()
    };
    for row in table("per-processor") {
        let root = row["rank"] == 0;
        assert!(row["children"].is_null(), "{row}");
        assert_eq!(row["o_ns"].is_number(), root, "o_i only at the root: {row}");
    }
    for row in table("OL_i") {
        assert!(
            row["path"].is_null() && row["forward_ns"].is_null(),
            "{row}"
        );
        assert!(row["gap0_ns"].as_f64().is_some_and(|g| g > 0.0), "{row}");
    }
    let overlap =
        words("overlap --transport mpi --proto rdma-read --verify --sizes 1M --iters 20 --steps 4");
    let r = mpirun(2, &overlap, &[]).expect_ok();
    assert!(
        r.stdout.contains("min.ovl") && r.stdout.contains("max.ovl"),
        "{}",
        r.stdout
    );
}

/// Build the PMPI counting library with the MPI's own compiler wrapper.
fn pmpi_library(dir: &Path) -> std::path::PathBuf {
    let so = dir.join("libpmpi_counts.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi/pmpi_counts.c");
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let st = Command::new(&mpicc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{mpicc}: {e}"));
    assert!(st.success(), "{mpicc} could not build {}", src.display());
    so
}

#[test]
fn pmpi_counts_of_one_sided_calls_match_the_json() {
    let dir = Scratch::new("mpi-pmpi");
    let so = pmpi_library(&dir);
    let oscs: &[&str] = if open_mpi() {
        &["rdma", "pt2pt"]
    } else {
        &[""]
    };
    let cases = [
        "overlap --proto rdma-read --verify --sizes 1M --iters 10 --steps 2",
        "latency --proto rdma-write --sizes 64K,1M --iters 10 --verify",
        "latency --proto pipelined --sizes 256K --iters 5",
    ];
    for osc in oscs {
        for (i, line) in cases.iter().enumerate() {
            let args = words(line);
            let counts = dir.join(format!("counts-{osc}-{i}"));
            std::fs::create_dir_all(&counts).unwrap();
            let env = [
                ("LD_PRELOAD", so.to_str().unwrap()),
                ("PMPI_COUNT_DIR", counts.to_str().unwrap()),
                ("OMPI_MCA_osc", osc),
            ];
            let env: Vec<_> = env.into_iter().filter(|(_, v)| !v.is_empty()).collect();
            let out = dir.join(format!("pmpi-{osc}-{i}.json"));
            let (r, doc) = mpirun_json(2, &args, &env, &out);
            if !osc.is_empty() {
                let component = doc["header"]["mpi"]["osc"]["component"].as_str();
                assert_eq!(component, Some(*osc), "{}", r.stdout);
            }
            let ours = reported(&doc);
            let mut any = 0;
            for (rank, c) in ours.iter().enumerate() {
                let text = std::fs::read_to_string(counts.join(format!("rank{rank}.txt")))
                    .unwrap_or_else(|e| panic!("rank {rank} wrote no PMPI counts ({e}): did it reach MPI_Finalize?\n{}", r.stderr));
                let v: Vec<u64> = text
                    .split_whitespace()
                    .map(|x| x.parse().unwrap())
                    .collect();
                assert_eq!(
                    (v[0], v[1], v[2]),
                    (c.0, c.1, c.2),
                    "osc {osc} {args:?} rank {rank}: PMPI counted (put, get, flush) = {v:?}, ovbench's JSON says {c:?}"
                );
                assert_eq!(
                    (c.3, c.4),
                    (c.0, c.1),
                    "rank {rank}: the communicator's writes/reads against the MPI calls"
                );
                any += v[0] + v[1];
            }
            assert!(any > 0, "{args:?}: no one-sided call at all");
        }
    }
}

#[test]
fn misuse_is_refused_with_exit_2_naming_the_command() {
    let _s = common::serial();
    let r = common::ovbench(&["overhead", "--transport", "mpi"], LIMIT);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr
            .contains("mpirun -np 2 ovbench overhead --transport mpi"),
        "{}",
        r.stderr
    );
    let r = mpirun(2, &["latency", "--transport", "mpi", "--np", "2"], &[]);
    assert!(!r.ok());
    assert!(r.stderr.contains("drop --np"), "{}", r.stderr);
    assert!(
        r.stderr.contains("exit code: 2") || r.stderr.contains("Exit code:    2"),
        "{}",
        r.stderr
    );
    let r = mpirun(
        2,
        &["latency", "--transport", "mpi", "--progress", "thread"],
        &[],
    );
    assert!(!r.ok());
    assert!(r.stderr.contains("--progress thread"), "{}", r.stderr);
}

/// The pids of running `ovbench` processes whose parent is `parent` or
/// one of its descendants (mpirun's daemon may sit between).
fn ranks_under(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![parent];
    while let Some(p) = todo.pop() {
        for c in common::children(p) {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            if comm.trim() == "ovbench" {
                out.push(c);
            }
            todo.push(c);
        }
    }
    out
}

#[test]
fn a_rank_stuck_in_mpi_is_ended_by_the_watchdog() {
    let _s = common::serial();
    let stuck = words("latency --transport mpi --sizes 8 --iters 100000000 --timeout 3");
    let mut cmd = mpirun_cmd(2, &stuck, &[]);
    let mut child = cmd.spawn().unwrap();
    let err = common::drain(child.stderr.take().unwrap());
    // Rank 0's table heading says the ranks are past MPI_Init and the
    // watchdog is up: only then is one of them frozen.
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let t0 = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("size[B]") => break,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "no table heading after {:?} ({e}):\n{}",
                    t0.elapsed(),
                    err.join().unwrap()
                );
            }
        }
    }
    let ranks = ranks_under(child.id());
    assert_eq!(ranks.len(), 2, "the ranks under mpirun: {ranks:?}");
    std::thread::sleep(Duration::from_millis(300));
    let stopped = *ranks.iter().max().unwrap();
    assert!(Command::new("kill")
        .args(["-STOP", &stopped.to_string()])
        .status()
        .unwrap()
        .success());
    let frozen = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if frozen.elapsed() > Duration::from_secs(30) {
            let _ = Command::new("kill")
                .args(["-KILL", &stopped.to_string()])
                .status();
            let _ = child.kill();
            panic!(
                "the job outlived its 3 s deadline by 27 s:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = frozen.elapsed();
    let stderr = err.join().unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        took < Duration::from_secs(15),
        "ended after {took:?}:\n{stderr}"
    );
    assert!(
        stderr.contains("has not returned after")
            && stderr.contains("MPI_Abort")
            && stderr.contains("MPI_"),
        "the watchdog did not say which call:\n{stderr}"
    );
    std::thread::sleep(Duration::from_millis(500));
    for r in ranks {
        assert!(
            !Path::new(&format!("/proc/{r}")).exists()
                || std::fs::read_to_string(format!("/proc/{r}/stat"))
                    .unwrap_or_default()
                    .contains(") Z"),
            "rank pid {r} is still there"
        );
    }
}

/// Over Open MPI's tcp BTL alone osc rdma cannot create a dynamic window:
/// ovbench takes osc pt2pt there, says so, and the own protocols run.
#[test]
fn tcp_btl_alone_runs_the_own_protocols_on_pt2pt() {
    if !open_mpi() {
        return;
    }
    let dir = Scratch::new("mpi-tcp-btl");
    let env = [
        ("OMPI_MCA_btl", "self,tcp"),
        ("OMPI_MCA_btl_tcp_if_include", "lo"),
    ];
    for proto in ["rdma-write", "native"] {
        let out = dir.join(format!("tcp-{proto}.json"));
        let args = [
            "latency", "--proto", proto, "--sizes", "8,256K", "--iters", "10", "--verify",
        ];
        let (r, doc) = mpirun_json(2, &args, &env, &out);
        let osc = &doc["header"]["mpi"]["osc"];
        assert_eq!(osc["component"], "pt2pt", "{}", r.stdout);
        assert!(
            osc["how"]
                .as_str()
                .unwrap_or_default()
                .contains("OMPI_MCA_btl=self,tcp"),
            "{osc}"
        );
        assert_eq!(common::rows(&doc).len(), 2);
    }
}

/// Every buffer a run registers stays attached to osc rdma's dynamic
/// window, and the window takes a bounded number (`osc_rdma_max_attach`).
/// commtest synchronises the clocks before each of its ~100 experiments:
/// that must reuse one buffer, not attach one more each time (which ran
/// out at the default bound of 64, and the failed rank's teardown then hid
/// its error behind the others' timeouts).
#[test]
fn commtest_attaches_a_bounded_number_of_buffers() {
    if !open_mpi() {
        return;
    }
    let _s = common::serial();
    let args = words("commtest --total 16K --proto rdma-read --transport mpi --timeout 20");
    let t0 = Instant::now();
    let r = mpirun(2, &args, &[("OMPI_MCA_osc_rdma_max_attach", "40")]);
    assert!(
        r.ok(),
        "after {:?} ({:?}):\n{}",
        t0.elapsed(),
        r.code,
        r.stderr
    );
    // Table rows only: under load a row's `noisy` or `skewed` note names
    // the protocol too.
    let rows = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("(1,10) "))
        .count();
    assert_eq!(rows, 5, "{}", r.stdout);
}
