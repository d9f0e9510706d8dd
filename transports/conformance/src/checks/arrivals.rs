//! The hand-over check: messages taken through `poll` with `arrivals` (handed to
//! the caller, or queued as `Recv`) arrive once each, in order and intact,
//! placements land where asked, and a refusal or a bad placement is an
//! error of that poll that loses nothing after it.

use std::time::Instant;

use super::net::{first_diff, min_eager_buf, patterned, Net};
use crate::WAIT_DEADLINE;
use ovbench_core::{Arrivals, Completion, LocalSlice, Msg, Placement, Rank, TransportError};

use crate::Endpoints;

/// Messages sent: enough to overrun any batch a transport hands over at once.
const N: usize = 240;
/// The message the check's taker refuses.
const REFUSE_AT: usize = 101;
/// The message whose placement lies outside its region.
const OUT_OF_RANGE_AT: usize = 157;
/// What the refusal says, to recognise it in the poll's error.
const REFUSAL: &str = "refused by the arrivals check";

/// What the receiving rank's taker saw, in order.
struct Taker {
    dst: LocalSlice,
    slot: usize,
    got: Vec<(usize, Vec<u8>)>,
    placed: Vec<usize>,
    /// Messages handed over whose poll must fail (refused, out of range).
    must_fail: Vec<usize>,
}

impl Arrivals for Taker {
    fn arrived(&mut self, peer: Rank, data: &[u8]) -> Result<Option<Placement>, TransportError> {
        if peer != 0 {
            return Err(TransportError::Invalid(format!(
                "a message from rank {peer}, only rank 0 sends"
            )));
        }
        let i = seq_of(data);
        self.got.push((i, data.to_vec()));
        if i == REFUSE_AT || i == OUT_OF_RANGE_AT {
            self.must_fail.push(i);
        }
        if i == REFUSE_AT {
            return Err(TransportError::Invalid(REFUSAL.into()));
        }
        let body = data.len().saturating_sub(4);
        if i % 3 != 1 || body == 0 {
            return Ok(None);
        }
        let at = if i == OUT_OF_RANGE_AT {
            // One slot past the region's end.
            self.dst.len
        } else {
            self.placed.push(i);
            i * self.slot
        };
        Ok(Some(Placement {
            dst: LocalSlice::new(self.dst.region, self.dst.offset + at, body),
            src_start: 4,
        }))
    }
}

/// `poll` with `arrivals`, mixed with plain `poll` calls: every message from rank
/// 0 reaches the last rank exactly once, handed over or queued, in posting
/// order across both; the call's count is what it handed over plus what
/// it appended; a placement's bytes land in the slice asked for; a taker's
/// refusal and a placement outside the region come back as that call's
/// `Err`, and the messages after them still arrive. A transport may hand
/// none over.
pub fn arrivals_contract(ts: &mut Endpoints) -> Result<(), String> {
    let max = min_eager_buf(ts);
    let mut net = Net::new(ts);
    let d = net.last();
    let src = net.alloc(0, max, 0)?;
    let dst = net.alloc(d, N * max, 0x5A)?;
    let mut want = Vec::with_capacity(N);
    for i in 0..N {
        let (hdr, plen) = message(i, max);
        let payload = plen.map(|len| src.sub(0, len));
        let mut w = hdr.clone();
        if let Some(p) = payload {
            net.fill_pattern(0, p, i as u32)?;
            w.extend_from_slice(&patterned(p.len, i as u32));
        }
        want.push(w);
        net.ts[0]
            .post_send(d as Rank, Msg::new(&hdr, payload), i as u64)
            .map_err(|e| format!("rank 0: post_send {i} of {N}: {e}"))?;
        // Keep the sender's queue moving; the receiver polls below.
        let mut v = Vec::new();
        net.ts[0]
            .poll(&mut v, None)
            .map_err(|e| format!("rank 0: poll: {e}"))?;
    }
    let mut taker = Taker {
        dst,
        slot: max,
        got: Vec::new(),
        placed: Vec::new(),
        must_fail: Vec::new(),
    };
    let (handed, errors) = receive_all(&mut net, &mut taker)?;
    check_errors(&errors, &taker.must_fail)?;
    let order: Vec<usize> = taker.got.iter().map(|g| g.0).collect();
    if order != (0..N).collect::<Vec<_>>() {
        let at = order.iter().enumerate().find(|(k, &i)| *k != i);
        return Err(format!(
            "rank {d}: messages from rank 0 arrived out of order or not once each ({handed} handed over): first wrong at position {:?} of {}",
            at,
            order.len()
        ));
    }
    for (i, data) in &taker.got {
        if *data != want[*i] {
            return Err(format!(
                "rank {d}: message {i} ({} bytes) arrived wrong: {}",
                want[*i].len(),
                first_diff(data, &want[*i])
            ));
        }
    }
    for &i in &taker.placed {
        let body = &want[i][4..];
        let got = net.bytes(d, dst.sub(i * max, body.len()))?;
        if got != body {
            return Err(format!(
                "rank {d}: message {i}'s placement ({} bytes at offset {}) landed wrong: {}",
                body.len(),
                i * max,
                first_diff(&got, body)
            ));
        }
    }
    Ok(())
}

/// Poll the last rank until all `N` messages are in: three calls in four
/// through `poll` with `arrivals`, the fourth through `poll`; queued ones go to
/// the taker too (after what the same call handed over, as a caller
/// would). Returns how many were handed over and the calls' errors.
fn receive_all(net: &mut Net<'_>, taker: &mut Taker) -> Result<(usize, Vec<String>), String> {
    let d = net.last();
    let end = Instant::now() + WAIT_DEADLINE;
    let (mut handed, mut errors, mut calls) = (0, Vec::new(), 0u64);
    let mut out = Vec::new();
    while taker.got.len() < N {
        if Instant::now() > end {
            return Err(format!(
                "rank {d}: timed out after {WAIT_DEADLINE:?} with {} of {N} messages from rank 0 ({handed} handed over)",
                taker.got.len()
            ));
        }
        for r in 0..d {
            net.ts[r]
                .poll(&mut out, None)
                .map_err(|e| format!("rank {r}: poll: {e}"))?;
            out.clear();
        }
        calls += 1;
        let before = taker.got.len();
        let r = if calls % 4 == 0 {
            net.ts[d].poll(&mut out, None)
        } else {
            net.ts[d].poll(&mut out, Some(&mut *taker))
        };
        let now_handed = taker.got.len() - before;
        handed += now_handed;
        match r {
            Ok(n) if n != now_handed + out.len() => {
                return Err(format!(
                "rank {d}: poll with arrivals said {n}, yet handed over {now_handed} and appended {}",
                out.len()
            ))
            }
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
        for c in out.drain(..) {
            match c {
                Completion::Recv { peer, data } => {
                    let i = seq_of(&data);
                    if peer != 0 {
                        return Err(format!("rank {d}: a message from rank {peer}"));
                    }
                    taker.got.push((i, data));
                }
                Completion::Send { .. } => {}
                other => return Err(format!("rank {d}: unexpected {other:?}")),
            }
        }
    }
    Ok((handed, errors))
}

/// One error per message in `must_fail` (those handed over of the refused
/// one and the out-of-range one; queued, they fail nothing), the refusal's
/// carrying the taker's words.
fn check_errors(errors: &[String], must_fail: &[usize]) -> Result<(), String> {
    let refused = errors.iter().filter(|e| e.contains(REFUSAL)).count();
    let want_refused = usize::from(must_fail.contains(&REFUSE_AT));
    if errors.len() != must_fail.len() || refused != want_refused {
        return Err(format!(
            "the taker refused message {REFUSE_AT} and asked message {OUT_OF_RANGE_AT} placed outside its region; of these, {must_fail:?} were handed over, so as many errors from poll with arrivals were expected ({want_refused} of them the refusal), got {errors:?}"
        ));
    }
    Ok(())
}

/// Message `i`: its 4-byte sequence number, some with patterned header
/// bytes after it, and its payload's length if it has one (up to the eager
/// buffer's size).
fn message(i: usize, max: usize) -> (Vec<u8>, Option<usize>) {
    let mut hdr = (i as u32).to_le_bytes().to_vec();
    let plen = match i % 4 {
        0 => None,
        1 => Some(1 + i % 61),
        2 => {
            hdr.extend_from_slice(&patterned(i % 29, !(i as u32)));
            None
        }
        _ if i % 16 == 3 => Some(max - hdr.len()),
        _ => Some(100 + i % 40),
    };
    if i == OUT_OF_RANGE_AT {
        return (hdr, Some(8));
    }
    (hdr, plen)
}

fn seq_of(data: &[u8]) -> usize {
    data.get(..4).map_or(usize::MAX, |b| {
        u32::from_le_bytes(b.try_into().expect("4")) as usize
    })
}
