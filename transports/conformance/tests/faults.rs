//! The send-end check fails the transports it is meant to fail: TCP
//! endpoints wrapped to break one rule each (a second completion, a
//! completion for a send that returned `Done`, a send that never ends, a
//! stamp after its call, a stamp before an earlier one), and passes them
//! unwrapped.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ovbench_conformance::{run_check, send_end_known_once, Endpoints};
use ovbench_core::{
    Arrivals, Completion, CompletionTime, Ctx, LocalSlice, MrHandle, Msg, Posted, Rank, RegionId,
    Registered, RmaOp, Transport, TransportError, TransportInfo,
};
use ovbench_tcp::{TcpOptions, TcpTransport};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// Every send completion is reported twice.
    Twice,
    /// `post_send` says `Done` and still queues a completion.
    DoneAndQueued,
    /// `post_send` says `Queued` and no completion ever comes.
    Lost,
    /// Completions stamped a second after now.
    StampedLate,
    /// `post_send` says `Done`, stamped a second after its return (its
    /// queued completion withheld).
    DoneStampedLate,
    /// Clock-reading stamps that go back by one each poll.
    TicksBackwards,
}

struct Faulty {
    t: TcpTransport,
    fault: Fault,
    /// Stamp of the last poll's completions (TicksBackwards).
    ticks: u64,
    /// Sends whose queued completion is withheld.
    withheld: HashSet<Ctx>,
}

impl Transport for Faulty {
    fn info(&self) -> TransportInfo {
        self.t.info()
    }
    fn address(&self) -> Vec<u8> {
        self.t.address()
    }
    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        self.t.connect(addresses)
    }
    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.t.alloc(len)
    }
    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.t.free(region)
    }
    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.t.region(s, f)
    }
    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        self.t.register(s)
    }
    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.t.deregister(mr)
    }
    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let p = self.t.post_send(peer, msg, ctx)?;
        Ok(match self.fault {
            Fault::DoneAndQueued => Posted::Done(None),
            Fault::Lost => {
                self.withheld.insert(ctx);
                p
            }
            Fault::DoneStampedLate if p == Posted::Queued => {
                self.withheld.insert(ctx);
                Posted::Done(Some(CompletionTime::Host(
                    Instant::now() + Duration::from_secs(1),
                )))
            }
            _ => p,
        })
    }
    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        self.t.post_rma(peer, rma, ctx)
    }
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let start = out.len();
        let n = self.t.poll(out, arrivals)?;
        let handed = n - (out.len() - start);
        let mut fresh = out.split_off(start);
        fresh.retain(|c| !matches!(c, Completion::Send { ctx } if self.withheld.contains(ctx)));
        out.append(&mut fresh);
        if self.fault == Fault::Twice {
            let again: Vec<Completion> = out[start..]
                .iter()
                .filter_map(|c| match c {
                    Completion::Send { ctx } => Some(Completion::Send { ctx: *ctx }),
                    _ => None,
                })
                .collect();
            out.extend(again);
        }
        self.ticks = self.ticks.saturating_sub(1);
        Ok(handed + out.len() - start)
    }
    fn completion_time(&self, index: usize) -> Option<CompletionTime> {
        let _ = index;
        match self.fault {
            Fault::StampedLate => Some(CompletionTime::Host(
                Instant::now() + Duration::from_secs(1),
            )),
            Fault::TicksBackwards => Some(CompletionTime::Ticks(self.ticks)),
            _ => None,
        }
    }
    fn recycle(&mut self, data: Vec<u8>) {
        self.t.recycle(data)
    }
}

fn make(n: u32, fault: Fault) -> Endpoints {
    (0..n)
        .map(|r| {
            let t = TcpTransport::new(r, n, TcpOptions::default()).expect("loopback");
            Box::new(Faulty {
                t,
                fault,
                ticks: u64::MAX,
                withheld: HashSet::new(),
            }) as Box<dyn Transport>
        })
        .collect()
}

/// The check's verdict on endpoints with `fault`.
fn verdict(fault: Fault) -> Result<(), String> {
    run_check(send_end_known_once, &|n| make(n, fault), 2)
}

#[test]
fn a_faithful_transport_passes() {
    verdict(Fault::None).expect("plain TCP");
}

/// Each broken rule fails the check, with a reason that names it.
#[test]
fn each_broken_rule_fails_naming_it() {
    let cases: [(Fault, &[&str]); 6] = [
        (Fault::Twice, &["a second time"]),
        (Fault::DoneAndQueued, &["returned Done"]),
        (Fault::Lost, &["sends never reported"]),
        (Fault::StampedLate, &["after the call that returned it"]),
        (
            Fault::DoneStampedLate,
            &["Done stamped", "after the call that returned it"],
        ),
        (Fault::TicksBackwards, &["ticks, before"]),
    ];
    for (fault, reason) in cases {
        let e = verdict(fault).expect_err("a broken rule passed");
        assert!(reason.iter().all(|r| e.contains(r)), "{fault:?}: {e}");
    }
}
