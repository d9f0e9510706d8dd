//! The bare cost of the verbs transport, measured the way perftest does,
//! so the soft-RoCE VM can put it beside ib_write_lat / ib_read_lat /
//! ib_send_lat / ib_write_bw on the same device (ci/softroce-vm prints the
//! ratio lines). Two ranks are two threads of this process, each with its
//! own `VerbsTransport`; timestamps come from ovbench's clock (the
//! calibrated TSC where invariant) into a pre-allocated array.
//!
//! ```text
//! verbs_perf lat write|read|send SIZE ITERS   # p50 = RTT/2 (read: whole op), as perftest's t_typical
//! verbs_perf bw  write SIZE ITERS             # MB/s with MB = 2^20 bytes, as perftest
//! ```

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ovbench_core::RmaOp;
use ovbench_core::{
    clock::best_clock, Completion, LocalSlice, MrHandle, Msg, RemoteKey, Transport,
};
use ovbench_verbs::{VerbsOptions, VerbsTransport};

const DEADLINE: Duration = Duration::from_secs(120);

struct Side {
    t: VerbsTransport,
    /// Where this side's writes and sends come from.
    buf: LocalSlice,
    /// Where the peer's writes land.
    inbox: LocalSlice,
    mr: MrHandle,
    peer_key: RemoteKey,
    out: Vec<Completion>,
}

impl Side {
    fn poll(&mut self) -> usize {
        self.out.clear();
        let n = self.t.poll(&mut self.out, None).expect("poll");
        for c in &self.out {
            if let Completion::Error { .. } = c {
                panic!("rank {}: {c:?}", self.t.info().rank);
            }
        }
        n
    }
    /// Spin until the last byte of the inbox equals `v` (perftest's poll_buf).
    fn wait_last_byte(&mut self, v: u8) {
        let end = Instant::now() + DEADLINE;
        let last = self.inbox.sub(self.inbox.len - 1, 1);
        loop {
            let mut b = 0;
            self.t.region(last, &mut |x| b = x[0]).expect("region");
            if b == v {
                return;
            }
            self.poll();
            assert!(Instant::now() < end, "timed out polling the last byte");
        }
    }
    fn wait_for(&mut self, pred: &dyn Fn(&Completion) -> bool) {
        let end = Instant::now() + DEADLINE;
        loop {
            self.poll();
            if self.out.iter().any(pred) {
                return;
            }
            assert!(Instant::now() < end, "timed out waiting for a completion");
        }
    }
    fn set_last_byte(&mut self, v: u8) {
        let last = self.buf.sub(self.buf.len - 1, 1);
        self.t.region(last, &mut |x| x[0] = v).expect("region");
    }
}

/// Open, exchange addresses and keys with the other thread, connect. The
/// buffer has two halves: what this side writes from, and (second half,
/// behind the key the peer gets) where the peer's writes land.
fn setup(rank: u32, size: usize, tx: mpsc::Sender<Exchange>, rx: mpsc::Receiver<Exchange>) -> Side {
    // Sends carry the whole message in one receive buffer.
    let opts = VerbsOptions {
        eager_buf_size: (size + 64).max(VerbsOptions::default().eager_buf_size),
        ..VerbsOptions::default()
    };
    let mut t = VerbsTransport::new(rank, 2, opts).unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    let half = size.max(1);
    let region = t.alloc(2 * half).expect("alloc");
    let mr = t
        .register(LocalSlice::new(region, 0, 2 * half))
        .expect("register")
        .mr;
    let inbox = t
        .register(LocalSlice::new(region, half, half))
        .expect("register");
    tx.send((t.address(), inbox.key)).expect("exchange");
    let (peer_addr, peer_key) = rx.recv().expect("exchange");
    let mut addrs = vec![Vec::new(), Vec::new()];
    addrs[rank as usize] = t.address();
    addrs[1 - rank as usize] = peer_addr;
    t.connect(&addrs).expect("connect");
    Side {
        t,
        buf: LocalSlice::new(region, 0, half),
        inbox: LocalSlice::new(region, half, half),
        mr,
        peer_key,
        out: Vec::new(),
    }
}

type Exchange = (Vec<u8>, RemoteKey);

/// What one side does, and how it talks to the other thread.
struct Job {
    rank: u32,
    mode: String,
    op: String,
    size: usize,
    iters: usize,
    tx: mpsc::Sender<Exchange>,
    rx: mpsc::Receiver<Exchange>,
    done: mpsc::Sender<()>,
    stop: mpsc::Receiver<()>,
}

fn run(job: Job) {
    let Job {
        rank, size, iters, ..
    } = job;
    let (mode, op) = (job.mode.as_str(), job.op.as_str());
    let mut s = setup(rank, size, job.tx, job.rx);
    let clock = best_clock();
    let warmup = (iters / 10).max(10);
    let total = warmup + iters;
    let mut stamps = vec![0u64; total + 1];
    let peer = 1 - rank;
    match (mode, op) {
        ("lat", "write") => {
            // ib_write_lat: write, then spin on the last byte of the own buffer.
            for (i, stamp) in stamps.iter_mut().enumerate().take(total) {
                let v = (i % 251 + 1) as u8;
                if rank == 0 {
                    *stamp = clock.ticks();
                    s.set_last_byte(v);
                    s.t.post_rma(peer, RmaOp::write(s.buf, s.mr, &s.peer_key, 0), i as u64)
                        .expect("write");
                    s.wait_last_byte(v);
                } else {
                    s.wait_last_byte(v);
                    s.set_last_byte(v);
                    s.t.post_rma(peer, RmaOp::write(s.buf, s.mr, &s.peer_key, 0), i as u64)
                        .expect("write");
                }
            }
            stamps[total] = clock.ticks();
        }
        ("lat", "send") => {
            for (i, stamp) in stamps.iter_mut().enumerate().take(total) {
                let is_recv = |c: &Completion| matches!(c, Completion::Recv { .. });
                if rank == 0 {
                    *stamp = clock.ticks();
                    s.t.post_send(peer, Msg::new(&[], Some(s.buf)), i as u64)
                        .expect("send");
                    s.wait_for(&is_recv);
                } else {
                    s.wait_for(&is_recv);
                    s.t.post_send(peer, Msg::new(&[], Some(s.buf)), i as u64)
                        .expect("send");
                }
            }
            stamps[total] = clock.ticks();
        }
        ("lat", "read") => {
            // ib_read_lat: the whole read, initiator only.
            if rank == 0 {
                for (i, stamp) in stamps.iter_mut().enumerate().take(total) {
                    *stamp = clock.ticks();
                    s.t.post_rma(peer, RmaOp::read(s.buf, s.mr, &s.peer_key, 0), i as u64)
                        .expect("read");
                    s.wait_for(&|c| matches!(c, Completion::Read { .. }));
                }
                stamps[total] = clock.ticks();
            }
        }
        ("bw", "write") => {
            if rank == 0 {
                let depth = 128usize;
                let (mut posted, mut completed) = (0usize, 0usize);
                let end = Instant::now() + DEADLINE;
                while completed < total {
                    while posted < total && posted - completed < depth {
                        if posted == warmup {
                            stamps[0] = clock.ticks();
                        }
                        s.t.post_rma(
                            peer,
                            RmaOp::write(s.buf, s.mr, &s.peer_key, 0),
                            posted as u64,
                        )
                        .expect("write");
                        posted += 1;
                    }
                    s.poll();
                    completed += s
                        .out
                        .iter()
                        .filter(|c| matches!(c, Completion::Write { .. }))
                        .count();
                    assert!(Instant::now() < end, "bandwidth run timed out");
                }
                stamps[total] = clock.ticks();
                let secs = clock.to_ns(stamps[total] - stamps[0]) / 1e9;
                let mbps = (iters * size) as f64 / secs / (1 << 20) as f64;
                println!(
                    "verbs_perf bw write size={size} iters={iters} bw_avg_MBps={mbps:.2} clock={}",
                    clock.info().source
                );
            }
        }
        _ => panic!("unknown mode {mode} {op}: use lat write|read|send or bw write"),
    }
    job.done.send(()).ok();
    // Keep serving (RC needs the target's QP alive) until the other side is done.
    let _ = job.stop.recv_timeout(DEADLINE);
    if mode == "bw" || rank != 0 {
        return;
    }
    let div = if op == "read" { 1.0 } else { 2.0 };
    let mut lat: Vec<u64> = (warmup..total)
        .map(|i| (clock.to_ns(stamps[i + 1] - stamps[i]) / div) as u64)
        .collect();
    lat.sort_unstable();
    let p50 = lat[lat.len() / 2] as f64 / 1000.0;
    let avg = lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1000.0;
    println!(
        "verbs_perf lat {op} size={size} iters={iters} p50_us={p50:.2} avg_us={avg:.2} clock={}",
        clock.info().source
    );
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!(
            "usage: verbs_perf lat write|read|send SIZE ITERS | verbs_perf bw write SIZE ITERS"
        );
        std::process::exit(2);
    }
    let (mode, op) = (a[1].clone(), a[2].clone());
    let size: usize = a[3].parse().expect("SIZE in bytes");
    let iters: usize = a[4].parse().expect("ITERS");
    let (tx0, rx1) = mpsc::channel();
    let (tx1, rx0) = mpsc::channel();
    let (done0, wait0) = mpsc::channel();
    let (done1, wait1) = mpsc::channel();
    // Each side is released once the other has finished its part.
    let job1 = Job {
        rank: 1,
        mode: mode.clone(),
        op: op.clone(),
        size,
        iters,
        tx: tx1,
        rx: rx1,
        done: done1,
        stop: wait0,
    };
    let h1 = thread::spawn(move || run(job1));
    run(Job {
        rank: 0,
        mode,
        op,
        size,
        iters,
        tx: tx0,
        rx: rx0,
        done: done0,
        stop: wait1,
    });
    h1.join().expect("rank 1");
}
