//! Progress checks: many operations in flight, blocking waits, and a
//! peer that goes away.

use std::time::{Duration, Instant};

use super::net::{ctx_of, patterned, Net};
use crate::{Endpoints, PEER_LOSS_DEADLINE, WAIT_DEADLINE};
use ovbench_core::{Completion, Idle, Msg, Posted, Rank, RmaOp};

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
        net.send(0, d as Rank, &seq, None, u64::MAX - i as u64)
            .map_err(|e| format!("rank 0: send {i} of {N} to rank {d}: {e}"))?;
        let at = (i * W) as u64;
        net.rma(RmaOp::write(src.sub(i * W, W), smr, &key, at), i as u64)?;
        net.rma(
            RmaOp::read(rdst.sub(i * W, W), rmr, &rkey, at),
            READ + i as u64,
        )?;
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

/// `idle(Idle::Block)` returns promptly when a message is waiting.
pub fn block_returns_when_ready(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let posted = net.ts[0]
        .post_send(d as Rank, Msg::new(b"wake", None), 1)
        .map_err(|e| format!("rank 0: send: {e}"))?;
    // Progress the sender only: the receiver must find the message itself.
    let end = Instant::now() + WAIT_DEADLINE;
    let mut out = Vec::new();
    if let Posted::Done(_) = posted {
        out.push(Completion::Send { ctx: 1 });
    }
    while !out.iter().any(|c| matches!(c, Completion::Send { ctx: 1 })) {
        net.ts[0]
            .poll(&mut out, None)
            .map_err(|e| format!("rank 0: poll: {e}"))?;
        if Instant::now() > end {
            return Err("rank 0: the send never completed".into());
        }
    }
    loop {
        let t0 = Instant::now();
        net.ts[d]
            .idle(Idle::Block(Duration::from_secs(10)))
            .map_err(|e| format!("rank {d}: idle(Block): {e}"))?;
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(format!(
                "rank {d}: idle(Block) slept {:?} with a message waiting",
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
    let posted = net.ts[0].post_rma(dead as Rank, RmaOp::read(local, lmr, &key, 0), 77);
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
        net.send(0, other as Rank, b"still here", None, 78)
            .map_err(|e| format!("rank 0: send: {e}"))?;
        if net.recv(other, 0)? != b"still here" {
            return Err("after a peer dropped, the survivors' message arrived garbled".into());
        }
        net.wait_ctx(0, "the survivors' send", 78)?;
    }
    Ok(())
}
