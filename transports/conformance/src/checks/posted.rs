//! How a send left the call: one that says it finished inside it
//! (`Posted::Done` from `post_send` / `tsend`) never completes through
//! `poll`, and one that says it is in flight (`Posted::Queued`) completes
//! exactly once.

use std::collections::HashSet;
use std::time::Duration;

use super::net::{ctx_of, first_diff, min_eager_buf, patterned, wrong_message, Net};
use crate::{Endpoints, WAIT_DEADLINE};
use ovbench_core::{Completion, Ctx, Msg, Posted, Rank, Tag, TagRecv, TagSend};

/// Messages per check: enough to fill an inject queue or a send window, so
/// both answers (inline and in flight) can show up on one transport.
const N: usize = 200;
/// How long rank 0 keeps polling once everything it expects is in, so a
/// stray completion for an inline send is caught rather than missed.
const LINGER: Duration = Duration::from_millis(200);

/// `post_send`: rank 0 sends header-only and header-plus-payload
/// messages, small and up to the eager buffer; all arrive in order and
/// intact, each send that returned `Queued` completes once as `Send`, and
/// none that returned `Done` ever completes. A transport may finish none
/// inside the call.
pub fn send_done_contract(ts: &mut Endpoints) -> Result<(), String> {
    const CTX: Ctx = 0x1_5E4D_0000;
    let max = min_eager_buf(ts);
    let mut net = Net::new(ts);
    let d = net.last();
    let buf = net.alloc(0, max, 0)?;
    let mut sent = Vec::with_capacity(N);
    for i in 0..N {
        let (hdr, plen) = inline_message(i, max);
        let payload = plen.map(|len| buf.sub(0, len));
        if let Some(p) = payload {
            net.fill_pattern(0, p, i as u32)?;
        }
        let ctx = CTX + i as Ctx;
        let done = net.ts[0]
            .post_send(d as Rank, Msg::new(&hdr, payload), ctx)
            .map(|p| matches!(p, Posted::Done(_)))
            .map_err(|e| {
                format!(
                    "rank 0: post_send {i} of {N} ({} bytes) to rank {d}: {e}",
                    hdr.len() + plen.unwrap_or(0)
                )
            })?;
        sent.push((ctx, done));
        // Overwrite at once: inline or not, the payload was copied.
        if let Some(p) = payload {
            net.ts[0]
                .region(p, &mut |b| b.fill(0xEE))
                .map_err(|e| format!("rank 0: region: {e}"))?;
        }
    }
    for (i, &(_, done)) in sent.iter().enumerate() {
        let data = net.recv(d, 0)?;
        let (mut want, plen) = inline_message(i, max);
        want.extend_from_slice(&patterned(plen.unwrap_or(0), i as u32));
        if data != want {
            return Err(format!(
                "rank {d}: message {i} from rank 0 ({} bytes, sent {}) wrong ({})",
                want.len(),
                if done { "Done" } else { "Queued" },
                wrong_message(&data, &want)
            ));
        }
        net.ts[d].recycle(data);
    }
    settle(&mut net, "post_send", &sent, &|c| {
        matches!(c, Completion::Send { .. })
    })
}

/// `tsend`, where the transport offers a tagged protocol: each message
/// reaches the receive posted for its tag with the right envelope and
/// bytes, whether that receive was posted before the send or after;
/// `Queued` sends complete once as `TaggedSend`, `Done` ones never, and a
/// `Done` send's buffer is free at once. With `native_sync_send`, a
/// synchronous send neither finishes nor completes before its receive is
/// posted.
pub fn tsend_done_contract(ts: &mut Endpoints) -> Result<(), String> {
    const SEND: Ctx = 0x2_7A65_0000;
    const RECV: Ctx = 0x3_7A65_0000;
    const TAG: Tag = 7000;
    /// Bytes past each receive buffer's message, which must stay untouched.
    const SLACK: usize = 8;
    let caps = ts[0].info().caps;
    let Some(mut net) = Net::tagged_only(ts) else {
        return Ok(());
    };
    let d = net.last();
    let lens: Vec<usize> = (0..N).map(tagged_len).collect();
    let offs: Vec<usize> = lens
        .iter()
        .scan(0, |o, &l| {
            let at = *o;
            *o += l;
            Some(at)
        })
        .collect();
    let total: usize = lens.iter().sum();
    let src = net.alloc(0, total, 0)?;
    net.fill_pattern(0, src, 31)?;
    let dst = net.alloc(d, total + N * SLACK, 0x5A)?;
    let slot = |i: usize| dst.sub(offs[i] + i * SLACK, lens[i] + SLACK);
    let post_recv = |net: &mut Net<'_>, i: usize| {
        net.tagged(d)?
            .trecv(
                TagRecv::new(Some(0), Some(TAG + i as Tag), slot(i)),
                RECV + i as Ctx,
            )
            .map_err(|e| format!("rank {d}: trecv {i} of {N}: {e}"))
    };
    // Half the receives are posted first; the rest find their messages
    // already there, so an inline send's bytes must have been buffered.
    for i in 0..N / 2 {
        post_recv(&mut net, i)?;
    }
    let mut sent = Vec::with_capacity(N + 2);
    for i in 0..N {
        let s = src.sub(offs[i], lens[i]);
        let ctx = SEND + i as Ctx;
        let done = net
            .tagged(0)?
            .tsend(TagSend::new(d as Rank, TAG + i as Tag, s, false), ctx)
            .map(|p| matches!(p, Posted::Done(_)))
            .map_err(|e| {
                format!(
                    "rank 0: tsend {i} of {N} ({} bytes) to rank {d}: {e}",
                    lens[i]
                )
            })?;
        sent.push((ctx, done));
        // Done means the buffer is free again: reuse it at once.
        if done {
            net.ts[0]
                .region(s, &mut |b| b.fill(0xEE))
                .map_err(|e| format!("rank 0: region: {e}"))?;
        }
    }
    for i in N / 2..N {
        post_recv(&mut net, i)?;
    }
    let got = net.wait_n(
        d,
        N,
        "the tagged receives",
        WAIT_DEADLINE,
        &|c| matches!(c, Completion::TaggedRecv { ctx, .. } if ctx.wrapping_sub(RECV) < N as u64),
    )?;
    let mut seen = [false; N];
    for c in &got {
        let Completion::TaggedRecv {
            ctx,
            peer,
            tag,
            len,
        } = *c
        else {
            unreachable!("matched a TaggedRecv")
        };
        let i = (ctx - RECV) as usize;
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("rank {d}: tagged receive {i} completed twice"));
        }
        if (peer, tag, len) != (0, TAG + i as Tag, lens[i]) {
            return Err(format!(
                "rank {d}: tagged receive {i} (tag {}, {} bytes from rank 0, sent {}) completed as {c:?}",
                TAG + i as Tag,
                lens[i],
                if sent[i].1 { "Done" } else { "Queued" }
            ));
        }
    }
    let want = patterned(total, 31);
    for i in 0..N {
        let mut w = want[offs[i]..offs[i] + lens[i]].to_vec();
        w.extend_from_slice(&[0x5A; SLACK]);
        let got = net.bytes(d, slot(i))?;
        if got != w {
            return Err(format!(
                "rank {d}: tagged message {i} ({} bytes, sent {}) landed wrong (with {SLACK} bytes past it that must stay untouched): {}",
                lens[i],
                if sent[i].1 { "Done" } else { "Queued" },
                first_diff(&got, &w)
            ));
        }
    }
    if caps.native_sync_send {
        sync_sends(&mut net, &mut sent)?;
    }
    settle(&mut net, "tsend", &sent, &|c| {
        matches!(c, Completion::TaggedSend { .. })
    })
}

/// Two synchronous `tsend`s. The first goes before its receive is
/// posted: it cannot be matched, so it must neither return `Done` nor
/// complete until the receive is there. The second finds its receive
/// posted and may finish either way. Pushes both onto `sent`.
fn sync_sends(net: &mut Net<'_>, sent: &mut Vec<(Ctx, bool)>) -> Result<(), String> {
    const SYNC: Ctx = 0x4_5E4C_0000;
    const RECV: Ctx = 0x5_5E4C_0000;
    const TAG: Tag = 9000;
    const LEN: usize = 48;
    let d = net.last();
    let src = net.alloc(0, 2 * LEN, 0)?;
    net.fill_pattern(0, src, 91)?;
    let dst = net.alloc(d, 2 * LEN, 0)?;
    let done = net
        .tagged(0)?
        .tsend(TagSend::new(d as Rank, TAG, src.sub(0, LEN), true), SYNC)
        .map_err(|e| format!("rank 0: synchronous tsend to rank {d}: {e}"))?;
    if let Posted::Done(_) = done {
        return Err(format!(
            "rank 0: a synchronous tsend returned {done:?} (finished inside the call) before rank {d} had posted a matching receive"
        ));
    }
    sent.push((SYNC, false));
    net.linger(LINGER)?;
    if let Some(c) = net.inbox[0].iter().find(|c| ctx_of(c) == Some(SYNC)) {
        return Err(format!(
            "rank 0: a synchronous tsend completed ({c:?}) before rank {d} had posted a matching receive"
        ));
    }
    for k in 0..2 {
        let tag = TAG + k as Tag;
        net.tagged(d)?
            .trecv(
                TagRecv::new(Some(0), Some(tag), dst.sub(k * LEN, LEN)),
                RECV + k as Ctx,
            )
            .map_err(|e| format!("rank {d}: trecv for synchronous send {k}: {e}"))?;
        if k == 1 {
            let ctx = SYNC + 1;
            let done = net
                .tagged(0)?
                .tsend(TagSend::new(d as Rank, tag, src.sub(LEN, LEN), true), ctx)
                .map(|p| matches!(p, Posted::Done(_)))
                .map_err(|e| {
                    format!("rank 0: synchronous tsend to rank {d}, receive posted: {e}")
                })?;
            sent.push((ctx, done));
        }
        let c = net.wait(
            d,
            &format!("the receive matching synchronous send {k}"),
            &|c| matches!(c, Completion::TaggedRecv { ctx, .. } if *ctx == RECV + k as Ctx),
        )?;
        if !matches!(c, Completion::TaggedRecv { peer: 0, tag: t, len: LEN, .. } if t == tag) {
            return Err(format!(
                "rank {d}: synchronous send {k} (tag {tag}, {LEN} bytes from rank 0) received as {c:?}"
            ));
        }
    }
    let got = net.bytes(d, dst)?;
    let want = patterned(2 * LEN, 91);
    if got != want {
        return Err(format!(
            "rank {d}: synchronous sends landed wrong: {}",
            first_diff(&got, &want)
        ));
    }
    Ok(())
}

/// Rank 0's side of the contract once the last rank has every message: it
/// sends rank 0 a confirmation, every send in `sent` that said it was in
/// flight (`Queued`) completes exactly once (`is_send`), and after a
/// linger no completion shows up for one that returned `Done`, nor a
/// second one for any. Error messages say how many returned `Done`.
fn settle(
    net: &mut Net<'_>,
    what: &str,
    sent: &[(Ctx, bool)],
    is_send: &dyn Fn(&Completion) -> bool,
) -> Result<(), String> {
    const ACK: Ctx = 0x6_ACC0_0000;
    let d = net.last();
    let inline: HashSet<Ctx> = sent.iter().filter(|s| s.1).map(|s| s.0).collect();
    let in_flight: HashSet<Ctx> = sent.iter().filter(|s| !s.1).map(|s| s.0).collect();
    net.send(d, 0, b"all received", None, ACK)
        .map_err(|e| format!("rank {d}: send of the confirmation to rank 0: {e}"))?;
    if net.recv(0, d as Rank)? != b"all received" {
        return Err(format!(
            "rank 0: the confirmation from rank {d} arrived garbled"
        ));
    }
    let got = net.wait_n(
        0,
        in_flight.len(),
        &format!(
            "completions of the {} {what} calls that returned Queued ({} returned Done)",
            in_flight.len(),
            inline.len()
        ),
        WAIT_DEADLINE,
        &|c| is_send(c) && ctx_of(c).is_some_and(|x| in_flight.contains(&x)),
    )?;
    let mut once = HashSet::new();
    for c in &got {
        let x = ctx_of(c).expect("matched a context");
        if !once.insert(x) {
            return Err(format!(
                "rank 0: {what} context {x:#x} (returned Queued) completed twice: {c:?}"
            ));
        }
    }
    net.linger(LINGER)?;
    for c in &net.inbox[0] {
        let x = ctx_of(c);
        let why = match x {
            Some(x) if inline.contains(&x) => {
                "returned Done (finished inside the call), yet completed through poll"
            }
            Some(x) if in_flight.contains(&x) => {
                "returned Queued and completed once, yet completed again"
            }
            _ if matches!(c, Completion::Error { .. }) => "unexpected error",
            _ if is_send(c) => "completion with a context never posted",
            _ => continue,
        };
        let x = x.map_or_else(|| "none".into(), |x| format!("{x:#x}"));
        return Err(format!(
            "rank 0: {what} context {x}: {why}: {c:?} ({} of {} sends returned Done)",
            inline.len(),
            sent.len()
        ));
    }
    Ok(())
}

/// Message `i` of [`send_done_contract`]: its header (the sequence
/// number, some with patterned bytes after it) and its payload's length,
/// if it has one (an empty payload too, and now and then one that fills
/// the eager buffer, past any inject or short-message limit).
fn inline_message(i: usize, max: usize) -> (Vec<u8>, Option<usize>) {
    let mut hdr = (i as u32).to_le_bytes().to_vec();
    let plen = match i % 5 {
        0 => None,
        1 => {
            hdr.extend_from_slice(&patterned(i % 61, !(i as u32)));
            None
        }
        2 => Some(i % 97),
        3 => Some(0),
        _ if i % 20 == 4 => Some(max - hdr.len()),
        _ => Some(150 + i % 50),
    };
    (hdr, plen)
}

/// Length of tagged message `i`: mostly small (zero-length included), each
/// 25th past any inject or short-message limit.
fn tagged_len(i: usize) -> usize {
    if i % 25 == 24 {
        32 * 1024
    } else {
        [1, 8, 0, 64, 200, 33][i % 6]
    }
}
