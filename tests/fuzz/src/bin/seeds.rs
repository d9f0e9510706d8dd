//! Writes the starting corpus: real frames, made by the code that sends
//! them, so the fuzzer starts from inputs the decoders accept.
//!
//! `seeds DIR` fills `DIR/<target>/` for every target.

use std::fs;
use std::path::Path;

use ovbench::cli::Cli;

use ovbench_launcher::wire::{CollKind, Request, Response, NONCE_LEN};
use ovbench_proto::{Config, Engine, Key, Mode, MrId, Op, Plan, Protocol, Slice, Space};

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: seeds DIR");
        std::process::exit(2);
    };
    let dir = Path::new(&dir);
    let mut n = 0;
    let mut put = |target: &str, bytes: &[u8]| {
        let d = dir.join(target);
        fs::create_dir_all(&d).expect("corpus directory");
        fs::write(d.join(format!("seed-{n:04}")), bytes).expect("seed file");
        n += 1;
    };
    for (p, proto) in PROTOCOLS.iter().enumerate() {
        for len in [0usize, 100, 1500, 5000, 20000] {
            for frame in frames(*proto, len) {
                put("wire_header", &frame);
                put("short_header", &frame);
                // engine_intake: protocol byte (with the fast path on,
                // then off), then "message" events.
                for fast_off in [0, 8] {
                    let mut script = vec![p as u8 | fast_off, 0, (frame.len() / 4).min(255) as u8];
                    script.extend_from_slice(&frame);
                    script.extend_from_slice(&[1, 2, 4, 10]);
                    put("engine_intake", &script);
                }
            }
        }
    }
    let requests = [
        Request::Hello { rank: 1, size: 4 },
        Request::Proof { mac: vec![7; 32] },
        Request::Put {
            key: "addr.1".into(),
            value: vec![1, 2, 3],
        },
        Request::Get {
            wait_ms: 1000,
            key: "addr.0".into(),
        },
        Request::Collective {
            kind: CollKind::Allgather,
            wait_ms: 500,
            data: vec![9; 16],
        },
        Request::Collective {
            kind: CollKind::Barrier,
            wait_ms: 500,
            data: vec![],
        },
        Request::Bye,
    ];
    for r in &requests {
        put("bootstrap_wire", &r.encode());
    }
    let responses = [
        Response::Ok,
        Response::Challenge([3; NONCE_LEN]),
        Response::Value(vec![5; 8]),
        Response::Gathered(vec![vec![1; 4], vec![2; 4]]),
        Response::Err("refused".into()),
    ];
    for r in &responses {
        put("bootstrap_wire", &r.encode());
    }
    for s in [
        "0:4M",
        "8,1K,1M",
        "1M",
        "64K:64K",
        "60",
        "0.5",
        "10ms",
        "2m",
        "L=1us,os=300ns,or=300ns,g=500ns,G=0.1ns",
        "L=5us,o=1us,jitter=10%,seed=7",
    ] {
        put("parsers", s.as_bytes());
    }
    let files = result_files(dir);
    for seed in &files {
        put("result_json", seed);
    }
    // Each file cut to one row per table: small inputs, where the
    // fuzzer's mutations reach the structure rather than the numbers.
    let mut keys = std::collections::BTreeSet::new();
    for seed in &files {
        for part in seed.split(|&b| b == 0) {
            let Ok(mut doc) = serde_json::from_slice::<serde_json::Value>(part) else {
                continue;
            };
            collect_keys(&doc, &mut keys);
            for t in doc["tables"].as_array_mut().into_iter().flatten() {
                if let Some(rows) = t["rows"].as_array_mut() {
                    rows.truncate(1);
                }
            }
            put("result_json", &serde_json::to_vec(&doc).expect("JSON"));
        }
    }
    // A libFuzzer dictionary of the files' keys and JSON's tokens
    // (ci/fuzz passes DIR/<target>.dict with -dict).
    let mut dict = String::new();
    for k in &keys {
        dict += &format!("\"\\\"{k}\\\"\"\n");
    }
    for t in [
        "{", "}", "[", "]", ":", ",", "null", "true", "false", "-1", "0", "1e308",
    ] {
        dict += &format!("\"{t}\"\n");
    }
    fs::write(dir.join("result_json.dict"), dict).expect("dictionary");
}

/// Every object key in `v`.
fn collect_keys(v: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    keys.insert(k.clone());
                }
                collect_keys(x, keys);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_keys(x, keys)),
        _ => {}
    }
}

/// Real result files: every command run small under `--transport sim`
/// with `--json` (the runs print their tables on stdout; a `--proto`
/// list re-reads the process's own arguments, so none here), and two
/// latency runs joined by a NUL (result_json reads that as two files:
/// compare's baseline and the other run).
fn result_files(dir: &Path) -> Vec<Vec<u8>> {
    const RUNS: &[&[&str]] = &[
        &[
            "latency", "--sizes", "8,4K", "--iters", "20", "--warmup", "2",
        ],
        &[
            "latency", "--sizes", "8,4K", "--iters", "20", "--sim", "L=3us",
        ],
        &[
            "latency",
            "--sizes",
            "8,64K",
            "--iters",
            "5",
            "--proto",
            "rdma-write",
        ],
        &["bw", "--sizes", "8,4K", "--iters", "5", "--window", "4"],
        &["bibw", "--sizes", "8,4K", "--iters", "5", "--window", "4"],
        &[
            "msgrate", "--sizes", "8,4K", "--iters", "5", "--window", "4",
        ],
        &[
            "overhead",
            "--sizes",
            "8,1K",
            "--iterations",
            "20",
            "--repeats",
            "1",
        ],
        &["overlap", "--sizes", "10K", "--iters", "2", "--steps", "2"],
        &["logp", "--max-size", "1K", "--max-its", "20"],
        &["bcast", "--reps", "2", "--msgsize", "64"],
        &[
            "commtest",
            "--total",
            "4K",
            "--min-packet",
            "1K",
            "--iterations",
            "2",
        ],
    ];
    let json = dir.join("sim-run.json");
    let mut files = Vec::new();
    for args in RUNS {
        let argv = std::iter::once("ovbench")
            .chain(args.iter().copied())
            .chain(["--transport", "sim", "--quiet", "--json"])
            .chain(json.to_str());
        let matches = Cli::command_checked()
            .try_get_matches_from(argv)
            .expect("a valid sim command line");
        let cli = Cli::from_matches(&matches).expect("a valid sim command line");
        ovbench::run::run(&cli).unwrap_or_else(|e| panic!("sim run {args:?}: {e:#}"));
        files.push(fs::read(&json).expect("the sim run's JSON"));
    }
    let _ = fs::remove_file(&json);
    let mut pair = files[0].clone();
    pair.push(0);
    pair.extend_from_slice(&files[1]);
    files.push(pair);
    files
}

const PROTOCOLS: [Protocol; 5] = [
    Protocol::Eager,
    Protocol::RdmaWrite,
    Protocol::RdmaRead,
    Protocol::Pipelined,
    Protocol::Auto,
];

/// The packets rank 0's engine sends for one message of `len` bytes to
/// rank 1 (payload bytes zero), answering its registrations and
/// completing its sends as a transport would.
fn frames(proto: Protocol, len: usize) -> Vec<Vec<u8>> {
    let mut cfg = Config::new(0, 2, 4096);
    cfg.plan = Plan::new(proto).with_eager_limit(1024).with_frag_size(2048);
    let mut eng = Engine::new(cfg).expect("a valid configuration");
    let mut out = Vec::new();
    if eng
        .isend(0, Slice::new(1, 0, len), 1, 1, Mode::Standard, Space::User)
        .is_err()
    {
        return out;
    }
    for step in 1..64u64 {
        let Some(op) = eng.poll_op() else { break };
        match op {
            Op::Send {
                header,
                payload,
                ctx,
                ..
            } => {
                let mut f = header.to_vec();
                f.resize(f.len() + payload.map_or(0, |p| p.len), 0);
                out.push(f);
                eng.recycle_header(header);
                let _ = eng.on_completion(step, ctx);
            }
            Op::Register { slice, token } => {
                let key = Key {
                    addr: 0x10_000,
                    len: slice.len as u64,
                    blob: vec![1, 2, 3, 4],
                };
                let _ = eng.on_registered(step, token, MrId(1), key);
            }
            Op::Write(o) | Op::Read(o) => {
                let _ = eng.on_completion(step, o.ctx);
            }
            _ => {}
        }
    }
    out
}
