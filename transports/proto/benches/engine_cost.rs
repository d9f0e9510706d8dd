//! Host cost of the engine per eager message (both sides, no transport):
//! isend + its send completion on one engine, irecv + arrival on the
//! other. Run with `cargo bench -p ovbench-proto --bench engine_cost`.

use std::hint::black_box;
use std::time::Instant;

use ovbench_proto::{Config, Engine, Mode, Op, Protocol, Slice, Space};

fn main() {
    let mk = |rank| {
        let mut c = Config::new(rank, 2, 8192);
        c.protocol = Protocol::Eager;
        Engine::new(c).expect("config")
    };
    let (mut a, mut b) = (mk(0), mk(1));
    let src = Slice::new(0, 0, 8);
    let dst = Slice::new(0, 0, 8);
    let payload = [7u8; 8];
    let n = 1_000_000u64;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        for i in 0..n {
            let rr = b
                .irecv(i, dst, Some(0), Some(1), Space::User)
                .expect("irecv");
            let sr = a
                .isend(i, src, 1, 1, Mode::Standard, Space::User)
                .expect("isend");
            while let Some(op) = a.poll_op() {
                if let Op::Send { header, ctx, .. } = op {
                    let mut msg = header;
                    msg.extend_from_slice(&payload);
                    let p = b.on_message(i, 0, &msg).expect("arrival");
                    black_box(p);
                    a.on_completion(i, ctx).expect("completion");
                    a.recycle_header(msg);
                }
            }
            black_box(a.take(sr));
            black_box(b.take(rr));
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("engine cost per 8-byte eager message, both sides: {best:.0} ns");
}
