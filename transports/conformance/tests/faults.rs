//! The send-completion check fails the transports it is meant to fail: TCP
//! endpoints wrapped to break one rule each (a second completion, a
//! completion for an inline send, a stamp after its poll, a stamp before
//! an earlier one), and passes them unwrapped.

use std::time::{Duration, Instant};

use ovbench_conformance::{run_check, send_completions_reported, Endpoints};
use ovbench_core::{
    Caps, Completion, CompletionTime, Ctx, LocalSlice, MrHandle, Rank, RegionId, RemoteKey,
    Transport, TransportError, TransportInfo,
};
use ovbench_tcp::{TcpOptions, TcpTransport};

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Every send completion is reported twice.
    Twice,
    /// `post_send_inline` says `Ok(true)` and still queues a completion.
    InlineAndQueued,
    /// Completions stamped a second after now.
    StampedLate,
    /// Clock-reading stamps that go back by one each poll.
    TicksBackwards,
}

struct Faulty {
    t: TcpTransport,
    fault: Fault,
    /// Stamp of the last poll's completions (TicksBackwards).
    ticks: u64,
}

impl Transport for Faulty {
    fn info(&self) -> TransportInfo {
        self.t.info()
    }
    fn caps(&self) -> Caps {
        self.t.caps()
    }
    fn rank(&self) -> Rank {
        self.t.rank()
    }
    fn size(&self) -> u32 {
        self.t.size()
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
    fn read_region(&self, s: LocalSlice, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        self.t.read_region(s, f)
    }
    fn write_region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.t.write_region(s, f)
    }
    fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.t.register(s)
    }
    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.t.deregister(mr)
    }
    fn remote_key(&self, mr: MrHandle) -> RemoteKey {
        self.t.remote_key(mr)
    }
    fn post_send(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.t.post_send(peer, header, payload, ctx)
    }
    fn post_send_inline(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        let inline = self.t.post_send_inline(peer, header, payload, ctx)?;
        Ok(inline || self.fault == Fault::InlineAndQueued)
    }
    fn post_write(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.t
            .post_write(peer, local, mr, remote, remote_offset, ctx)
    }
    fn post_read(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.t
            .post_read(peer, local, mr, remote, remote_offset, ctx)
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        let start = out.len();
        self.t.poll(out)?;
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
        Ok(out.len() - start)
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
            }) as Box<dyn Transport>
        })
        .collect()
}

/// The check's verdict on endpoints with `fault`.
fn verdict(fault: Fault) -> Result<(), String> {
    run_check(send_completions_reported, &|n| make(n, fault), 2)
}

#[test]
fn a_faithful_transport_passes() {
    verdict(Fault::None).expect("plain TCP");
}

#[test]
fn a_second_completion_fails() {
    let e = verdict(Fault::Twice).unwrap_err();
    assert!(e.contains("a second time"), "{e}");
}

#[test]
fn a_completion_for_an_inline_send_fails() {
    let e = verdict(Fault::InlineAndQueued).unwrap_err();
    assert!(e.contains("finished inside the call"), "{e}");
}

#[test]
fn a_stamp_after_its_poll_fails() {
    let e = verdict(Fault::StampedLate).unwrap_err();
    assert!(e.contains("after the poll that returned it"), "{e}");
}

#[test]
fn a_stamp_before_an_earlier_one_fails() {
    let e = verdict(Fault::TicksBackwards).unwrap_err();
    assert!(e.contains("ticks, before"), "{e}");
}
