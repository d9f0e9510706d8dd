//! One-sided checks: writes and reads land where and when they should,
//! keys travel, and every illegitimate access is refused.

use std::time::{Duration, Instant};

use super::net::{expect_refused, first_diff, patterned, Net};
use crate::Endpoints;
use ovbench_core::{Completion, Ctx, LocalSlice, OpKind, Rank, RemoteKey, RmaOp};

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
        let ctx = 1000 + i as Ctx;
        net.rma(RmaOp::write(src.sub(0, n), smr, &key, off as u64), ctx)?;
        // Poll the initiator alone first: a write that completes before
        // its target (when that needs polling) has placed the data is caught.
        let alone = Instant::now() + Duration::from_millis(20);
        let mut early = false;
        while !early && Instant::now() < alone {
            let mut v = Vec::new();
            net.ts[0]
                .poll(&mut v, None)
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
            .region(local, &mut |b| b.fill(0x5A))
            .map_err(|e| format!("rank 0: region: {e}"))?;
        let ctx = 2000 + i as Ctx;
        net.rma(RmaOp::read(local.sub(1, n), lmr, &key, off as u64), ctx)?;
        net.wait_ctx(0, &format!("read {i} ({n} bytes)"), ctx)?;
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
        let posted =
            net.ts[0].post_rma(d as Rank, RmaOp::write(src.sub(0, *n), smr, key, *off), ctx);
        expect_refused(
            net,
            0,
            d as Rank,
            OpKind::Write,
            &format!("write {label}"),
            posted,
            ctx,
        )?;
        let posted = net.ts[0].post_rma(
            d as Rank,
            RmaOp::read(src.sub(0, *n), smr, key, *off),
            ctx + 1,
        );
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

/// A key encoded into a message, decoded at the peer, works there.
pub fn key_through_the_wire(ts: &mut Endpoints) -> Result<(), String> {
    let mut net = Net::new(ts);
    let d = net.last();
    let region = net.alloc(d, 8192, 0)?;
    net.fill_pattern(d, region, 11)?;
    let (_, key) = net.register(d, region)?;
    let mut msg = b"KEY:".to_vec();
    key.encode(&mut msg);
    net.send(d, 0, &msg, None, 1)
        .map_err(|e| format!("rank {d}: send key: {e}"))?;
    let data = net.recv(0, d as Rank)?;
    let (got, used) = RemoteKey::decode(data.get(4..).unwrap_or(&[]))
        .map_err(|e| format!("decoding the key: {e}"))?;
    if got != key || used != key.encoded_len() || data[..4] != *b"KEY:" {
        return Err("the remote key changed on its way through the wire".into());
    }
    let local = net.alloc(0, 8192, 0)?;
    let (lmr, _) = net.register(0, local)?;
    net.rma(RmaOp::read(local, lmr, &got, 0), 5)?;
    net.wait_ctx(0, "the read through the received key", 5)?;
    if net.bytes(0, local)? != patterned(8192, 11) {
        return Err("a read through the received key brought the wrong bytes".into());
    }
    Ok(())
}
