//! Every protocol, with polling and with a progress thread, moves every
//! size of the sweep intact (`--verify` checks each byte outside the
//! timed region), and the operation counts show what it did.

mod common;

use std::time::Duration;

use common::{ovbench_rows, Scratch};

const SIZES: &str = "0,8,64K,1M,4M";
const ITERS: u64 = 4;
const WARMUP: u64 = 1;

fn run(
    dir: &std::path::Path,
    extra: &[&str],
    progress: &str,
    sizes: &str,
) -> Vec<serde_json::Value> {
    let name = format!("{}-{progress}.json", extra.join("_").replace("--", ""));
    let out = dir.join(name);
    let iters = ITERS.to_string();
    let warmup = WARMUP.to_string();
    let mut args = vec![
        "latency",
        "--progress",
        progress,
        "--sizes",
        sizes,
        "--iters",
        &iters,
        "--warmup",
        &warmup,
        "--verify",
    ];
    args.extend_from_slice(extra);
    ovbench_rows(&args, &out, Duration::from_secs(120)).1
}

#[test]
fn every_protocol_verifies_with_poll_and_thread_progress() {
    let dir = Scratch::new("protos");
    let n = ITERS + WARMUP;
    for progress in ["poll", "thread"] {
        for proto in ["eager", "rdma-write", "rdma-read", "pipelined", "auto"] {
            // auto's limit pinned: by default it is measured, and may reach 4 MiB.
            let rows = run(
                &dir,
                &["--proto", proto, "--eager-limit", "16K"],
                progress,
                SIZES,
            );
            assert_eq!(rows.len(), 5, "{proto}/{progress}");
            let big = &rows[4]["ops"];
            match proto {
                "eager" => assert_eq!(
                    (big["reads"].as_u64(), big["writes"].as_u64()),
                    (Some(0), Some(0)),
                    "{big}"
                ),
                "rdma-read" => assert_eq!(big["reads"].as_u64(), Some(2 * n), "{big}"),
                "rdma-write" => assert_eq!(big["writes"].as_u64(), Some(2 * n), "{big}"),
                // 4 MiB in 128 KiB fragments after the first: many writes per message.
                "pipelined" => assert!(big["writes"].as_u64().unwrap() > 2 * n, "{big}"),
                // auto over tcp (RMA emulated): rdma-write above the eager limit.
                _ => assert_eq!(big["writes"].as_u64(), Some(2 * n), "{big}"),
            }
        }
        for op in ["write", "read"] {
            // Zero bytes cannot be moved by a bare one-sided operation: skipped with a note.
            let rows = run(&dir, &["--proto", "raw", "--op", op], progress, SIZES);
            assert_eq!(rows.len(), 4, "raw {op}/{progress}");
        }
        let rows = run(
            &dir,
            &["--proto", "raw", "--op", "send"],
            progress,
            "0,8,1K",
        );
        assert_eq!(rows.len(), 3);
    }
}
