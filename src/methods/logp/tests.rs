//! What the sim cannot show (its clock costs nothing to read, its isend
//! wait is free, its first round trips are no slower than the rest): rank
//! 0 run against a scripted communicator whose every call costs a known,
//! virtual time, the mirror's answers included.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Parser;
use ovbench_core::{
    Buf, Clock, ClockInfo, CommInfo, Communicator, OpCounts, Rank, RegionId, Req, SendMode, Source,
    Span, Status, Tag, TagSel, TransportError,
};

use super::super::common::TAG_CTRL;
use super::{run, Args, Output};
use crate::report::Sink;

/// The posting call of a data send, and its wait (ns).
const POST: f64 = 100.0;
const WAIT: f64 = 1000.0;
/// Posting a data receive, and completing or(m)'s timed one.
const IRECV: f64 = 30.0;
const RECV: f64 = 50.0;
/// Extra cost of each of the first two sends (receives) of a new size:
/// a cold cache, as logp_mpi.c's warm-up round assumes.
const COLD: f64 = 5000.0;

struct FakeClock {
    t: Arc<AtomicU64>,
    cost: f64,
}

impl Clock for FakeClock {
    fn ticks(&self) -> u64 {
        self.t.load(Ordering::Relaxed)
    }
    fn ns_per_tick(&self) -> f64 {
        1.0
    }
    fn info(&self) -> ClockInfo {
        ClockInfo {
            source: "script".into(),
            hz: 1e9,
            resolution_ns: 1.0,
            call_cost_ns: self.cost,
        }
    }
}

enum Pending {
    Send { data: bool },
    Recv { len: usize, data: bool },
}

/// Rank 0 of two; the mirror's part is the reply time `reply(m)` after a
/// send of m bytes.
struct Script {
    clock: FakeClock,
    reply: fn(usize) -> f64,
    reqs: HashMap<u64, Pending>,
    next: u64,
    last_sent: usize,
    /// (size, cold operations left) for sends and timed receives.
    cold_send: (usize, u32),
    cold_recv: (usize, u32),
    /// The next data receive is or(m)'s timed one (a spin came first).
    after_delay: bool,
}

impl Script {
    fn new(clock_cost: f64, reply: fn(usize) -> f64) -> Script {
        Script {
            clock: FakeClock {
                t: Arc::new(AtomicU64::new(0)),
                cost: clock_cost,
            },
            reply,
            reqs: HashMap::new(),
            next: 0,
            last_sent: 0,
            cold_send: (0, 0),
            cold_recv: (0, 0),
            after_delay: false,
        }
    }

    fn spend(&self, ns: f64) {
        self.clock.t.fetch_add(ns.round() as u64, Ordering::Relaxed);
    }

    fn cold(state: &mut (usize, u32), len: usize) -> f64 {
        if state.0 != len {
            *state = (len, 2);
        }
        if state.1 > 0 {
            state.1 -= 1;
            COLD
        } else {
            0.0
        }
    }

    fn req(&mut self, p: Pending) -> Req {
        self.next += 1;
        self.reqs.insert(self.next, p);
        Req(self.next)
    }
}

impl Communicator for Script {
    fn rank(&self) -> Rank {
        0
    }
    fn size(&self) -> u32 {
        2
    }
    fn info(&self) -> CommInfo {
        // logp's run reads no transport description (run_method checks
        // the protocol before it); the script has none to give.
        unreachable!("logp::run asked the script for its transport description")
    }
    fn clock(&self) -> &dyn Clock {
        &self.clock
    }
    fn set_eager_limit(&mut self, _: ovbench_core::EagerLimit) -> ovbench_core::Result<()> {
        unreachable!("logp::run chose no eager limit")
    }
    fn work(&mut self, units: u64) {
        self.spend(units as f64);
    }
    fn work_unit_ns(&self) -> f64 {
        1.0
    }
    fn delay(&mut self, ns: f64) {
        self.spend(ns);
        self.after_delay = true;
    }
    // The script moves no bytes (only time): a buffer is its length, what
    // is written into it is dropped, and it reads as zeros.
    fn alloc(&mut self, len: usize) -> Result<Buf, TransportError> {
        Ok(Buf {
            region: RegionId(0),
            len,
        })
    }
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<(), TransportError> {
        f(&mut vec![0; buf.len]);
        Ok(())
    }
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        f(&vec![0; buf.len]);
        Ok(())
    }
    fn isend_mode(
        &mut self,
        data: Span,
        _dst: Rank,
        tag: Tag,
        _mode: SendMode,
    ) -> Result<Req, TransportError> {
        let data_len = data.len;
        let data = tag != TAG_CTRL;
        if data {
            let cold = Self::cold(&mut self.cold_send, data_len);
            self.spend(POST + cold);
            self.last_sent = data_len;
        }
        Ok(self.req(Pending::Send { data }))
    }
    fn irecv(&mut self, room: Span, _src: Source, tag: TagSel) -> Result<Req, TransportError> {
        let len = room.len;
        let data = tag != Some(TAG_CTRL);
        if data {
            self.spend(IRECV);
        }
        Ok(self.req(Pending::Recv { len, data }))
    }
    fn test(&mut self, req: Req) -> Result<Option<Status>, TransportError> {
        self.wait(req).map(Some)
    }
    fn wait(&mut self, req: Req) -> Result<Status, TransportError> {
        let p = self
            .reqs
            .remove(&req.0)
            .ok_or_else(|| TransportError::Invalid(format!("unknown request {}", req.0)))?;
        let len = match p {
            Pending::Send { data } => {
                if data {
                    self.spend(WAIT);
                }
                0
            }
            Pending::Recv { len, data: false } => {
                // Control replies are empty (the mirror's "ready").
                let _ = len;
                0
            }
            Pending::Recv { len, data: true } => {
                if std::mem::take(&mut self.after_delay) {
                    let cold = Self::cold(&mut self.cold_recv, len);
                    self.spend(RECV + cold);
                } else {
                    self.spend((self.reply)(self.last_sent));
                }
                len
            }
        };
        Ok(Status {
            source: 1,
            tag: 0,
            len,
        })
    }
    fn progress(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    fn barrier(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    fn op_counts(&self) -> OpCounts {
        OpCounts::default()
    }
    fn set_bare_op(
        &mut self,
        _: Option<ovbench_core::engine_comm::RawOp>,
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(
            "the script has no engine".into(),
        ))
    }
    /// The script records no transfers.
    fn drain_transfers(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

#[derive(Default)]
struct Rows {
    cells: Vec<Vec<String>>,
    json: Vec<serde_json::Value>,
    summary: serde_json::Value,
    notes: Vec<String>,
}

impl Sink for Rows {
    fn table(&mut self, _: &str, _: &[&str]) {}
    fn row(&mut self, cells: &[String], json: serde_json::Value) {
        self.cells.push(cells.to_vec());
        self.json.push(json);
    }
    fn summary(&mut self, json: serde_json::Value, _: &[String]) {
        self.summary = json;
    }
    fn note(&mut self, text: &str) {
        self.notes.push(text.to_string());
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn go(clock_cost: f64, reply: fn(usize) -> f64, flags: &[&str]) -> (Output, Rows) {
    let args = Cli::try_parse_from(std::iter::once("logp").chain(flags.iter().copied()))
        .expect("arguments")
        .args;
    let mut c = Script::new(clock_cost, reply);
    let mut rows = Rows::default();
    let out = run(&mut c, &args, &mut rows).expect("runs");
    (out, rows)
}

/// A round trip's reply, linear in the size sent (whole ns).
fn linear(m: usize) -> f64 {
    (2000 + m / 8) as f64
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} vs {b}");
}

#[test]
fn os_is_the_send_call_less_the_clock_cost_and_isend_leaves_its_wait_out() {
    for (mode, os) in [
        ("send", POST + WAIT),
        ("isend", POST),
        ("ssend", POST + WAIT),
    ] {
        let (out, _) = go(7.0, linear, &["--max-size", "64", "--send-mode", mode]);
        for r in &out.sizes {
            close(r.os.mean, os - 7.0);
            close(r.or.mean, IRECV + RECV - 7.0);
            // The whole round trip, the isend's wait included.
            close(r.rtt.mean, POST + WAIT + IRECV + linear(r.size) - 7.0);
            assert_eq!(r.os.min, r.os.mean);
        }
    }
    // or(m) with irecv: posted before the spin, only the wait timed.
    let (out, _) = go(7.0, linear, &["--max-size", "8", "--recv-mode", "irecv"]);
    assert!(out
        .sizes
        .iter()
        .all(|r| (r.or.mean - (RECV - 7.0)).abs() < 1e-6));
}

#[test]
fn the_warm_up_round_is_discarded_up_to_64k_only() {
    let (out, rows) = go(
        0.0,
        linear,
        &[
            "--min-size",
            "32K",
            "--max-size",
            "128K",
            "--max-diff",
            "10",
        ],
    );
    for r in out.sizes.iter().filter(|r| r.size <= 64 << 10) {
        close(r.os.mean, POST + WAIT);
        close(r.or.mean, IRECV + RECV);
        assert_eq!(r.os.samples, 3, "{r:?}");
    }
    // 128K keeps its two cold round trips: more rounds, a higher mean.
    let big = out.sizes.iter().find(|r| r.size == 128 << 10).unwrap();
    assert!(big.os.mean > POST + WAIT + 100.0, "{big:?}");
    assert_eq!(big.os.min, POST + WAIT);
    assert_eq!(big.os.samples, 18);
    // os_min and or_min reach the JSON.
    assert_eq!(rows.json.last().unwrap()["os_min_ns"], POST + WAIT);
    // A g(m) pushed up by cold samples is no reason to extend k_max.
    assert_eq!(out.k_max, 128 << 10);
}

/// Steep up to 3000 bytes, then 1/8 ns/B: g(4K) falls below the line
/// through g(1K) and g(2K), g(8K) below the line through 2K and 4K, and
/// g(16K) lies on the line through 4K and 8K.
fn kinked(m: usize) -> f64 {
    (2000 + m.min(3000) + m.saturating_sub(3000) / 8) as f64
}

#[test]
fn k_max_goes_on_only_while_g_falls_below_the_line() {
    let (out, rows) = go(0.0, kinked, &["--max-size", "4K", "--max-diff", "10"]);
    assert_eq!(out.k_max, 16 << 10);
    let ext: Vec<usize> = out
        .sizes
        .iter()
        .filter(|r| r.extended)
        .map(|r| r.size)
        .collect();
    assert_eq!(ext, [8 << 10, 16 << 10]);
    assert_eq!(rows.summary["k_max_extended"], true);
    assert!(rows
        .notes
        .iter()
        .any(|n| n.contains("k_max extended to 8192")));
    // Linear g: nothing beyond --max-size.
    let (out, rows) = go(0.0, linear, &["--max-size", "4K"]);
    assert_eq!(out.k_max, 4096);
    assert_eq!(rows.summary["k_max_extended"], false);
}

#[test]
fn l_not_positive_is_unknown_null_and_flagged() {
    // RTT(0) = 1.33 µs, g(0) ≈ 1.1 µs (a train's send calls): L < 0.
    let (out, rows) = go(0.0, |_| 200.0, &["--max-size", "0"]);
    assert!(out.l_ns.is_none() && out.l_raw_ns < 0.0, "{out:?}");
    assert!(rows.summary["L_ns"].is_null());
    assert!(rows.summary["L_reason"]
        .as_str()
        .unwrap()
        .contains("L unknown"));
    let row0 = &rows.json[0];
    assert!(row0["L_ns"].is_null() && row0["L_reason"].is_string());
    assert_eq!(row0["valid"], false);
    assert!(row0["reason"].as_str().unwrap().contains("L unknown"));
    assert_eq!(rows.cells[0][6], "unknown");
    assert_eq!(rows.cells[0][7], "INVALID");
    // Positive: a number, the row valid.
    let (out, rows) = go(0.0, linear, &["--max-size", "0"]);
    close(
        out.l_ns.unwrap(),
        (POST + WAIT + IRECV + linear(0)) / 2.0 - out.g0_ns,
    );
    assert_eq!(rows.json[0]["valid"], true);
}

#[test]
fn a_negative_overhead_is_flagged() {
    // A clock said to cost more than the isend call: os < 0.
    let (out, rows) = go(150.0, linear, &["--max-size", "2", "--send-mode", "isend"]);
    assert!(out.sizes.iter().all(|r| r.os.mean < 0.0));
    for j in &rows.json {
        assert_eq!(j["valid"], false, "{j}");
        assert!(j["reason"].as_str().unwrap().contains("os("), "{j}");
    }
    assert!(rows.notes.iter().any(|n| n.contains("INVALID")));
}

#[test]
fn bad_options_are_one_line_errors() {
    for flags in [
        &["--max-its", "0"][..],
        &["--eps", "0"],
        &["--conf-int", "1"],
        &["--min-size", "2K", "--max-size", "1K"],
        &["--max-size", "1G"],
        &["--max-size", "1"],
    ] {
        let args = Cli::try_parse_from(std::iter::once("logp").chain(flags.iter().copied()))
            .unwrap()
            .args;
        let mut c = Script::new(0.0, linear);
        let e = run(&mut c, &args, &mut Rows::default())
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n') && e.contains("--"), "{flags:?}: {e}");
    }
}

#[test]
fn columns_show_json_keys() {
    use super::{LogpRow, SizeResult};
    // Size 0's row, the one with L (known, then unknown).
    let r = SizeResult::default();
    for l in [(1.0, ""), (-1.0, "RTT(0)/2 is not above g(0)")] {
        crate::output::check_fields(&(), &LogpRow::new(&r, Some(l))).unwrap();
    }
}
