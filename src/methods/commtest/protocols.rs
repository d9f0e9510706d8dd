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

/// Why `--protocol 1,6` is refused.
pub const WHY_NO_1_6: &str = "--protocol 1,6: (1,6) \"synchronous\" is left out: COMMTEST's description gives it the same calls as (1,0) (processor 1 SEND then RECV, processor 2 RECV then SEND), drawn one step at a time, and no handshake or probe that would make them run differently, so it would repeat (1,0); use --protocol 1,0";

/// The reference's protocols, in its order ((1,6) left out: [`WHY_NO_1_6`]).
pub const PROTOCOLS: &[Protocol] = &[
    Protocol {
        ordered: false,
        number: 0,
        name: "simple",
        p1: &[Bsend, Recv, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 1,
        name: "nonblocking send",
        p1: &[Isend, Recv, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 2,
        name: "nonblocking receive",
        p1: &[Irecv, Send, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 3,
        name: "nonblocking send and receive",
        p1: &[Irecv, Isend, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 4,
        name: "ready send",
        p1: &[Irecv, ReadyPost, ReadyWait, Rsend, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 5,
        name: "nonblocking ready send",
        p1: &[Irecv, ReadyPost, ReadyWait, Irsend, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 6,
        name: "native sendrecv",
        p1: &[Sendrecv],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 7,
        name: "nonblocking sync. send",
        p1: &[Issend, Recv, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 8,
        name: "sync. send and nonblocking receive",
        p1: &[Irecv, Ssend, Wait],
        p2: &[],
    },
    Protocol {
        ordered: false,
        number: 9,
        name: "nonblocking sync. send and receive",
        p1: &[Irecv, Issend, Wait],
        p2: &[],
    },
    Protocol {
        ordered: true,
        number: 0,
        name: "simple",
        p1: &[Send, Recv],
        p2: &[Recv, Send],
    },
    Protocol {
        ordered: true,
        number: 1,
        name: "nonblocking send",
        p1: &[Isend, Recv, Wait],
        p2: &[Recv, Send],
    },
    Protocol {
        ordered: true,
        number: 2,
        name: "nonblocking receive",
        p1: &[Irecv, Send, Wait],
        p2: &[Recv, Send],
    },
    Protocol {
        ordered: true,
        number: 3,
        name: "nonblocking send and receive",
        p1: &[Irecv, Isend, Wait],
        p2: &[Recv, Send],
    },
    Protocol {
        ordered: true,
        number: 4,
        name: "ready send",
        p1: &[Irecv, ReadyPost, ReadyWait, Rsend, Wait],
        p2: &[Irecv, ReadyPost, Wait, ReadyWait, Rsend],
    },
    Protocol {
        ordered: true,
        number: 5,
        name: "nonblocking ready send",
        p1: &[Irecv, ReadyPost, ReadyWait, Irsend, Wait],
        p2: &[Irecv, ReadyPost, Wait, ReadyWait, Rsend],
    },
    Protocol {
        ordered: true,
        number: 7,
        name: "nonblocking sync. send",
        p1: &[Issend, Recv, Wait],
        p2: &[Recv, Ssend],
    },
    Protocol {
        ordered: true,
        number: 8,
        name: "sync. send and nonblocking receive",
        p1: &[Irecv, Ssend, Wait],
        p2: &[Recv, Ssend],
    },
    Protocol {
        ordered: true,
        number: 9,
        name: "nonblocking sync. send and receive",
        p1: &[Irecv, Issend, Wait],
        p2: &[Recv, Ssend],
    },
    Protocol {
        ordered: true,
        number: 10,
        name: "sync. send",
        p1: &[Ssend, Recv],
        p2: &[Recv, Ssend],
    },
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
