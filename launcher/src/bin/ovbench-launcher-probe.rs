//! A stand-in for `ovbench` in the launcher's integration tests: run with
//! no job environment it launches `--np N` copies of itself; as a rank it
//! pins itself, joins the bootstrap service, exchanges "addresses" and
//! checks them, then behaves as `PROBE_FAIL` asks:
//!
//! - `exit3`: rank `PROBE_FAIL_RANK` exits with status 3 after the exchange;
//! - `hang`: that rank sleeps forever (the test kills it);
//! - `hang-all`: every rank sleeps forever (the test interrupts the launcher);
//! - `linger`: that rank finishes its part, then never exits.
//!
//! Each rank prints `probe: rank R pid P` to stderr so the test can find
//! and check every process; rank 0 prints `probe: ok N ranks` to stdout.

use std::ffi::OsString;
use std::process::exit;
use std::time::Duration;

use anyhow::{bail, Result};
use ovbench_launcher::{detect, launch_local, pin_self, Bootstrap, LaunchOptions, RankEnv, Role};

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let np = args
        .iter()
        .position(|a| a == "--np")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.to_str()?.parse().ok());
    let timeout = Duration::from_millis(
        std::env::var("PROBE_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000),
    );
    let code = match detect(np) {
        Ok(Role::Launcher { np }) => {
            let opts = LaunchOptions {
                timeout,
                ..LaunchOptions::default()
            };
            launch_local(np, &args, &opts).unwrap_or_else(|e| {
                eprintln!("ovbench: {e:#}");
                2
            })
        }
        Ok(Role::Rank(env)) => match rank_main(&env, timeout) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("probe: rank {}: {e:#}", env.rank);
                1
            }
        },
        Err(e) => {
            eprintln!("ovbench: {e:#}");
            2
        }
    };
    exit(code);
}

fn rank_main(env: &RankEnv, timeout: Duration) -> Result<()> {
    let rank = env.rank;
    eprintln!("probe: rank {rank} pid {}", std::process::id());
    if let Some(cpu) = env.cpu {
        let aff = pin_self(cpu)?;
        eprintln!("probe: rank {rank} pinned to {aff}");
    }
    let mut b = Bootstrap::connect(env, timeout)?;
    let all = b.allgather(format!("addr-of-{rank}").as_bytes())?;
    for (r, a) in all.iter().enumerate() {
        if a != format!("addr-of-{r}").as_bytes() {
            bail!("allgather entry {r} is {a:?}");
        }
    }
    b.put(&format!("k{rank}"), &rank.to_le_bytes())?;
    let next = (rank + 1) % b.size();
    if b.get(&format!("k{next}"))? != next.to_le_bytes() {
        bail!("wrong value for k{next}");
    }
    b.barrier()?;
    let mode = std::env::var("PROBE_FAIL").unwrap_or_default();
    let fail_rank: Option<u32> = std::env::var("PROBE_FAIL_RANK")
        .ok()
        .and_then(|v| v.parse().ok());
    let me = fail_rank == Some(rank);
    match mode.as_str() {
        "exit3" if me => exit(3),
        "hang" if me => hang(rank),
        "hang-all" => hang(rank),
        _ => {}
    }
    b.barrier()?;
    b.finish()?;
    if rank == 0 {
        println!("probe: ok {} ranks", env.size);
    }
    if mode == "linger" && me {
        hang(rank);
    }
    Ok(())
}

fn hang(rank: u32) -> ! {
    eprintln!("probe: rank {rank} hanging");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
