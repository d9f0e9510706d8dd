//! Two-sided checks: ordered, intact, zero-length, oversize and tagged
//! messages.

use super::net::{ctx_of, min_eager_buf, patterned, wrong_message, Net};
use crate::{Endpoints, WAIT_DEADLINE};
use ovbench_core::{Completion, Ctx, LocalSlice, Msg, Rank, TagRecv, TagSend};

/// Every rank sends to every other a train of messages up to the largest
/// size; each peer's messages arrive in order and intact, the payload was
/// copied at post time, and each send completes once with its context.
pub fn send_order_and_max_size(ts: &mut Endpoints) -> Result<(), String> {
    const K: u32 = 40;
    let n = ts.len();
    let max = min_eager_buf(ts);
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
                net.send(s, d as Rank, &hdr, Some(p), ctx(s, d, seq))
                    .map_err(|e| {
                        format!("rank {s}: send {seq} of {} bytes to rank {d}: {e}", len + 8)
                    })?;
                // Overwrite at once: the transport must have copied it.
                net.ts[s]
                    .region(p, &mut |b| b.fill(0xEE))
                    .map_err(|e| format!("rank {s}: region: {e}"))?;
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
                    return Err(format!(
                        "rank {d}: message {seq} from rank {s} ({} bytes) wrong ({})",
                        want.len(),
                        wrong_message(&data, &want)
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
        net.send(0, d as Rank, h, *p, 100 + i as Ctx)
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
    let max = ts[0].info().caps.eager_buf_size;
    let mut net = Net::new(ts);
    let d = net.last() as Rank;
    let big = vec![1u8; max + 1];
    if net.ts[0].post_send(d, Msg::new(&big, None), 1).is_ok() {
        return Err(format!(
            "a send of {} bytes over a {max}-byte eager buffer was accepted",
            max + 1
        ));
    }
    let buf = net.alloc(0, 16, 3)?;
    if net.ts[0]
        .post_send(d, Msg::new(&big[..max - 15], Some(buf)), 2)
        .is_ok()
    {
        return Err(format!(
            "header plus payload of {} bytes over a {max}-byte eager buffer was accepted",
            max + 1
        ));
    }
    net.send(0, d, b"ok", None, 3)
        .map_err(|e| format!("send after a refusal: {e}"))?;
    if net.recv(d as usize, 0)? != b"ok" {
        return Err("the message after a refused send arrived garbled".into());
    }
    Ok(())
}

/// Where the transport offers the library's tagged protocol
/// ([`Transport::tagged`](ovbench_core::Transport::tagged)), it matches
/// by source and tag, with wildcards; each send ends once.
pub fn tagged_if_offered(ts: &mut Endpoints) -> Result<(), String> {
    let d = ts.len() - 1;
    let says = |offers: bool| if offers { "offers" } else { "lacks" };
    match (ts[0].tagged().is_some(), ts[d].tagged().is_some()) {
        (false, false) => return Ok(()),
        (true, true) => {}
        (a, b) => {
            let (a, b) = (says(a), says(b));
            return Err(format!(
                "rank 0 {a} a tagged protocol and rank {d} {b}: every rank of one transport must agree"
            ));
        }
    }
    let mut net = Net::new(ts);
    let src = net.alloc(0, 256, 0)?;
    net.fill_pattern(0, src, 5)?;
    let dst = net.alloc(d, 256, 0)?;
    net.tagged(d)?
        .trecv(TagRecv::new(Some(0), Some(9), dst.sub(0, 128)), 20)
        .map_err(|e| format!("rank {d}: trecv: {e}"))?;
    net.tagged(d)?
        .trecv(TagRecv::new(None, None, dst.sub(128, 128)), 21)
        .map_err(|e| format!("rank {d}: trecv: {e}"))?;
    net.tsend(0, TagSend::new(d as Rank, 8, src.sub(0, 100), false), 10)?;
    net.tsend(0, TagSend::new(d as Rank, 9, src.sub(100, 50), false), 11)?;
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
