//! COMMTEST's protocols as Worley's COMMTEST description lists them: the
//! per-packet call sequence of each, for processor 1 (both processors,
//! unordered) and processor 2 (ordered).
//!
//! (1,6) "synchronous" is left out: the description gives it the calls of
//! (1,0) — processor 1 SEND then RECV, processor 2 RECV then SEND — drawn
//! one step at a time, and no mechanism (handshake, probe) that would make
//! the calls run differently; with blocking calls (1,0) already runs in
//! that order. A (1,6) row would repeat (1,0)'s measurement under another
//! name. See [`WHY_NO_1_6`].

use anyhow::bail;

/// One protocol of the reference's table.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    pub ordered: bool,
    pub number: u32,
    pub name: &'static str,
    /// Calls of processor 1 (and of both, unordered) per packet.
    pub p1: &'static [Op],
    /// Calls of processor 2 (ordered).
    pub p2: &'static [Op],
}

/// A call in a protocol's per-packet sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Bsend,
    Send,
    Isend,
    Rsend,
    Irsend,
    Ssend,
    Issend,
    Recv,
    Irecv,
    Sendrecv,
    /// The ready handshake: tell the rank sending to us that our receive is posted.
    ReadyPost,
    /// The ready handshake: wait until the rank we send to has posted.
    ReadyWait,
    /// Complete every pending request, in order.
    Wait,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Bsend => "bsend",
            Op::Send => "send",
            Op::Isend => "isend",
            Op::Rsend => "rsend",
            Op::Irsend => "irsend",
            Op::Ssend => "ssend",
            Op::Issend => "issend",
            Op::Recv => "recv",
            Op::Irecv => "irecv",
            Op::Sendrecv => "sendrecv",
            Op::ReadyPost => "ready>",
            Op::ReadyWait => "ready<",
            Op::Wait => "wait",
        }
    }
}

use Op::*;

/// An unordered protocol: both processors make the calls `p1`.
const fn unordered(number: u32, name: &'static str, p1: &'static [Op]) -> Protocol {
    Protocol {
        ordered: false,
        number,
        name,
        p1,
        p2: &[],
    }
}

/// An ordered protocol: processor 1 makes the calls `p1`, processor 2 `p2`.
const fn ordered(
    number: u32,
    name: &'static str,
    p1: &'static [Op],
    p2: &'static [Op],
) -> Protocol {
    Protocol {
        ordered: true,
        number,
        name,
        p1,
        p2,
    }
}

/// Why `--protocol 1,6` is refused.
pub const WHY_NO_1_6: &str = "--protocol 1,6: (1,6) \"synchronous\" is left out: COMMTEST's description gives it the same calls as (1,0) (processor 1 SEND then RECV, processor 2 RECV then SEND), drawn one step at a time, and no handshake or probe that would make them run differently, so it would repeat (1,0); use --protocol 1,0";

/// The reference's protocols, in its order ((1,6) left out: [`WHY_NO_1_6`]).
#[rustfmt::skip]
pub const PROTOCOLS: &[Protocol] = &[
    unordered(0, "simple", &[Bsend, Recv, Wait]),
    unordered(1, "nonblocking send", &[Isend, Recv, Wait]),
    unordered(2, "nonblocking receive", &[Irecv, Send, Wait]),
    unordered(3, "nonblocking send and receive", &[Irecv, Isend, Wait]),
    unordered(4, "ready send", &[Irecv, ReadyPost, ReadyWait, Rsend, Wait]),
    unordered(5, "nonblocking ready send", &[Irecv, ReadyPost, ReadyWait, Irsend, Wait]),
    unordered(6, "native sendrecv", &[Sendrecv]),
    unordered(7, "nonblocking sync. send", &[Issend, Recv, Wait]),
    unordered(8, "sync. send and nonblocking receive", &[Irecv, Ssend, Wait]),
    unordered(9, "nonblocking sync. send and receive", &[Irecv, Issend, Wait]),
    ordered(0, "simple", &[Send, Recv], &[Recv, Send]),
    ordered(1, "nonblocking send", &[Isend, Recv, Wait], &[Recv, Send]),
    ordered(2, "nonblocking receive", &[Irecv, Send, Wait], &[Recv, Send]),
    ordered(3, "nonblocking send and receive", &[Irecv, Isend, Wait], &[Recv, Send]),
    ordered(4, "ready send", &[Irecv, ReadyPost, ReadyWait, Rsend, Wait], &[Irecv, ReadyPost, Wait, ReadyWait, Rsend]),
    ordered(5, "nonblocking ready send", &[Irecv, ReadyPost, ReadyWait, Irsend, Wait], &[Irecv, ReadyPost, Wait, ReadyWait, Rsend]),
    ordered(7, "nonblocking sync. send", &[Issend, Recv, Wait], &[Recv, Ssend]),
    ordered(8, "sync. send and nonblocking receive", &[Irecv, Ssend, Wait], &[Recv, Ssend]),
    ordered(9, "nonblocking sync. send and receive", &[Irecv, Issend, Wait], &[Recv, Ssend]),
    ordered(10, "sync. send", &[Ssend, Recv], &[Recv, Ssend]),
];

impl Protocol {
    /// `(0,3)`-style label.
    pub fn label(&self) -> String {
        format!("({},{})", u32::from(self.ordered), self.number)
    }

    /// The per-packet call sequence(s) as printed.
    pub fn calls(&self, reorganized: bool) -> String {
        let seq = |ops: &[Op]| ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(" ");
        if reorganized {
            return format!(
                "prepost irecv; {}; wait recv; wait prev send",
                send_op(self).map_or("n/a", Op::name)
            );
        }
        if self.ordered {
            format!("P1: {} | P2: {}", seq(self.p1), seq(self.p2))
        } else {
            seq(self.p1)
        }
    }
}

/// The send call of an unordered protocol (for the reorganized variant).
pub(super) fn send_op(p: &Protocol) -> Option<Op> {
    if p.ordered {
        return None;
    }
    p.p1.iter()
        .copied()
        .find(|o| matches!(o, Bsend | Send | Isend | Rsend | Irsend | Ssend | Issend))
}

/// `U,N` or `(U,N)` as a protocol of the table.
#[deny(clippy::arithmetic_side_effects)]
pub(super) fn parse_protocol(s: &str) -> anyhow::Result<&'static Protocol> {
    let t = s.trim().trim_start_matches('(').trim_end_matches(')');
    let parsed = t
        .split_once([',', '.'])
        .and_then(|(a, b)| Some((a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?)));
    let Some((o, n)) = parsed else {
        bail!("--protocol {s}: write it as U,N — 0,0 … 0,9 (unordered) or 1,0 … 1,10 (ordered)");
    };
    // deviation: no-protocol-1-6 — (1,6) would repeat (1,0), see docs/methods/commtest.md
    if (o, n) == (1, 6) {
        bail!("{WHY_NO_1_6}");
    }
    PROTOCOLS
        .iter()
        .find(|p| u32::from(p.ordered) == o && p.number == n)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--protocol {s}: there is no protocol ({o},{n}): unordered are 0,0 … 0,9, ordered 1,0 … 1,10 (no 1,6)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_six_is_refused_with_the_reason() {
        let e = parse_protocol("1,6").unwrap_err().to_string();
        assert!(e.contains("same calls as (1,0)"), "{e}");
        assert!(parse_protocol("(1,10)").is_ok());
        assert_eq!(PROTOCOLS.len(), 20);
    }
}
