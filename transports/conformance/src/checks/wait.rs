//! `trecv_wait`: a tagged receive completed before returning. Where the
//! transport offers a tagged protocol, it receives with the envelope
//! `trecv` would report, times out, refuses a message longer than its
//! buffer with an error, and never queues a completion. (A receive that
//! timed out may stay posted where the transport posts and polls —
//! `trecv_wait_polling` — since its caller ends the run: the timed-out
//! waits use a tag no message carries.)

use std::time::{Duration, Instant};

use super::net::{ctx_of, first_diff, patterned, Net};
use crate::Endpoints;
use crate::WAIT_DEADLINE;
use ovbench_core::{Ctx, LocalSlice, Rank, Tag, TagRecv, TagSend, Waited};

/// The timeout of the first wait, with no sender.
const PROBE: Duration = Duration::from_millis(1);
/// The timeout of the wait that must time out.
const SHORT: Duration = Duration::from_millis(50);
/// Longest a `trecv_wait` that must time out may take to say so.
const TIMED_OUT_BOUND: Duration = Duration::from_secs(5);
/// How long everyone is polled when looking for a stray completion.
const LINGER: Duration = Duration::from_millis(200);
/// How long the receiver is polled after each `Done` (the end's
/// [`LINGER`] catches anything slower).
const BRIEF: Duration = Duration::from_millis(20);
/// Polls of the sender between posting a send and the receiver's wait,
/// so the message is on its way (the wait drives only the receiver).
const SENDER_POLLS: usize = 16;
/// Longest the sender is then polled while its send has not ended.
const SENDER_LINGER: Duration = Duration::from_millis(200);
/// Bytes past each receive's message, which must stay untouched.
const SLACK: usize = 8;
/// What every receive buffer holds before its receive.
const FILL: u8 = 0x5A;

/// `trecv_wait`, with rank 0 sending small tagged messages (eager on every
/// library) to the last rank. Both endpoints live on this one thread, so
/// each send is posted (and rank 0 polled a few times) before the last
/// rank waits: the wait must then finish by driving the receiver alone.
///
/// * A transport without a tagged protocol passes at once. Without a
///   sender, a 1 ms wait answers `TimedOut`; so does a 50 ms wait, after
///   at least its timeout and within 5 s.
/// * Rank 0 then sends small messages, each waited for: a specific source
///   and tag, a wildcard tag, a wildcard source and both wildcards (a
///   zero-length message) each end in `Done` with
///   the envelope `Completion::TaggedRecv` would carry, the bytes in the
///   buffer and the bytes past the message untouched.
/// * (A message longer than the buffer: [`trecv_wait_truncation`].)
/// * No completion is ever queued on the receiver, and each send completes
///   once on rank 0.
pub fn trecv_wait_contract(ts: &mut Endpoints) -> Result<(), String> {
    const SEND: Ctx = 0x4_3A17_0000;
    const TAG: Tag = 9100;
    /// The timed-out waits' tag, which no message carries.
    const STALE: Tag = 9199;
    let Some(mut net) = Net::tagged_only(ts) else {
        return Ok(());
    };
    let d = net.last();
    let probe_buf = net.alloc(d, 64 + SLACK, FILL)?;
    let (probe, took) = timed_wait(&mut net, d, Some(0), Some(STALE), probe_buf, PROBE)?;
    match probe {
        Waited::TimedOut => check_timed_out(took, PROBE)?,
        Waited::Done { .. } => {
            return Err(format!(
                "rank {d}: trecv_wait(Some(0), Some({STALE}), {PROBE:?}) with no message sent gave {probe:?}"
            ))
        }
    }
    no_completions(&mut net, d, "a trecv_wait that timed out", LINGER)?;
    untouched(
        &mut net,
        d,
        probe_buf,
        0,
        "the timed-out trecv_wait's buffer",
    )?;

    // (a) A longer wait with no sender times out too.
    let withdrawn = net.alloc(d, 64 + SLACK, FILL)?;
    let (w, took) = timed_wait(&mut net, d, Some(0), Some(STALE), withdrawn, SHORT)?;
    if w != Waited::TimedOut {
        return Err(format!(
            "rank {d}: trecv_wait(Some(0), Some({STALE}), {SHORT:?}) with no message sent gave {w:?} (expected TimedOut)"
        ));
    }
    check_timed_out(took, SHORT)?;
    no_completions(&mut net, d, "a trecv_wait that timed out", LINGER)?;

    // (b) Messages: (selector, tag, length).
    let msgs: [(Option<Rank>, Option<Tag>, Tag, usize); 5] = [
        (Some(0), Some(TAG), TAG, 40),
        (Some(0), None, TAG + 1, 17),
        (None, Some(TAG + 2), TAG + 2, 64),
        (None, None, TAG + 3, 0),
        (Some(0), Some(TAG + 4), TAG + 4, 1),
    ];
    let src = net.alloc(0, 64, 0)?;
    let mut seq = 0;
    for (i, &(s, t, tag, len)) in msgs.iter().enumerate() {
        let seed = 100 + i as u32;
        let what = format!(
            "trecv_wait({s:?}, {t:?}) for message {i} ({len} bytes, tag {tag} from rank 0)"
        );
        send(&mut net, src.sub(0, len), tag, seed, SEND + seq)?;
        seq += 1;
        let dst = net.alloc(d, 64 + SLACK, FILL)?;
        let buf = dst.sub(0, len + SLACK);
        let (w, _) = timed_wait(&mut net, d, s, t, buf, WAIT_DEADLINE)?;
        let want = Waited::Done { peer: 0, tag, len };
        if w != want {
            return Err(format!("rank {d}: {what} gave {w:?}, expected {want:?}"));
        }
        let got = net.bytes(d, buf.sub(0, len))?;
        let sent = patterned(len, seed);
        if got != sent {
            return Err(format!(
                "rank {d}: {what}: the bytes received differ from those sent: {}",
                first_diff(&got, &sent)
            ));
        }
        untouched(
            &mut net,
            d,
            dst,
            len,
            &format!("{what}: the bytes past the message"),
        )?;
        no_completions(&mut net, d, &format!("{what}, which returned Done"), BRIEF)?;
        net.wait_ctx(0, &format!("tagged send of message {i}"), SEND + seq - 1)?;
    }
    untouched(
        &mut net,
        d,
        withdrawn,
        0,
        "the buffer of the trecv_wait that timed out (no message carries its tag)",
    )?;

    nothing_left(&mut net)
}

/// A message longer than the `trecv_wait`'s buffer is an `Err` naming the
/// sender (rank 0), writes nothing past the buffer, and the transport
/// keeps working: the next message arrives whole. Its own check, so a
/// lane whose provider cannot survive a truncation lists it as skipped.
pub fn trecv_wait_truncation(ts: &mut Endpoints) -> Result<(), String> {
    const SEND: Ctx = 0x4_3A18_0000;
    const TAG: Tag = 9100;
    let Some(mut net) = Net::tagged_only(ts) else {
        return Ok(());
    };
    let d = net.last();
    let src = net.alloc(0, 64, 0)?;
    let mut seq = 0;
    // 64 bytes into a 16-byte buffer.
    let tag = TAG + 10;
    send(&mut net, src, tag, 200, SEND + seq)?;
    let trunc_ctx = SEND + seq;
    seq += 1;
    let dst = net.alloc(d, 64 + SLACK, FILL)?;
    let what = format!("trecv_wait(Some(0), Some({tag})) of a 64-byte message into 16 bytes");
    match net.tagged(d)?.trecv_wait(
        TagRecv::new(Some(0), Some(tag), dst.sub(0, 16)),
        WAIT_DEADLINE,
    ) {
        Err(e) if e.to_string().contains("rank 0") => {}
        Err(e) => {
            return Err(format!(
                "rank {d}: {what}: refused, but the error does not name rank 0: {e}"
            ))
        }
        Ok(w) => {
            return Err(format!(
                "rank {d}: {what} gave {w:?} instead of an error (truncation)"
            ))
        }
    }
    let past = net.bytes(d, dst.sub(16, 64 + SLACK - 16))?;
    if let Some(i) = past.iter().position(|&b| b != FILL) {
        return Err(format!(
            "rank {d}: {what}: byte {} (past the 16-byte buffer) was written ({:#04x})",
            16 + i,
            past[i]
        ));
    }
    no_completions(&mut net, d, &format!("{what}, which failed"), LINGER)?;
    // The sender may see the truncation as an error completion; either
    // way its send completes once.
    net.wait(0, "the truncated message's tagged send", &|c| {
        ctx_of(c) == Some(trunc_ctx)
    })?;
    // Still usable after the truncation.
    let tag = TAG + 11;
    send(&mut net, src.sub(0, 24), tag, 201, SEND + seq)?;
    seq += 1;
    // In one process only the waiting rank progresses during the wait: let
    // the sender finish first (a provider may hold the send until then).
    net.wait_ctx(0, "the tagged send after the truncation", SEND + seq - 1)?;
    let dst = net.alloc(d, 64 + SLACK, FILL)?;
    let w = timed_wait(&mut net, d, Some(0), Some(tag), dst, WAIT_DEADLINE)?;
    let want = Waited::Done {
        peer: 0,
        tag,
        len: 24,
    };
    if w.0 != want {
        return Err(format!(
            "rank {d}: trecv_wait after a truncated receive gave {:?}, expected {want:?}",
            w.0
        ));
    }
    if net.bytes(d, dst.sub(0, 24))? != patterned(24, 201) {
        return Err(format!(
            "rank {d}: the message received after a truncated receive is garbled"
        ));
    }

    nothing_left(&mut net)
}

/// No completion left anywhere once every wait returned and every send
/// completed.
fn nothing_left(net: &mut Net<'_>) -> Result<(), String> {
    net.linger(LINGER)?;
    for (r, inbox) in net.inbox.iter().enumerate() {
        if let Some(c) = inbox.front() {
            return Err(format!(
                "rank {r}: unexpected completion after every trecv_wait returned and every send completed: {c:?} ({} queued)",
                inbox.len()
            ));
        }
    }
    Ok(())
}

/// Post a tagged send of `s` (filled with `seed`'s pattern) from rank 0 to
/// the last rank, and poll rank 0 a few times so it is on its way.
fn send(net: &mut Net<'_>, s: LocalSlice, tag: Tag, seed: u32, ctx: Ctx) -> Result<(), String> {
    let d = net.last() as Rank;
    net.fill_pattern(0, s, seed)?;
    net.tsend(0, TagSend::new(d, tag, s, false), ctx)?;
    for _ in 0..SENDER_POLLS {
        poll_one(net, 0)?;
    }
    // A sender whose library moves bytes only when polled (libfabric's
    // tcp) gets polled until its send has ended, for a while at most.
    let end = Instant::now() + SENDER_LINGER;
    while Instant::now() < end && !net.inbox[0].iter().any(|c| ctx_of(c) == Some(ctx)) {
        poll_one(net, 0)?;
    }
    Ok(())
}

/// Poll one endpoint, keeping what it reports.
fn poll_one(net: &mut Net<'_>, r: usize) -> Result<(), String> {
    let mut v = Vec::new();
    net.ts[r]
        .poll(&mut v, None)
        .map_err(|e| format!("rank {r}: poll failed: {e}"))?;
    net.inbox[r].extend(v);
    Ok(())
}

/// `trecv_wait` on `rank`, and how long it took.
fn timed_wait(
    net: &mut Net<'_>,
    rank: usize,
    src: Option<Rank>,
    tag: Option<Tag>,
    dst: LocalSlice,
    timeout: Duration,
) -> Result<(Waited, Duration), String> {
    let t0 = Instant::now();
    let w = net
        .tagged(rank)?
        .trecv_wait(TagRecv::new(src, tag, dst), timeout)
        .map_err(|e| {
            format!(
                "rank {rank}: trecv_wait({src:?}, {tag:?}, {} bytes, {timeout:?}): {e}",
                dst.len
            )
        })?;
    Ok((w, t0.elapsed()))
}

fn check_timed_out(took: Duration, timeout: Duration) -> Result<(), String> {
    if took < timeout {
        return Err(format!(
            "trecv_wait with a {timeout:?} timeout answered TimedOut after {took:?}, before its timeout"
        ));
    }
    if took > TIMED_OUT_BOUND {
        return Err(format!(
            "trecv_wait with a {timeout:?} timeout took {took:?} to answer TimedOut (bound {TIMED_OUT_BOUND:?})"
        ));
    }
    Ok(())
}

/// Poll `rank` (and only it) for `window`: nothing may turn up.
fn no_completions(
    net: &mut Net<'_>,
    rank: usize,
    after: &str,
    window: Duration,
) -> Result<(), String> {
    let end = Instant::now() + window;
    while Instant::now() < end {
        poll_one(net, rank)?;
        if let Some(c) = net.inbox[rank].front() {
            return Err(format!(
                "rank {rank}: a completion was queued after {after}: {c:?}"
            ));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// `s[from..]` on `rank` still holds [`FILL`].
fn untouched(
    net: &mut Net<'_>,
    rank: usize,
    s: LocalSlice,
    from: usize,
    what: &str,
) -> Result<(), String> {
    let b = net.bytes(rank, s)?;
    match b[from..].iter().position(|&x| x != FILL) {
        None => Ok(()),
        Some(i) => Err(format!(
            "rank {rank}: {what}: byte {} of {} was written ({:#04x})",
            from + i,
            b.len(),
            b[from + i]
        )),
    }
}
