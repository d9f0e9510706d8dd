//! A threaded in-memory communicator for the methods' liveness tests:
//! one thread per rank, real time, eager messages into per-rank
//! mailboxes, synchronous sends completing when matched. It checks that
//! every method's ranks agree on their message sequence (no deadlock,
//! no mismatched sizes) independently of any transport; accuracy is the
//! sim's job.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use ovbench::methods::MethodCommand;
use ovbench::report::Sink;
use ovbench_core::clock::MonotonicClock;
use ovbench_core::{
    Buf, Caps, Clock, CommInfo, Communicator, OpCounts, Rank, RegionId, Req, SendMode, Source,
    Span, Status, Tag, TagSel, TransportError,
};

struct Msg {
    src: Rank,
    tag: Tag,
    data: Vec<u8>,
    matched: Option<Arc<AtomicBool>>,
}

#[derive(Default)]
struct Mailbox {
    q: Mutex<VecDeque<Msg>>,
    cv: Condvar,
}

enum Pending {
    Done(Status),
    Send(Option<Arc<AtomicBool>>, Status),
    Recv(Posted),
}

/// A posted receive: where it lands and what it matches.
#[derive(Clone, Copy)]
struct Posted {
    room: Span,
    src: Source,
    tag: TagSel,
}

/// The command line `ovbench ARGS`, parsed: the method it names.
pub fn parse(args: &[&str]) -> MethodCommand {
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: MethodCommand,
    }
    let mut v = vec!["ovbench"];
    v.extend_from_slice(args);
    <Cli as clap::Parser>::try_parse_from(v)
        .expect("arguments parse")
        .cmd
}

/// One method's options `ARGS` (the command line after its name),
/// parsed as its subcommand parses them.
pub fn method_args<T: clap::Args>(args: &[&str]) -> T {
    #[derive(clap::Parser)]
    struct Cli<T: clap::Args> {
        #[command(flatten)]
        args: T,
    }
    let argv = std::iter::once("ovbench").chain(args.iter().copied());
    <Cli<T> as clap::Parser>::try_parse_from(argv)
        .expect("arguments parse")
        .args
}

/// One rank of the threaded mock.
pub struct MockComm {
    rank: Rank,
    size: u32,
    boxes: Arc<Vec<Mailbox>>,
    barrier: Arc<Barrier>,
    clock: MonotonicClock,
    regions: Vec<Vec<u8>>,
    pending: HashMap<u64, Pending>,
    next: u64,
    ops: OpCounts,
}

fn timeout(rank: Rank) -> TransportError {
    TransportError::Invalid(format!("mock rank {rank}: wait timed out (deadlock?)"))
}

impl MockComm {
    /// A new request for `p`.
    fn post(&mut self, p: Pending) -> Req {
        self.next += 1;
        self.pending.insert(self.next, p);
        Req(self.next)
    }

    /// Match what has arrived, in arrival order, each message to the
    /// oldest posted receive it fits (MPI's non-overtaking rule), as an
    /// engine's progress would while the rank waits for something else.
    /// The mailbox stays locked for the whole pass: a message arriving
    /// between two receives' looks would otherwise go to the newer one
    /// (commtest's reorganized ready protocol then deadlocked, each rank's
    /// last packet landing in the other's receive of the packet after).
    fn progress_all(&mut self) -> Result<(), TransportError> {
        let mut posted: Vec<(u64, Posted)> = self
            .pending
            .iter()
            .filter_map(|(&id, p)| match p {
                Pending::Recv(r) => Some((id, *r)),
                _ => None,
            })
            .collect();
        if posted.is_empty() {
            return Ok(());
        }
        posted.sort_unstable_by_key(|&(id, _)| id);
        let boxes = Arc::clone(&self.boxes);
        let mut q = boxes[self.rank as usize].q.lock().unwrap();
        let mut i = 0;
        while i < q.len() && !posted.is_empty() {
            let m = &q[i];
            let fits = |r: &Posted| {
                r.src.map_or(true, |s| s == m.src) && r.tag.map_or(true, |t| t == m.tag)
            };
            match posted.iter().position(|(_, r)| fits(r)) {
                Some(k) => {
                    let (id, r) = posted.remove(k);
                    let m = q.remove(i).expect("index in range");
                    self.deliver(id, r, m)?;
                }
                None => i += 1,
            }
        }
        Ok(())
    }

    /// Receive `m` into `r`, the posted receive `id`.
    fn deliver(&mut self, id: u64, r: Posted, m: Msg) -> Result<(), TransportError> {
        if m.data.len() > r.room.len {
            return Err(TransportError::Invalid(format!(
                "mock rank {}: {} bytes from rank {} into a {}-byte receive",
                self.rank,
                m.data.len(),
                m.src,
                r.room.len
            )));
        }
        self.regions[r.room.buf.region.0 as usize][r.room.off..r.room.off + m.data.len()]
            .copy_from_slice(&m.data);
        if let Some(f) = m.matched {
            f.store(true, Ordering::Release);
            for b in self.boxes.iter() {
                b.cv.notify_all();
            }
        }
        let st = Status {
            source: m.src,
            tag: m.tag,
            len: m.data.len(),
        };
        self.pending.insert(id, Pending::Done(st));
        Ok(())
    }

    /// Retire `id` if it finished (a posted receive is matched only by
    /// [`Self::progress_all`]).
    fn take(&mut self, id: u64) -> Result<Option<Status>, TransportError> {
        let Some(p) = self.pending.get(&id) else {
            return Err(TransportError::Invalid(format!("unknown request {id}")));
        };
        match p {
            Pending::Done(st) => {
                let st = *st;
                self.pending.remove(&id);
                Ok(Some(st))
            }
            Pending::Send(flag, st) => {
                if flag.as_ref().map_or(true, |f| f.load(Ordering::Acquire)) {
                    let st = *st;
                    self.pending.remove(&id);
                    return Ok(Some(st));
                }
                Ok(None)
            }
            Pending::Recv(_) => Ok(None),
        }
    }
}

fn spin(ns: f64) {
    let t = Instant::now();
    while (t.elapsed().as_nanos() as f64) < ns {
        std::hint::spin_loop();
    }
}

impl Communicator for MockComm {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn info(&self) -> CommInfo {
        mock_info()
    }
    fn clock(&self) -> &dyn Clock {
        &self.clock
    }
    fn set_eager_limit(&mut self, _: ovbench_core::EagerLimit) -> ovbench_core::Result<()> {
        unreachable!("the methods under test choose no eager limit")
    }
    fn work(&mut self, units: u64) {
        spin(units as f64);
    }
    fn work_unit_ns(&self) -> f64 {
        1.0
    }
    fn delay(&mut self, ns: f64) {
        spin(ns);
    }
    fn alloc(&mut self, len: usize) -> Result<Buf, TransportError> {
        self.regions.push(vec![0; len]);
        Ok(Buf {
            region: RegionId(self.regions.len() as u32 - 1),
            len,
        })
    }
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<(), TransportError> {
        f(&mut self.regions[buf.region.0 as usize]);
        Ok(())
    }
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        f(&self.regions[buf.region.0 as usize]);
        Ok(())
    }
    fn isend_mode(
        &mut self,
        span: Span,
        dst: Rank,
        tag: Tag,
        mode: SendMode,
    ) -> Result<Req, TransportError> {
        let Span { buf, off, len } = span;
        let data = self.regions[buf.region.0 as usize][off..off + len].to_vec();
        let flag = (mode == SendMode::Synchronous).then(|| Arc::new(AtomicBool::new(false)));
        let mb = &self.boxes[dst as usize];
        mb.q.lock().unwrap().push_back(Msg {
            src: self.rank,
            tag,
            data,
            matched: flag.clone(),
        });
        mb.cv.notify_all();
        self.ops.sends += 1;
        self.ops.bytes += len as u64;
        let st = Status {
            source: self.rank,
            tag,
            len,
        };
        Ok(self.post(Pending::Send(flag, st)))
    }
    fn irecv(&mut self, room: Span, src: Source, tag: TagSel) -> Result<Req, TransportError> {
        Ok(self.post(Pending::Recv(Posted { room, src, tag })))
    }
    fn test(&mut self, req: Req) -> Result<Option<Status>, TransportError> {
        self.progress_all()?;
        self.take(req.0)
    }
    fn wait(&mut self, req: Req) -> Result<Status, TransportError> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.progress_all()?;
            if let Some(st) = self.take(req.0)? {
                return Ok(st);
            }
            if Instant::now() > deadline {
                return Err(timeout(self.rank));
            }
            let mb = &self.boxes[self.rank as usize];
            let q = mb.q.lock().unwrap();
            let _ = mb.cv.wait_timeout(q, Duration::from_micros(200)).unwrap();
        }
    }
    fn progress(&mut self) -> Result<(), TransportError> {
        self.progress_all()
    }
    fn barrier(&mut self) -> Result<(), TransportError> {
        self.barrier.wait();
        Ok(())
    }
    fn op_counts(&self) -> OpCounts {
        self.ops
    }
    fn set_bare_op(
        &mut self,
        _: Option<ovbench_core::engine_comm::RawOp>,
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported("the mock has no engine".into()))
    }
    /// The mock records no transfers.
    fn drain_transfers(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

fn mock_info() -> CommInfo {
    let caps = Caps {
        rma: ovbench_core::RmaKind::Emulated,
        rma_progress: ovbench_core::RmaProgress::TargetProgress,
        progress: ovbench_core::Progress::Poll,
        eager_buf_size: usize::MAX,
        native_sync_send: false,
        completion_stamps: ovbench_core::CompletionStamps::Host,
        eager_copies: 0,
    };
    CommInfo {
        transport: ovbench_core::TransportInfo {
            name: "mock".into(),
            device: String::new(),
            library: String::new(),
            extra: Vec::new(),
            caps: caps.clone(),
            rank: 0,
            size: 2,
        },
        caps,
        protocol: ovbench_core::CommPath::Engine(ovbench_core::engine_comm::Protocol::Eager),
        plan: ovbench_core::engine_comm::Plan::new(ovbench_core::engine_comm::Protocol::Eager),
        eager_limit: ovbench_core::EagerLimit::default_of(16 * 1024),
    }
}

/// A sink that keeps everything, for assertions.
#[derive(Debug, Default, Clone)]
pub struct MemSink {
    pub tables: Vec<(String, Vec<String>)>,
    pub rows: Vec<(Vec<String>, serde_json::Value)>,
    pub summaries: Vec<serde_json::Value>,
    pub notes: Vec<String>,
}

impl Sink for MemSink {
    fn table(&mut self, title: &str, columns: &[&str]) {
        self.tables.push((
            title.into(),
            columns.iter().map(|c| c.to_string()).collect(),
        ));
    }
    fn row(&mut self, cells: &[String], json: serde_json::Value) {
        let cols = self.tables.last().map_or(0, |t| t.1.len());
        assert_eq!(cells.len(), cols, "row {cells:?} vs columns");
        self.rows.push((cells.to_vec(), json));
    }
    fn summary(&mut self, json: serde_json::Value, _lines: &[String]) {
        self.summaries.push(json);
    }
    fn note(&mut self, text: &str) {
        self.notes.push(text.into());
    }
}

/// Run `f` on `np` threaded ranks; returns rank 0's result and sink.
pub fn run_mock<T: Send + 'static>(
    np: u32,
    f: impl Fn(&mut dyn Communicator, &mut MemSink) -> anyhow::Result<T> + Send + Sync + 'static,
) -> (T, MemSink) {
    let boxes: Arc<Vec<Mailbox>> = Arc::new((0..np).map(|_| Mailbox::default()).collect());
    let barrier = Arc::new(Barrier::new(np as usize));
    let f = Arc::new(f);
    let handles: Vec<_> = (0..np)
        .map(|rank| {
            let (boxes, barrier, f) = (boxes.clone(), barrier.clone(), f.clone());
            std::thread::spawn(move || {
                let mut c = MockComm {
                    rank,
                    size: np,
                    boxes,
                    barrier,
                    clock: MonotonicClock::new(),
                    regions: Vec::new(),
                    pending: HashMap::new(),
                    next: 0,
                    ops: OpCounts::default(),
                };
                let mut sink = MemSink::default();
                let r = f(&mut c, &mut sink);
                (r, sink)
            })
        })
        .collect();
    let mut first = None;
    for (i, h) in handles.into_iter().enumerate() {
        let (r, sink) = h.join().expect("rank panicked");
        let r = r.unwrap_or_else(|e| panic!("rank {i}: {e:#}"));
        if i == 0 {
            first = Some((r, sink));
        }
    }
    first.unwrap()
}
