//! What each fuzz target checks, as plain functions: the targets in
//! `fuzz_targets/` call them with libFuzzer's input, and
//! `tests/regressions.rs` replays every kept input through them on a
//! stable build, so a crash once found stays a test.
//!
//! A target fails by panicking: the decoders must answer any bytes with
//! a value or an error, and what they accept must survive a round trip.

use std::collections::VecDeque;
use std::str::FromStr;

use ovbench_launcher::wire::{Request, Response};
use ovbench_proto::wire::{self, short};
use ovbench_proto::{Config, Engine, Key, Mode, MrId, Op, Plan, Protocol, Slice, Space};

/// The engine's wire header decoder: anything it accepts re-encodes to a
/// packet that decodes to the same header, and the payload starts inside
/// the packet.
pub fn wire_header(data: &[u8]) {
    if let Ok((h, start)) = wire::decode(data) {
        assert!(
            start <= data.len(),
            "payload starts at {start}, past the {} bytes",
            data.len()
        );
        let mut again = h.encode();
        let header_len = again.len();
        again.extend_from_slice(&data[start..]);
        let (h2, start2) =
            wire::decode(&again).expect("a decoded packet re-encodes to a valid one");
        assert_eq!(h, h2);
        assert_eq!(start2, header_len);
    }
    if let Ok(f) = wire::decode_fixed(data) {
        let _ = f.key(data);
    }
    let _ = wire::decode_key(data);
}

/// The short header of one-packet eager messages: its one-compare check
/// and its field-by-field decode agree. What the check takes (as the
/// sequence number the input's first four bytes name) decodes to the
/// same tag, sequence number and length, is a whole eager message, and
/// its payload is exactly the rest of the packet; whatever the general
/// decoder makes of a short-kind packet it made through the short
/// decoder.
pub fn short_header(data: &[u8]) {
    let want = data
        .get(4..8)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let checked = short::check(data, want);
    let decoded = short::decode(data);
    if let Some((tag, len)) = checked {
        let f = decoded.as_ref().expect("what the check takes decodes");
        assert_eq!((f.seq, f.tag, f.len), (want, tag, len as u64));
        assert_eq!(f.payload_start() + len, data.len());
        assert_eq!(f.payload_len as usize, len);
        assert_eq!(wire::decode_fixed(data).as_ref(), Ok(f));
    }
    if data.get(3) == Some(&(wire::Kind::Short as u8)) {
        if let Ok(f) = wire::decode_fixed(data) {
            assert_eq!(short::decode(data), Ok(f));
            assert!(f.payload_start() + f.payload_len as usize == data.len());
        }
    }
}

/// The bootstrap service's requests and answers: what decodes re-encodes
/// to the same message.
pub fn bootstrap_wire(data: &[u8]) {
    if let Ok(r) = Request::decode(data) {
        assert_eq!(Request::decode(&r.encode()).expect("re-encoded request"), r);
    }
    if let Ok(r) = Response::decode(data) {
        assert_eq!(
            Response::decode(&r.encode()).expect("re-encoded response"),
            r
        );
    }
}

/// The command line's size, duration and `--sim` parsers: any text gets
/// a value or an error, and a size list holds what it says.
pub fn parsers(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(sizes) = ovbench::sizes::Sizes::from_str(&s) {
        assert!(!sizes.as_slice().is_empty(), "`{s}` parsed to no sizes");
        assert_eq!(sizes.max(), *sizes.as_slice().iter().max().unwrap());
    }
    let _ = ovbench::sizes::ByteSize::from_str(&s);
    let _ = ovbench::sizes::Seconds::from_str(&s);
    let _ = ovbench_sim::SimParams::parse(&s);
    let _ = ovbench_sim::parse_duration_ps(&s);
}

/// The result-file reader behind `plot` and `compare`
/// (`ovbench::plot::load::read_all`), fed what `ovbench plot A B` and
/// `ovbench compare A B` would read: the input split at its first NUL
/// into two files (one file when there is none). What it accepts goes on
/// as those commands take it: the comparison and its lines, the figure
/// and its SVG. Any bytes get a result or an error, never a panic.
pub fn result_json(data: &[u8]) {
    let dir = scratch_dir();
    let parts: Vec<&[u8]> = match data.iter().position(|&b| b == 0) {
        Some(i) => vec![&data[..i], &data[i + 1..]],
        None => vec![data],
    };
    let paths: Vec<std::path::PathBuf> = parts
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let p = dir.join(format!("run{i}.json"));
            std::fs::write(&p, bytes).expect("a scratch result file");
            p
        })
        .collect();
    let Ok(runs) = ovbench::plot::load::read_all(&paths) else {
        return;
    };
    if runs.len() >= 2 {
        if let Ok(c) = ovbench::compare::compare(&runs) {
            let _ = c.lines();
            let _ = c.slower_than(5.0);
        }
    }
    if let Ok(fig) = ovbench::plot::kinds::figure(&runs) {
        let _ = ovbench::plot::render::render(&fig, &dir.join("fig.svg"));
    }
}

/// A directory of this process's own for [`result_json`]'s files.
fn scratch_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ovbench-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("a scratch directory");
    d
}

/// Bytes a test rank owns: region 0 is the posted receives' buffer,
/// region 1 the sends'.
const RECV_LEN: usize = 8192;
const SEND_LEN: usize = 65536;

/// Rank 1 of 2, fed an input read as a script of events: messages from
/// rank 0 (forged, of any kind), completions and registration results
/// for what the engine asked, new receives and sends. Every place the
/// engine puts or takes bytes must lie in a region the rank gave it.
/// The first byte picks the protocol, and its bit 3 turns the fast path
/// off (so both the fast and the general arrival see every input).
pub fn engine_intake(data: &[u8]) {
    let Some((&first, mut script)) = data.split_first() else {
        return;
    };
    let protocol = [
        Protocol::Eager,
        Protocol::RdmaWrite,
        Protocol::RdmaRead,
        Protocol::Pipelined,
        Protocol::Auto,
    ][usize::from(first % 5)];
    let mut cfg = Config::new(1, 2, 4096);
    cfg.plan = Plan::new(protocol)
        .with_eager_limit(1024)
        .with_frag_size(2048);
    cfg.max_unexpected_bytes = 1 << 16;
    cfg.fast_path = first & 8 == 0;
    let mut eng = Engine::new(cfg).expect("a valid configuration");
    let recv = Slice::new(0, 0, RECV_LEN);
    let send = Slice::new(1, 0, SEND_LEN);
    let mut ctxs = VecDeque::new();
    let mut tokens = VecDeque::new();
    let mut now = 0u64;
    let _ = eng.irecv(now, recv, Some(0), None, Space::User);
    while let Some((&op, rest)) = script.split_first() {
        script = rest;
        now += 1;
        match op % 6 {
            0 => {
                let (msg, rest) = take_message(script);
                script = rest;
                if let Ok(Some(p)) = eng.on_message(now, 0, msg) {
                    assert!(
                        recv.contains(&p.dst),
                        "placement {:?} outside the receive buffer",
                        p.dst
                    );
                    assert!(
                        p.src_start + p.dst.len <= msg.len(),
                        "placement reads past the message"
                    );
                }
            }
            1 => {
                if let Some(ctx) = ctxs.pop_front() {
                    let _ = eng.on_completion(now, ctx);
                }
            }
            2 => {
                if let Some((token, slice)) = tokens.pop_front() {
                    let slice: Slice = slice;
                    let key = Key {
                        addr: slice.offset as u64,
                        len: slice.len as u64,
                        blob: vec![1, 2, 3],
                    };
                    let _ = eng.on_registered(now, token, MrId(slice.region + 1), key);
                }
            }
            3 => {
                let len = usize::from(script.first().copied().unwrap_or(0)) * 64;
                let _ = eng.irecv(
                    now,
                    Slice::new(0, 0, len.min(RECV_LEN)),
                    None,
                    None,
                    Space::User,
                );
            }
            4 => {
                let len = usize::from(script.first().copied().unwrap_or(0)) * 256;
                let _ = eng.isend(
                    now,
                    Slice::new(1, 0, len),
                    0,
                    1,
                    Mode::Standard,
                    Space::User,
                );
            }
            _ => {
                let _ = eng.on_message(now, 1 + u32::from(op), script);
            }
        }
        while let Some(op) = eng.poll_op() {
            check_op(&op, recv, send, &mut ctxs, &mut tokens);
            if let Op::Send { header, .. } = op {
                eng.recycle_header(header);
            }
        }
        while eng.poll_event().is_some() {}
    }
}

/// A message of the script: a length byte, then that many bytes (or what
/// is left).
fn take_message(script: &[u8]) -> (&[u8], &[u8]) {
    let Some((&len, rest)) = script.split_first() else {
        return (&[], &[]);
    };
    let len = (usize::from(len) * 4).min(rest.len());
    rest.split_at(len)
}

/// Every slice an operation names lies in the region it belongs to.
fn check_op(
    op: &Op,
    recv: Slice,
    send: Slice,
    ctxs: &mut VecDeque<u64>,
    tokens: &mut VecDeque<(u64, Slice)>,
) {
    let ours = |s: &Slice| recv.contains(s) || send.contains(s) || s.len == 0;
    match op {
        Op::Send { payload, ctx, .. } => {
            if let Some(p) = payload {
                assert!(ours(p), "send payload {p:?} outside the rank's regions");
            }
            ctxs.push_back(*ctx);
        }
        Op::Write(o) | Op::Read(o) => {
            let local = &o.local;
            assert!(
                ours(local),
                "one-sided local slice {local:?} outside the rank's regions"
            );
            ctxs.push_back(o.ctx);
        }
        Op::Register { slice, token } => {
            assert!(
                ours(slice),
                "registration of {slice:?} outside the rank's regions"
            );
            tokens.push_back((*token, *slice));
        }
        Op::Deliver { dst, data } => {
            assert!(
                recv.contains(dst),
                "delivery to {dst:?} outside the receive buffer"
            );
            assert_eq!(dst.len, data.len(), "delivery length");
        }
        Op::StampByte { at, .. } => {
            assert!(ours(at), "stamp at {at:?} outside the rank's regions");
        }
        Op::Deregister { .. } => {}
    }
}
