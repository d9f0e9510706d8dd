//! The contract's conformance suite, generic over [`crate::Transport`].
//!
//! Every fabric crate runs it against its own transport, in one process:
//!
//! ```ignore
//! fn make(n: u32) -> Vec<Box<dyn Transport>> { /* n unconnected endpoints */ }
//! mod two_ranks { ovbench_core::conformance_tests!(super::make, 2); }
//! ```
//!
//! [`conformance_tests!`](crate::conformance_tests) generates one `#[test]`
//! per check; [`run_all`] runs them all and reports each result. A check
//! gets freshly made endpoints, already connected by [`connect_all`], and
//! drives all of them from one thread by polling them in turn (every loop
//! has a deadline), so a target that needs its progress engine to serve a
//! one-sided request gets it. What the checks pin, beyond the contract's
//! module docs:
//!
//! * an `Err` from a transport names the peer as `rank N` in its message,
//!   and a [`Completion::Error`] carries the peer, the operation and the
//!   context of the failed operation;
//! * a one-sided access outside a live registration, through a
//!   deregistered key or through a garbled key is refused (an `Err` at
//!   post or an error completion) and leaves the target's memory untouched;
//! * a peer whose transport was dropped is reported within
//!   [`PEER_LOSS_DEADLINE`], and the other peers keep working.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::{
    Completion, Ctx, LocalSlice, MrHandle, OpKind, Rank, RemoteKey, Transport, TransportError,
};

/// A job's endpoints, index = rank.
pub type Endpoints = Vec<Box<dyn Transport>>;
/// One check: gets connected endpoints, says what went wrong.
pub type Check = fn(&mut Endpoints) -> Result<(), String>;

/// Longest any single wait of a check may take.
pub const WAIT_DEADLINE: Duration = Duration::from_secs(20);
/// How soon the survivors must report a dropped peer (DESIGN.md: a killed
/// rank stops the job within 5 s).
pub const PEER_LOSS_DEADLINE: Duration = Duration::from_secs(5);

/// Exchange every endpoint's address and connect all of them at once
/// (connect is collective, so each runs on its own scoped thread).
pub fn connect_all(ts: &mut [Box<dyn Transport>]) -> Result<(), TransportError> {
    let addrs: Vec<Vec<u8>> = ts.iter().map(|t| t.address()).collect();
    let results: Vec<Result<(), TransportError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ts
            .iter_mut()
            .map(|t| {
                let a = &addrs;
                s.spawn(move || t.connect(a))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

/// Make `size` endpoints, connect them and run `check`.
pub fn run_check(check: Check, make: &dyn Fn(u32) -> Endpoints, size: u32) -> Result<(), String> {
    let mut ts = make(size);
    if ts.len() != size as usize {
        return Err(format!(
            "the factory made {} endpoints, {size} asked",
            ts.len()
        ));
    }
    connect_all(&mut ts).map_err(|e| format!("connect failed: {e}"))?;
    check(&mut ts)
}

/// Run every check on fresh endpoints; one result per check.
pub fn run_all(
    make: &dyn Fn(u32) -> Endpoints,
    size: u32,
) -> Vec<(&'static str, Result<(), String>)> {
    CHECKS
        .iter()
        .map(|(name, check)| (*name, run_check(*check, make, size)))
        .collect()
}

/// One `#[test]` per conformance check for a factory
/// `Fn(u32) -> Vec<Box<dyn Transport>>` and a job size (at least 2).
///
/// The `@`-prefixed arms are internal: they keep the list of checks in one
/// place, which also builds [`CHECKS`].
#[macro_export]
macro_rules! conformance_tests {
    (@list $($pre:tt)*) => {
        $crate::conformance_tests!($($pre)*;
            identity_and_caps, regions, send_order_and_max_size, zero_length_messages,
            oversize_send_rejected, write_visible_on_completion, read_returns_target_bytes,
            out_of_range_rejected, deregistered_key_rejected, garbled_key_rejected,
            many_outstanding, key_through_the_wire, block_returns_when_ready,
            tagged_or_unsupported, peer_dropped_reported);
    };
    (@consts; $($name:ident),* $(,)?) => {
        /// Every check, by name.
        pub const CHECKS: &[(&str, Check)] = &[$((stringify!($name), $name)),*];
    };
    (@each $make:expr, $size:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if let Err(e) = $crate::conformance::run_check($crate::conformance::$name, &$make, $size) {
                    panic!("conformance check `{}` failed: {e}", stringify!($name));
                }
            }
        )*
    };
    ($make:expr, $size:expr) => {
        $crate::conformance_tests!(@list @each $make, $size);
    };
}

conformance_tests!(@list @consts);

/// Drives all endpoints from one thread and sorts their completions.
struct Net<'a> {
    ts: &'a mut Endpoints,
    inbox: Vec<VecDeque<Completion>>,
    /// A dropped peer whose error completions are expected anywhere.
    ignore_peer: Option<Rank>,
}

impl<'a> Net<'a> {
    fn new(ts: &'a mut Endpoints) -> Net<'a> {
        let n = ts.len();
        Net {
            ts,
            inbox: (0..n).map(|_| VecDeque::new()).collect(),
            ignore_peer: None,
        }
    }

    fn last(&self) -> usize {
        self.ts.len() - 1
    }

    /// Poll every endpoint once.
    fn pump(&mut self) -> Result<(), String> {
        self.pump_for(0)
    }

    /// Poll every endpoint once, `rank` last, so that what `rank` then
    /// sees is checked before any other endpoint makes progress again
    /// (a write that completed early is caught before the target polls).
    fn pump_for(&mut self, rank: usize) -> Result<(), String> {
        let n = self.ts.len();
        let mut v = Vec::new();
        for r in (rank + 1..n).chain(0..=rank) {
            self.ts[r]
                .poll(&mut v)
                .map_err(|e| format!("rank {r}: poll failed: {e}"))?;
            self.inbox[r].extend(v.drain(..));
        }
        Ok(())
    }

    /// Poll everyone until `rank` has `count` completions matching `pred`;
    /// remove and return them in arrival order. Any other error completion
    /// on `rank` fails the wait.
    fn wait_n(
        &mut self,
        rank: usize,
        count: usize,
        what: &str,
        deadline: Duration,
        pred: &dyn Fn(&Completion) -> bool,
    ) -> Result<Vec<Completion>, String> {
        let end = Instant::now() + deadline;
        let mut got = Vec::with_capacity(count);
        loop {
            let mut i = 0;
            while i < self.inbox[rank].len() && got.len() < count {
                if pred(&self.inbox[rank][i]) {
                    got.push(self.inbox[rank].remove(i).expect("index checked"));
                } else if matches!(self.inbox[rank][i], Completion::Error { peer, .. } if Some(peer) != self.ignore_peer)
                {
                    return Err(format!(
                        "rank {rank} waiting for {what}: unexpected {:?}",
                        self.inbox[rank][i]
                    ));
                } else {
                    i += 1;
                }
            }
            if got.len() == count {
                return Ok(got);
            }
            if Instant::now() > end {
                return Err(format!(
                    "rank {rank}: timed out after {deadline:?} waiting for {what} ({} of {count} seen; other completions: {:?})",
                    got.len(),
                    self.inbox[rank].iter().take(4).collect::<Vec<_>>()
                ));
            }
            self.pump_for(rank)?;
        }
    }

    fn wait(
        &mut self,
        rank: usize,
        what: &str,
        pred: &dyn Fn(&Completion) -> bool,
    ) -> Result<Completion, String> {
        Ok(self.wait_n(rank, 1, what, WAIT_DEADLINE, pred)?.remove(0))
    }

    /// The next message from `from` at `rank`.
    fn recv(&mut self, rank: usize, from: Rank) -> Result<Vec<u8>, String> {
        match self.wait(
            rank,
            &format!("a message from rank {from}"),
            &|c| matches!(c, Completion::Recv { peer, .. } if *peer == from),
        )? {
            Completion::Recv { data, .. } => Ok(data),
            _ => unreachable!("matched a Recv"),
        }
    }

    fn wait_ctx(&mut self, rank: usize, what: &str, ctx: Ctx) -> Result<(), String> {
        self.wait(rank, what, &|c| {
            ctx_of(c) == Some(ctx) && !matches!(c, Completion::Error { .. })
        })
        .map(|_| ())
    }

    fn alloc(&mut self, rank: usize, len: usize, fill: u8) -> Result<LocalSlice, String> {
        let t = &mut self.ts[rank];
        let region = t
            .alloc(len)
            .map_err(|e| format!("rank {rank}: alloc {len}: {e}"))?;
        let s = LocalSlice::new(region, 0, len);
        t.write_region(s, &mut |b| b.fill(fill))
            .map_err(|e| format!("rank {rank}: write_region: {e}"))?;
        Ok(s)
    }

    fn register(&mut self, rank: usize, s: LocalSlice) -> Result<(MrHandle, RemoteKey), String> {
        let t = &mut self.ts[rank];
        let mr = t
            .register(s)
            .map_err(|e| format!("rank {rank}: register {} bytes: {e}", s.len))?;
        Ok((mr, t.remote_key(mr)))
    }

    fn bytes(&self, rank: usize, s: LocalSlice) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.ts[rank]
            .read_region(s, &mut |b| out.extend_from_slice(b))
            .map_err(|e| format!("rank {rank}: read_region: {e}"))?;
        Ok(out)
    }

    fn fill_pattern(&mut self, rank: usize, s: LocalSlice, seed: u32) -> Result<(), String> {
        self.ts[rank]
            .write_region(s, &mut |b| pattern(b, seed))
            .map_err(|e| format!("rank {rank}: write_region: {e}"))
    }
}

fn ctx_of(c: &Completion) -> Option<Ctx> {
    match c {
        Completion::Send { ctx }
        | Completion::Write { ctx }
        | Completion::Read { ctx }
        | Completion::TaggedSend { ctx }
        | Completion::TaggedRecv { ctx, .. } => Some(*ctx),
        Completion::Error { ctx, .. } => *ctx,
        Completion::Recv { .. } => None,
    }
}

/// Deterministic bytes that differ by position and seed.
fn pattern(b: &mut [u8], seed: u32) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add(seed)
            .rotate_left(7) as u8;
    }
}

fn patterned(len: usize, seed: u32) -> Vec<u8> {
    let mut v = vec![0; len];
    pattern(&mut v, seed);
    v
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    if a.len() != b.len() {
        return format!("lengths differ: {} vs {}", a.len(), b.len());
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i}: {:#04x} vs {:#04x}",
            a[i], b[i]
        ),
        None => "equal".into(),
    }
}

/// An operation was refused: either its post returned an error naming the
/// peer, or it must end in an error completion with its context.
fn expect_refused(
    net: &mut Net<'_>,
    rank: usize,
    peer: Rank,
    op: OpKind,
    what: &str,
    posted: Result<(), TransportError>,
    ctx: Ctx,
) -> Result<(), String> {
    match posted {
        Err(e) => {
            let msg = e.to_string();
            if msg.contains(&format!("rank {peer}")) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: refused at post, but the error does not name rank {peer}: {msg}"
                ))
            }
        }
        Ok(()) => {
            let c = net.wait(rank, &format!("the refusal of {what}"), &|c| {
                ctx_of(c) == Some(ctx)
            })?;
            match c {
                Completion::Error { peer: p, op: o, .. } if p == peer && o == op => Ok(()),
                Completion::Error { .. } => Err(format!(
                    "{what}: error completion names the wrong peer or operation: {c:?}"
                )),
                _ => Err(format!("{what}: was performed instead of refused ({c:?})")),
            }
        }
    }
}

/// Ranks, sizes and capability axes are self-consistent.
pub fn identity_and_caps(ts: &mut Endpoints) -> Result<(), String> {
    let n = ts.len() as u32;
    for (r, t) in ts.iter().enumerate() {
        if t.rank() != r as Rank || t.size() != n {
            return Err(format!(
                "endpoint {r} says rank {} of {}",
                t.rank(),
                t.size()
            ));
        }
        let c = t.caps();
        if c.eager_buf_size < 256 {
            return Err(format!(
                "rank {r}: eager buffer of {} bytes cannot hold a protocol header and a key",
                c.eager_buf_size
            ));
        }
        if c.rma_progress == crate::RmaProgress::Offloaded && c.rma == crate::RmaKind::Emulated {
            return Err(format!("rank {r}: emulated RMA cannot be offloaded"));
        }
        if c.native_sync_send && !c.native_tagged {
            return Err(format!(
                "rank {r}: synchronous tagged send without a tagged path"
            ));
        }
        if t.info().name.is_empty() {
            return Err(format!("rank {r}: info() has no transport name"));
        }
        if let Some(fd) = t.wait_fd() {
            if fd < 0 {
                return Err(format!("rank {r}: wait_fd {fd} is not a descriptor"));
            }
        }
    }
    Ok(())
}

/// Allocation is zeroed; local reads and writes round-trip; out-of-range
/// access and freed regions are refused.
pub fn regions(ts: &mut Endpoints) -> Result<(), String> {
    let t = &mut ts[0];
    let len = 10_000;
    let region = t.alloc(len).map_err(|e| format!("alloc: {e}"))?;
    let all = LocalSlice::new(region, 0, len);
    let mut zero = true;
    t.read_region(all, &mut |b| {
        zero = b.len() == len && b.iter().all(|&x| x == 0)
    })
    .map_err(|e| format!("read_region: {e}"))?;
    if !zero {
        return Err("a fresh region is not zeroed (or has the wrong length)".into());
    }
    let part = LocalSlice::new(region, 100, 5000);
    t.write_region(part, &mut |b| pattern(b, 9))
        .map_err(|e| format!("write_region: {e}"))?;
    let mut back = Vec::new();
    t.read_region(all, &mut |b| back.extend_from_slice(b))
        .map_err(|e| format!("read_region: {e}"))?;
    let mut want = vec![0u8; len];
    pattern(&mut want[100..5100], 9);
    if back != want {
        return Err(format!(
            "read_region after write_region: {}",
            first_diff(&back, &want)
        ));
    }
    if t.read_region(LocalSlice::new(region, len - 10, 20), &mut |_| ())
        .is_ok()
    {
        return Err("read_region past the end of a region succeeded".into());
    }
    if t.write_region(LocalSlice::new(region, len, 1), &mut |b| b.fill(1))
        .is_ok()
    {
        return Err("write_region past the end of a region succeeded".into());
    }
    if t.register(LocalSlice::new(region, 5000, len)).is_ok() {
        return Err("registering a range past the end of a region succeeded".into());
    }
    let mr = t.register(part).map_err(|e| format!("register: {e}"))?;
    t.deregister(mr).map_err(|e| format!("deregister: {e}"))?;
    t.free(region).map_err(|e| format!("free: {e}"))?;
    if t.read_region(LocalSlice::new(region, 0, 1), &mut |_| ())
        .is_ok()
    {
        return Err("read_region of a freed region succeeded".into());
    }
    if t.free(region).is_ok() {
        return Err("freeing a region twice succeeded".into());
    }
    Ok(())
}

/// Every rank sends to every other a train of messages up to the largest
/// size; each peer's messages arrive in order and intact, the payload was
/// copied at post time, and each send completes once with its context.
pub fn send_order_and_max_size(ts: &mut Endpoints) -> Result<(), String> {
    const K: u32 = 40;
    let n = ts.len();
    let max = ts
        .iter()
        .map(|t| t.caps().eager_buf_size)
        .min()
        .unwrap_or(0);
    let sizes = [0usize, 1, 57, 4096, max - 8];
    let mut net = Net::new(ts);
    let bufs: Vec<LocalSlice> = (0..n)
        .map(|r| net.alloc(r, max, 0))
        .collect::<Result<_, _>>()?;
    let ctx = |s: usize, d: usize, seq: u32| -> Ctx {
        if s == 0 && d == 1 && seq == 0 {
            u64::MAX
        } else {
            ((s as u64) << 40) | ((d as u64) << 20) | u64::from(seq)
        }
    };
    for seq in 0..K {
        for (s, buf) in bufs.iter().enumerate() {
            for d in (0..n).filter(|&d| d != s) {
                let len = sizes[seq as usize % sizes.len()];
                let seed = (s as u32) << 24 | (d as u32) << 16 | seq;
                let p = buf.sub(0, len);
                net.fill_pattern(s, p, seed)?;
                let mut hdr = seq.to_le_bytes().to_vec();
                hdr.extend_from_slice(&(s as u32).to_le_bytes());
                net.ts[s]
                    .post_send(d as Rank, &hdr, Some(p), ctx(s, d, seq))
                    .map_err(|e| {
                        format!("rank {s}: send {seq} of {} bytes to rank {d}: {e}", len + 8)
                    })?;
                // Overwrite at once: the transport must have copied it.
                net.ts[s]
                    .write_region(p, &mut |b| b.fill(0xEE))
                    .map_err(|e| format!("rank {s}: write_region: {e}"))?;
            }
        }
    }
    for d in 0..n {
        for s in (0..n).filter(|&s| s != d) {
            for seq in 0..K {
                let data = net.recv(d, s as Rank)?;
                let len = sizes[seq as usize % sizes.len()];
                let mut want = seq.to_le_bytes().to_vec();
                want.extend_from_slice(&(s as u32).to_le_bytes());
                want.extend_from_slice(&patterned(len, (s as u32) << 24 | (d as u32) << 16 | seq));
                if data != want {
                    let got_seq = data
                        .get(..4)
                        .map(|b| u32::from_le_bytes(b.try_into().expect("4")));
                    return Err(format!(
                        "rank {d}: message {seq} from rank {s} ({} bytes) wrong (its sequence field says {got_seq:?}): {}",
                        want.len(),
                        first_diff(&data, &want)
                    ));
                }
                net.ts[d].recycle(data);
            }
        }
    }
    for s in 0..n {
        let mut want: Vec<Ctx> = (0..n)
            .filter(|&d| d != s)
            .flat_map(|d| (0..K).map(move |seq| ctx(s, d, seq)))
            .collect();
        let got = net.wait_n(s, want.len(), "send completions", WAIT_DEADLINE, &|c| {
            matches!(c, Completion::Send { .. })
        })?;
        let mut got: Vec<Ctx> = got.iter().filter_map(ctx_of).collect();
        got.sort_unstable();
        want.sort_unstable();
        if got != want {
            return Err(format!(
                "rank {s}: send completions carry the wrong context values"
            ));
        }
    }
    Ok(())
}

/// Empty messages, header-only and payload-only messages arrive as sent.
pub fn zero_length_messages(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let buf = net.alloc(0, 64, 7)?;
    let cases: [(&[u8], Option<LocalSlice>); 4] = [
        (&[], None),
        (b"hello", None),
        (&[], Some(buf.sub(0, 0))),
        (&[], Some(buf.sub(0, 3))),
    ];
    for (i, (h, p)) in cases.iter().enumerate() {
        net.ts[0]
            .post_send(d as Rank, h, *p, 100 + i as Ctx)
            .map_err(|e| format!("rank 0: send case {i}: {e}"))?;
    }
    for (i, (h, p)) in cases.iter().enumerate() {
        let data = net.recv(d, 0)?;
        let mut want = h.to_vec();
        want.extend(std::iter::repeat(7u8).take(p.map_or(0, |p| p.len)));
        if data != want {
            return Err(format!("case {i}: received {data:?}, sent {want:?}"));
        }
        net.wait_ctx(0, &format!("send completion of case {i}"), 100 + i as Ctx)?;
    }
    Ok(())
}

/// A message larger than the eager buffer is refused at post, and the
/// transport stays usable.
pub fn oversize_send_rejected(ts: &mut Endpoints) -> Result<(), String> {
    let max = ts[0].caps().eager_buf_size;
    let mut net = Net::new(ts);
    let d = net.last() as Rank;
    let big = vec![1u8; max + 1];
    if net.ts[0].post_send(d, &big, None, 1).is_ok() {
        return Err(format!(
            "a send of {} bytes over a {max}-byte eager buffer was accepted",
            max + 1
        ));
    }
    let buf = net.alloc(0, 16, 3)?;
    if net.ts[0]
        .post_send(d, &big[..max - 15], Some(buf), 2)
        .is_ok()
    {
        return Err(format!(
            "header plus payload of {} bytes over a {max}-byte eager buffer was accepted",
            max + 1
        ));
    }
    net.ts[0]
        .post_send(d, b"ok", None, 3)
        .map_err(|e| format!("send after a refusal: {e}"))?;
    if net.recv(d as usize, 0)? != b"ok" {
        return Err("the message after a refused send arrived garbled".into());
    }
    Ok(())
}

/// A write's completion means the data is visible at the target: read it
/// there right after, without polling the target again.
pub fn write_visible_on_completion(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let len = 1 << 20;
    let dst = net.alloc(d, len, 0xEE)?;
    let (_, key) = net.register(d, dst)?;
    let src = net.alloc(0, len, 0)?;
    let (smr, _) = net.register(0, src)?;
    for (i, &(off, n)) in [(0usize, 1usize), (100, 1000), (0, len), (4096, 65536 + 3)]
        .iter()
        .enumerate()
    {
        let seed = 50 + i as u32;
        net.fill_pattern(0, src.sub(0, n), seed)?;
        net.ts[0]
            .post_write(
                d as Rank,
                src.sub(0, n),
                smr,
                &key,
                off as u64,
                1000 + i as Ctx,
            )
            .map_err(|e| format!("rank 0: write of {n} bytes to rank {d}: {e}"))?;
        // Poll the initiator alone first: a write that completes before
        // its target (when that needs polling) has placed the data is caught.
        let ctx = 1000 + i as Ctx;
        let alone = Instant::now() + Duration::from_millis(20);
        let mut early = false;
        while !early && Instant::now() < alone {
            let mut v = Vec::new();
            net.ts[0]
                .poll(&mut v)
                .map_err(|e| format!("rank 0: poll failed: {e}"))?;
            early = v
                .iter()
                .any(|c| matches!(c, Completion::Write { ctx: c } if *c == ctx));
            net.inbox[0].extend(
                v.into_iter()
                    .filter(|c| !matches!(c, Completion::Write { ctx: c } if *c == ctx)),
            );
        }
        if !early {
            net.wait_ctx(0, &format!("write {i} ({n} bytes)"), ctx)?;
        }
        let got = net.bytes(d, dst.sub(off, n))?;
        if got != patterned(n, seed) {
            return Err(format!(
                "write {i} of {n} bytes at offset {off} completed but is not visible at rank {d}: {}",
                first_diff(&got, &patterned(n, seed))
            ));
        }
    }
    Ok(())
}

/// A read brings the target's bytes, and only into the local range.
pub fn read_returns_target_bytes(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let len = 1 << 20;
    let remote = net.alloc(d, len, 0)?;
    net.fill_pattern(d, remote, 77)?;
    let (_, key) = net.register(d, remote)?;
    let local = net.alloc(0, len + 2, 0x5A)?;
    let (lmr, _) = net.register(0, local)?;
    let whole = patterned(len, 77);
    for (i, &(off, n)) in [(0usize, 1usize), (333, 4000), (0, len), (8192, 65536 + 5)]
        .iter()
        .enumerate()
    {
        net.ts[0]
            .write_region(local, &mut |b| b.fill(0x5A))
            .map_err(|e| format!("rank 0: write_region: {e}"))?;
        net.ts[0]
            .post_read(
                d as Rank,
                local.sub(1, n),
                lmr,
                &key,
                off as u64,
                2000 + i as Ctx,
            )
            .map_err(|e| format!("rank 0: read of {n} bytes from rank {d}: {e}"))?;
        net.wait_ctx(0, &format!("read {i} ({n} bytes)"), 2000 + i as Ctx)?;
        let got = net.bytes(0, local)?;
        if got[1..1 + n] != whole[off..off + n] {
            return Err(format!(
                "read {i} of {n} bytes at offset {off} from rank {d}: {}",
                first_diff(&got[1..1 + n], &whole[off..off + n])
            ));
        }
        if got[0] != 0x5A || got[1 + n..].iter().any(|&b| b != 0x5A) {
            return Err(format!(
                "read {i} of {n} bytes wrote outside its local buffer"
            ));
        }
    }
    Ok(())
}

/// Shared body of the refusal checks: try each `(label, key, offset, len)`
/// as a write and as a read from rank 0 to the last rank, whose `region`
/// (filled with 0xAB) must stay untouched, as must rank 0's read buffer.
fn refusals(
    net: &mut Net<'_>,
    region: LocalSlice,
    cases: &[(String, RemoteKey, u64, usize)],
) -> Result<(), String> {
    let d = net.last();
    let src = net.alloc(0, 4096, 0xCD)?;
    let (smr, _) = net.register(0, src)?;
    for (i, (label, key, off, n)) in cases.iter().enumerate() {
        let ctx = 3000 + 2 * i as Ctx;
        let posted = net.ts[0].post_write(d as Rank, src.sub(0, *n), smr, key, *off, ctx);
        expect_refused(
            net,
            0,
            d as Rank,
            OpKind::Write,
            &format!("write {label}"),
            posted,
            ctx,
        )?;
        let posted = net.ts[0].post_read(d as Rank, src.sub(0, *n), smr, key, *off, ctx + 1);
        expect_refused(
            net,
            0,
            d as Rank,
            OpKind::Read,
            &format!("read {label}"),
            posted,
            ctx + 1,
        )?;
        // Let the target see anything still in flight before checking it.
        for _ in 0..50 {
            net.pump()?;
        }
        if net.bytes(d, region)?.iter().any(|&b| b != 0xAB) {
            return Err(format!(
                "write {label}: refused, yet rank {d}'s memory changed"
            ));
        }
        if net.bytes(0, src)?.iter().any(|&b| b != 0xCD) {
            return Err(format!(
                "read {label}: refused, yet the local buffer changed"
            ));
        }
    }
    Ok(())
}

/// Accesses reaching outside the registered range are refused, whether
/// the key is honest or claims a longer range.
pub fn out_of_range_rejected(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let region = net.alloc(d, 4096, 0xAB)?;
    let (_, key) = net.register(d, region.sub(1024, 1024))?;
    let mut long = key.clone();
    long.len = 4096;
    let cases = vec![
        (
            "crossing the end (honest key)".to_string(),
            key.clone(),
            1000,
            100,
        ),
        (
            "wholly past the end (honest key)".to_string(),
            key.clone(),
            1024,
            16,
        ),
        (
            "past the end (key claiming 4096 bytes)".to_string(),
            long.clone(),
            1024,
            512,
        ),
        (
            "at an offset that overflows".to_string(),
            long,
            u64::MAX - 5,
            10,
        ),
    ];
    refusals(&mut net, region, &cases)
}

/// A key whose registration was dropped is refused.
pub fn deregistered_key_rejected(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let region = net.alloc(d, 4096, 0xAB)?;
    let (mr, key) = net.register(d, region)?;
    net.ts[d]
        .deregister(mr)
        .map_err(|e| format!("rank {d}: deregister: {e}"))?;
    refusals(
        &mut net,
        region,
        &[("through a deregistered key".to_string(), key, 0, 64)],
    )
}

/// Keys with flipped, missing or extra blob bytes are refused.
pub fn garbled_key_rejected(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let region = net.alloc(d, 4096, 0xAB)?;
    let (_, key) = net.register(d, region)?;
    let mut cases = Vec::new();
    let mut flipped = key.clone();
    flipped.blob.iter_mut().for_each(|b| *b ^= 0xFF);
    if !flipped.blob.is_empty() {
        cases.push((
            "through a key with every blob byte flipped".to_string(),
            flipped,
            0,
            64,
        ));
        let mut short = key.clone();
        short.blob.pop();
        cases.push(("through a truncated key".to_string(), short, 0, 64));
        let mut last = key.clone();
        *last.blob.last_mut().expect("non-empty") ^= 0x01;
        cases.push((
            "through a key with its last bit flipped".to_string(),
            last,
            0,
            64,
        ));
    }
    let mut long = key.clone();
    long.blob.push(0x42);
    cases.push((
        "through a key with an extra blob byte".to_string(),
        long,
        0,
        64,
    ));
    let mut empty = key;
    empty.blob.clear();
    cases.push(("through a key with an empty blob".to_string(), empty, 0, 64));
    refusals(&mut net, region, &cases)
}

/// A thousand sends, writes and reads posted back to back all
/// complete, once each, with their contexts; data and order intact.
pub fn many_outstanding(ts: &mut Endpoints) -> Result<(), String> {
    const N: usize = 1000;
    const W: usize = 64;
    let mut net = Net::new(ts);
    let d = net.last();
    let dst = net.alloc(d, N * W, 0)?;
    let (_, key) = net.register(d, dst)?;
    let src = net.alloc(0, N * W, 0)?;
    net.fill_pattern(0, src, 4242)?;
    let (smr, _) = net.register(0, src)?;
    let rsrc = net.alloc(d, N * W, 0)?;
    net.fill_pattern(d, rsrc, 777)?;
    let (_, rkey) = net.register(d, rsrc)?;
    let rdst = net.alloc(0, N * W, 0)?;
    let (rmr, _) = net.register(0, rdst)?;
    const READ: u64 = 1 << 40;
    for i in 0..N {
        let seq = (i as u32).to_le_bytes();
        net.ts[0]
            .post_send(d as Rank, &seq, None, u64::MAX - i as u64)
            .map_err(|e| format!("rank 0: send {i} of {N} to rank {d}: {e}"))?;
        net.ts[0]
            .post_write(
                d as Rank,
                src.sub(i * W, W),
                smr,
                &key,
                (i * W) as u64,
                i as u64,
            )
            .map_err(|e| format!("rank 0: write {i} of {N} to rank {d}: {e}"))?;
        net.ts[0]
            .post_read(
                d as Rank,
                rdst.sub(i * W, W),
                rmr,
                &rkey,
                (i * W) as u64,
                READ + i as u64,
            )
            .map_err(|e| format!("rank 0: read {i} of {N} from rank {d}: {e}"))?;
    }
    let done = net.wait_n(
        0,
        3 * N,
        "1000 send, 1000 write and 1000 read completions",
        WAIT_DEADLINE,
        &|c| {
            matches!(
                c,
                Completion::Send { .. } | Completion::Write { .. } | Completion::Read { .. }
            )
        },
    )?;
    let mut seen = vec![0u8; 3 * N];
    for c in &done {
        let slot = match c {
            Completion::Write { ctx } if (*ctx as usize) < N => *ctx as usize,
            Completion::Send { ctx } if u64::MAX - ctx < N as u64 => N + (u64::MAX - ctx) as usize,
            Completion::Read { ctx } if ctx.wrapping_sub(READ) < N as u64 => {
                2 * N + (ctx - READ) as usize
            }
            _ => return Err(format!("completion with a context never posted: {c:?}")),
        };
        seen[slot] += 1;
    }
    if seen.iter().any(|&k| k != 1) {
        return Err("some operation completed twice or never".into());
    }
    for i in 0..N {
        let data = net.recv(d, 0)?;
        if data != (i as u32).to_le_bytes() {
            return Err(format!("message {i} arrived as {data:?}: order broken"));
        }
        net.ts[d].recycle(data);
    }
    if net.bytes(d, dst)? != patterned(N * W, 4242) {
        return Err("the 1000 writes' data is not all visible at the target".into());
    }
    if net.bytes(0, rdst)? != patterned(N * W, 777) {
        return Err("the 1000 reads did not bring the target's bytes".into());
    }
    Ok(())
}

/// A key encoded into a message, decoded at the peer, works there.
pub fn key_through_the_wire(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let region = net.alloc(d, 8192, 0)?;
    net.fill_pattern(d, region, 11)?;
    let (_, key) = net.register(d, region)?;
    let mut msg = b"KEY:".to_vec();
    key.encode(&mut msg);
    net.ts[d]
        .post_send(0, &msg, None, 1)
        .map_err(|e| format!("rank {d}: send key: {e}"))?;
    let data = net.recv(0, d as Rank)?;
    let (got, used) = RemoteKey::decode(data.get(4..).unwrap_or(&[]))
        .map_err(|e| format!("decoding the key: {e}"))?;
    if got != key || used != key.encoded_len() || data[..4] != *b"KEY:" {
        return Err("the remote key changed on its way through the wire".into());
    }
    let local = net.alloc(0, 8192, 0)?;
    let (lmr, _) = net.register(0, local)?;
    net.ts[0]
        .post_read(d as Rank, local, lmr, &got, 0, 5)
        .map_err(|e| format!("rank 0: read through the received key: {e}"))?;
    net.wait_ctx(0, "the read through the received key", 5)?;
    if net.bytes(0, local)? != patterned(8192, 11) {
        return Err("a read through the received key brought the wrong bytes".into());
    }
    Ok(())
}

/// `block` returns promptly when a message is waiting.
pub fn block_returns_when_ready(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    net.ts[0]
        .post_send(d as Rank, b"wake", None, 1)
        .map_err(|e| format!("rank 0: send: {e}"))?;
    // Progress the sender only: the receiver must find the message itself.
    let end = Instant::now() + WAIT_DEADLINE;
    let mut out = Vec::new();
    while !out.iter().any(|c| matches!(c, Completion::Send { ctx: 1 })) {
        net.ts[0]
            .poll(&mut out)
            .map_err(|e| format!("rank 0: poll: {e}"))?;
        if Instant::now() > end {
            return Err("rank 0: the send never completed".into());
        }
    }
    loop {
        let t0 = Instant::now();
        net.ts[d]
            .block(Duration::from_secs(10))
            .map_err(|e| format!("rank {d}: block: {e}"))?;
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(format!(
                "rank {d}: block slept {:?} with a message waiting",
                t0.elapsed()
            ));
        }
        net.pump()?;
        if net.inbox[d]
            .iter()
            .any(|c| matches!(c, Completion::Recv { .. }))
        {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!("rank {d}: the message never arrived"));
        }
    }
}

/// The native tagged path works with wildcards, or is refused as
/// Unsupported exactly when the caps say there is none.
pub fn tagged_or_unsupported(ts: &mut Endpoints) -> Result<(), String> {
    let native = ts[0].caps().native_tagged;
    let mut net = Net::new(ts);
    let d = net.last();
    let src = net.alloc(0, 256, 0)?;
    net.fill_pattern(0, src, 5)?;
    let dst = net.alloc(d, 256, 0)?;
    if !native {
        let s = net.ts[0].tsend(d as Rank, 1, src, false, 1);
        let r = net.ts[d].trecv(None, None, dst, 2);
        return match (s, r) {
            (Err(TransportError::Unsupported(_)), Err(TransportError::Unsupported(_))) => Ok(()),
            (s, r) => Err(format!(
                "caps say no native tagged path, yet tsend gave {s:?} and trecv {r:?}"
            )),
        };
    }
    net.ts[d]
        .trecv(Some(0), Some(9), dst.sub(0, 128), 20)
        .map_err(|e| format!("rank {d}: trecv: {e}"))?;
    net.ts[d]
        .trecv(None, None, dst.sub(128, 128), 21)
        .map_err(|e| format!("rank {d}: trecv: {e}"))?;
    net.ts[0]
        .tsend(d as Rank, 8, src.sub(0, 100), false, 10)
        .map_err(|e| format!("rank 0: tsend: {e}"))?;
    net.ts[0]
        .tsend(d as Rank, 9, src.sub(100, 50), false, 11)
        .map_err(|e| format!("rank 0: tsend: {e}"))?;
    let a = net.wait(d, "the tag-9 receive", &|c| {
        matches!(c, Completion::TaggedRecv { ctx: 20, .. })
    })?;
    let b = net.wait(d, "the wildcard receive", &|c| {
        matches!(c, Completion::TaggedRecv { ctx: 21, .. })
    })?;
    match (a, b) {
        (
            Completion::TaggedRecv {
                peer: 0,
                tag: 9,
                len: 50,
                ..
            },
            Completion::TaggedRecv {
                peer: 0,
                tag: 8,
                len: 100,
                ..
            },
        ) => {}
        (a, b) => return Err(format!("tag matching went wrong: {a:?}, {b:?}")),
    }
    net.wait_ctx(0, "tagged send 10", 10)?;
    net.wait_ctx(0, "tagged send 11", 11)?;
    let got = net.bytes(d, dst)?;
    let want = patterned(256, 5);
    if got[..50] != want[100..150] || got[128..228] != want[..100] {
        return Err("tagged data landed wrong".into());
    }
    Ok(())
}

/// Dropping a rank's transport: the others report it within the deadline,
/// naming it, instead of hanging; the remaining peers still talk.
pub fn peer_dropped_reported(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let dead = net.last();
    let region = net.alloc(dead, 4096, 1)?;
    let (_, key) = net.register(dead, region)?;
    let local = net.alloc(0, 4096, 0)?;
    let (lmr, _) = net.register(0, local)?;
    drop(net.ts.pop());
    net.inbox.pop();
    let t0 = Instant::now();
    let posted = net.ts[0].post_read(dead as Rank, local, lmr, &key, 0, 77);
    let ok = match posted {
        Err(e) if e.to_string().contains(&format!("rank {dead}")) => true,
        Err(e) => {
            return Err(format!(
                "read from a dropped peer refused, but not naming rank {dead}: {e}"
            ))
        }
        Ok(()) => false,
    };
    if !ok {
        let c = net.wait_n(
            0,
            1,
            "the failure of a read from a dropped peer",
            PEER_LOSS_DEADLINE,
            &|c| {
                matches!(c, Completion::Error { peer, .. } if *peer as usize == dead)
                    || ctx_of(c) == Some(77)
            },
        )?;
        if !matches!(c[0], Completion::Error { .. }) {
            return Err(format!("a read from a dropped peer completed: {:?}", c[0]));
        }
        if t0.elapsed() > PEER_LOSS_DEADLINE {
            return Err(format!(
                "the dropped peer was reported after {:?}",
                t0.elapsed()
            ));
        }
    }
    // Survivors still talk to each other.
    net.ignore_peer = Some(dead as Rank);
    if net.ts.len() >= 2 {
        let other = net.ts.len() - 1;
        net.ts[0]
            .post_send(other as Rank, b"still here", None, 78)
            .map_err(|e| format!("rank 0: send: {e}"))?;
        if net.recv(other, 0)? != b"still here" {
            return Err("after a peer dropped, the survivors' message arrived garbled".into());
        }
        net.wait_ctx(0, "the survivors' send", 78)?;
    }
    Ok(())
}
