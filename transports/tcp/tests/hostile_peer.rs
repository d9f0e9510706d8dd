//! Nothing from the wire is trusted: a hand-driven socket plays rank 1
//! and sends garbage, oversize frames, forged keys and answers to
//! questions never asked, or just vanishes. Rank 0 must refuse, leave its
//! memory alone, and report the peer by rank within the deadline.
//!
//! "Leave its memory alone" is checked two ways: the target region has a
//! PROT_NONE guard page on each side (a stray write there faults at once;
//! valgrind's memcheck, which ci/test also runs this under, cannot see a
//! write landing in another valid region), and every other region holds
//! canary bytes checked after each case.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use std::sync::Arc;

use ovbench_core::clock::best_clock;
use ovbench_core::engine_comm::Protocol;
use ovbench_core::{
    Clock, Comm, Communicator, Completion, EngineConfig, LocalSlice, Msg, OpKind, Progress, RmaOp,
    Transport, WorkLoop,
};
use ovbench_tcp::{TcpOptions, TcpTransport};

mod util;
use util::expect_peer_error;

const HDR: usize = 44;
const EAGER: usize = 4096;

/// Build a frame header as the wire format lays it out.
fn frame(kind: u8, status: u32, id: u64, offset: u64, len: u64, reg: u32, check: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(HDR);
    b.extend_from_slice(&0x4354_564fu32.to_le_bytes());
    b.push(kind);
    b.extend_from_slice(&status.to_le_bytes()[..3]);
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&reg.to_le_bytes());
    b.extend_from_slice(&check.to_le_bytes());
    b
}

/// Rank 0 as a real transport, rank 1 as a raw socket that said hello.
fn pair(progress: Progress) -> (TcpTransport, TcpStream) {
    let opts = TcpOptions {
        progress,
        eager_buf_size: EAGER,
        timeout: Duration::from_secs(10),
        ..TcpOptions::default()
    };
    let mut t0 = TcpTransport::new(0, 2, opts).unwrap();
    let addr = String::from_utf8(t0.address()).unwrap();
    let fake = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut hello = 0x4f56_4831u32.to_le_bytes().to_vec();
        hello.extend_from_slice(&1u32.to_le_bytes());
        hello.extend_from_slice(&2u32.to_le_bytes());
        s.write_all(&hello).unwrap();
        let mut back = [0u8; 12];
        s.read_exact(&mut back).unwrap();
        s
    });
    let addrs = vec![t0.address(), b"127.0.0.1:9".to_vec()];
    t0.connect(&addrs).unwrap();
    let s = fake.join().unwrap();
    s.set_nonblocking(true).unwrap();
    (t0, s)
}

/// Poll rank 0 until `n` bytes come back on the fake socket.
fn answer(t0: &mut TcpTransport, s: &mut TcpStream, n: usize) -> Vec<u8> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < n {
        t0.poll(&mut out, None).unwrap();
        assert!(
            !out.iter().any(|c| matches!(c, Completion::Error { .. })),
            "{out:?}"
        );
        let mut b = [0u8; 256];
        match s.read(&mut b) {
            Ok(0) => panic!("rank 0 closed the connection"),
            Ok(k) => got.extend_from_slice(&b[..k]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        assert!(Instant::now() < end, "rank 0 never answered");
    }
    got
}

#[test]
fn garbage_is_reported_naming_the_peer() {
    for progress in [Progress::Poll, Progress::Thread] {
        let (mut t0, mut s) = pair(progress);
        s.write_all(&[0xFF; HDR]).unwrap();
        let why = expect_peer_error(&mut t0, Duration::from_secs(5));
        assert!(why.contains("rank 1") && why.contains("magic"), "{why}");
    }
}

#[test]
fn oversize_and_unknown_frames_are_refused() {
    let (mut t0, mut s) = pair(Progress::Poll);
    s.write_all(&frame(1, 0, 0, 0, EAGER as u64 + 1, 0, 0))
        .unwrap();
    let why = expect_peer_error(&mut t0, Duration::from_secs(5));
    assert!(why.contains("eager buffer"), "{why}");

    let (mut t0, mut s) = pair(Progress::Poll);
    s.write_all(&frame(5, 0, 12345, 0, 8, 0, 0)).unwrap();
    let why = expect_peer_error(&mut t0, Duration::from_secs(5));
    assert!(why.contains("never requested"), "{why}");

    let (mut t0, mut s) = pair(Progress::Poll);
    s.write_all(&frame(99, 0, 0, 0, 0, 0, 0)).unwrap();
    let why = expect_peer_error(&mut t0, Duration::from_secs(5));
    assert!(why.contains("kind"), "{why}");
}

/// Bytes of each test region: above the mmap threshold the test fixes
/// (`mmap_each_region`), so each region is a mapping of its own whose
/// first and last pages hold nothing but the block's padding and the
/// allocator's header.
const REGION: usize = 256 * 1024;
const PAGE: usize = 4096;

/// PROT_NONE pages just before and after a region, restored on drop
/// (before the region is freed: the allocator reads its header there).
struct GuardPages {
    pages: Vec<usize>,
}

impl GuardPages {
    /// Guards the region at `start` (page-aligned, `len` bytes), if the
    /// pages on both sides lie in the region's own mapping; `None` (and a
    /// note) where they do not, as under valgrind, whose allocator packs
    /// blocks together.
    fn around(start: usize, len: usize) -> Option<GuardPages> {
        assert_eq!(start % PAGE, 0, "regions are page-aligned");
        if std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("vgpreload")) {
            eprintln!("guard pages skipped under valgrind (its allocator packs blocks together); canaries only");
            return None;
        }
        let (before, after) = (start - PAGE, start + len);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let own = maps.lines().any(|l| {
            let range = l.split_whitespace().next().unwrap_or("");
            let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
            let lo = usize::from_str_radix(lo, 16).unwrap_or(usize::MAX);
            let hi = usize::from_str_radix(hi, 16).unwrap_or(0);
            lo <= before && after + PAGE <= hi
        });
        assert!(
            own,
            "the region at {start:#x} is not inside one mapping with a page on each side"
        );
        for p in [before, after] {
            // SAFETY: both pages lie in the region's own anonymous
            // mapping (checked above) and hold only padding and the
            // allocator's header, which nothing touches until the region
            // is freed, after Drop has restored them.
            let rc = unsafe { libc::mprotect(p as *mut libc::c_void, PAGE, libc::PROT_NONE) };
            assert_eq!(rc, 0, "mprotect: {}", std::io::Error::last_os_error());
        }
        Some(GuardPages {
            pages: vec![before, after],
        })
    }
}

impl Drop for GuardPages {
    fn drop(&mut self) {
        for &p in &self.pages {
            // SAFETY: the same pages `around` protected, made accessible
            // again as they were.
            let rc = unsafe {
                libc::mprotect(
                    p as *mut libc::c_void,
                    PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            assert_eq!(rc, 0, "mprotect: {}", std::io::Error::last_os_error());
        }
    }
}

/// Makes glibc serve every block of 64 KiB or more by a mapping of its
/// own (fixing the threshold also stops glibc from raising it after a
/// large free, which would put a region on the heap among others).
fn mmap_each_region() {
    // SAFETY: mallopt only sets an allocator parameter; any value is
    // valid, and blocks already allocated are unaffected.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024) };
    assert_eq!(ok, 1, "mallopt(M_MMAP_THRESHOLD)");
}

/// The other regions, each filled with its own canary byte.
fn canaries(t0: &mut TcpTransport, n: u8) -> Vec<(LocalSlice, u8)> {
    (0..n)
        .map(|i| {
            let r = t0.alloc(REGION).unwrap();
            let all = LocalSlice::new(r, 0, REGION);
            let byte = 0xC0 + i;
            t0.region(all, &mut |b| b.fill(byte)).unwrap();
            (all, byte)
        })
        .collect()
}

fn canaries_intact(t0: &mut TcpTransport, regions: &[(LocalSlice, u8)]) -> bool {
    regions.iter().all(|&(all, byte)| {
        let mut ok = false;
        t0.region(all, &mut |b| ok = b.iter().all(|&x| x == byte))
            .unwrap();
        ok
    })
}

/// A region of 0xAB bytes with guard pages on both sides, between two
/// canaried regions on each side: the region, the canaries, the guards
/// (drop them before the region is freed).
fn guarded_region(
    t0: &mut TcpTransport,
) -> (
    ovbench_core::RegionId,
    Vec<(LocalSlice, u8)>,
    Option<GuardPages>,
) {
    let before = canaries(t0, 2);
    let region = t0.alloc(REGION).unwrap();
    let after = canaries(t0, 2);
    let all = LocalSlice::new(region, 0, REGION);
    t0.region(all, &mut |b| b.fill(0xAB)).unwrap();
    let mut start = 0usize;
    t0.region(all, &mut |b| start = b.as_ptr() as usize)
        .unwrap();
    let guards = GuardPages::around(start, REGION);
    (region, before.into_iter().chain(after).collect(), guards)
}

#[test]
fn forged_writes_and_reads_never_touch_memory() {
    mmap_each_region();
    let (mut t0, mut s) = pair(Progress::Poll);
    let (region, others, guards) = guarded_region(&mut t0);
    let all = LocalSlice::new(region, 0, REGION);
    // The registration ends where the region does: a forged range that
    // got past the checks would run into the guard page after it.
    let tail = REGION - 128;
    let mr_reg = t0.register(LocalSlice::new(region, tail, 128)).unwrap();
    let key = mr_reg.key.clone();
    let reg = u32::from_le_bytes(key.blob[0..4].try_into().unwrap());
    let check = u64::from_le_bytes(key.blob[4..12].try_into().unwrap());
    let untouched = |t0: &mut TcpTransport| {
        let mut ok = false;
        t0.region(all, &mut |b| ok = b.iter().all(|&x| x == 0xAB))
            .unwrap();
        ok
    };
    // (reg, check, offset, len, expected refusal status)
    let cases = [
        (reg, check ^ 1, 0, 16, 2),
        (reg + 7, check, 0, 16, 1),
        (reg, check, 120, 16, 3),
        (reg, check, u64::MAX - 3, 16, 3),
    ];
    for (i, &(r, c, off, len, status)) in cases.iter().enumerate() {
        let mut w = frame(2, 0, 100 + i as u64, off, len, r, c);
        w.extend(std::iter::repeat(0x11).take(len as usize));
        s.write_all(&w).unwrap();
        let ack = answer(&mut t0, &mut s, HDR);
        assert_eq!(ack[4], 3, "case {i}: a write ack");
        assert_eq!(
            u32::from_le_bytes([ack[5], ack[6], ack[7], 0]),
            status,
            "case {i}"
        );
        assert!(untouched(&mut t0), "case {i}: refused write changed memory");
        assert!(
            canaries_intact(&mut t0, &others),
            "case {i}: another region's canary changed"
        );
        s.write_all(&frame(4, 0, 200 + i as u64, off, len, r, c))
            .unwrap();
        let resp = answer(&mut t0, &mut s, HDR);
        assert_eq!(resp[4], 5, "case {i}: a read response");
        assert_eq!(u32::from_le_bytes([resp[5], resp[6], resp[7], 0]), status);
        assert_eq!(
            &resp[24..32],
            &0u64.to_le_bytes(),
            "a refusal carries no data"
        );
        assert!(
            canaries_intact(&mut t0, &others),
            "case {i}: after the read"
        );
    }
    // The honest key works, so the refusals above were not an accident.
    let mut w = frame(2, 0, 300, 0, 16, reg, check);
    w.extend([0x22; 16]);
    s.write_all(&w).unwrap();
    let ack = answer(&mut t0, &mut s, HDR);
    assert_eq!((ack[4], ack[5]), (3, 0));
    let mut placed = Vec::new();
    t0.region(LocalSlice::new(region, tail, 16), &mut |b| {
        placed.extend_from_slice(b)
    })
    .unwrap();
    assert_eq!(placed, [0x22; 16]);
    assert!(canaries_intact(&mut t0, &others), "the honest write");
    drop(guards);
}

#[test]
fn a_vanished_peer_fails_pending_work_quickly() {
    for progress in [Progress::Poll, Progress::Thread] {
        let (mut t0, s) = pair(progress);
        let region = t0.alloc(64).unwrap();
        let ls = LocalSlice::new(region, 0, 64);
        let mr_reg = t0.register(ls).unwrap();
        let mr = mr_reg.mr;
        let key = ovbench_core::RemoteKey {
            addr: 0,
            len: 64,
            blob: vec![0; 12],
        };
        t0.post_rma(1, RmaOp::read(ls, mr, &key, 0), 42).unwrap();
        let t = Instant::now();
        drop(s); // like kill -9: no goodbye
        let end = t + Duration::from_secs(5);
        let mut out = Vec::new();
        let mut read_failed = false;
        let mut conn_failed = false;
        while !(read_failed && conn_failed) {
            t0.poll(&mut out, None).unwrap();
            for c in out.drain(..) {
                match c {
                    Completion::Error {
                        ctx: Some(42),
                        peer: 1,
                        op: OpKind::Read,
                        ..
                    } => read_failed = true,
                    Completion::Error {
                        ctx: None,
                        peer: 1,
                        status,
                        ..
                    } => {
                        assert!(status.contains("rank 1"), "{status}");
                        conn_failed = true;
                    }
                    other => panic!("{other:?}"),
                }
            }
            assert!(Instant::now() < end, "no failure within 5 s");
        }
        let e = t0
            .post_send(1, Msg::new(b"x", None), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 1") && e.contains("gone"), "{e}");
    }
}

/// A short-header packet (the engine's one-packet eager message) from
/// rank 1: version, sequence number, tag and length as given, then
/// `body`, in one TCP message frame.
fn short_packet(version: u8, seq: u32, tag: u32, len: u32, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0x56, 0x4f, version, 14];
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&tag.to_le_bytes());
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(body);
    let mut f = frame(1, 0, 0, 0, p.len() as u64, 0, 0);
    f.extend_from_slice(&p);
    f
}

/// Rank 0 as the protocol engine over a real transport, its 8-byte
/// receive from rank 1 posted in the last 8 bytes of a guarded region
/// between canaried ones, meets `packet`: the receive's outcome (the
/// error's text, or its bytes), and whether every other byte, guarded
/// and canaried, is as it was.
fn engine_meets(packet: &[u8]) -> (Result<Vec<u8>, String>, bool) {
    let (mut t0, mut s) = pair(Progress::Poll);
    let (region, others, guards) = guarded_region(&mut t0);
    let clock: Arc<dyn Clock> = Arc::from(best_clock());
    let work = WorkLoop::calibrate(clock.clone(), Duration::from_millis(2));
    let cfg = EngineConfig {
        timeout: Duration::from_secs(5),
        ..EngineConfig::with_protocol(Protocol::Eager)
    };
    let mut comm = Comm::engine(Box::new(t0), clock, Box::new(work), cfg).unwrap();
    // The engine sees the transport's regions as its buffers.
    let buf = ovbench_core::Buf {
        region,
        len: REGION,
    };
    let room = buf.at(REGION - 8, 8);
    let r = comm.irecv(room, Some(1), Some(5)).unwrap();
    s.write_all(packet).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    let got = loop {
        match comm.test(r) {
            Ok(Some(_)) => {
                let mut b = Vec::new();
                comm.inspect(buf, &mut |m| b = m[REGION - 8..].to_vec())
                    .unwrap();
                break Ok(b);
            }
            Ok(None) if Instant::now() < end => continue,
            Ok(None) => break Err("no outcome within 5 s".to_string()),
            Err(e) => break Err(e.to_string()),
        }
    };
    let mut intact = true;
    comm.inspect(buf, &mut |m| {
        intact &= m[..REGION - 8].iter().all(|&x| x == 0xAB);
    })
    .unwrap();
    for &(slice, byte) in &others {
        let b = ovbench_core::Buf {
            region: slice.region,
            len: slice.len,
        };
        comm.inspect(b, &mut |m| intact &= m.iter().all(|&x| x == byte))
            .unwrap();
    }
    // The guards go first: freeing the region reads the allocator's
    // header in the page before it.
    drop(guards);
    drop(comm);
    (got, intact)
}

#[test]
fn forged_short_headers_are_refused_naming_the_peer_and_never_touch_memory() {
    mmap_each_region();
    let body = [0x5A; 8];
    let refused = [
        // Says more bytes than follow (they would run past the receive).
        (short_packet(2, 0, 5, 4096, &body), "4096 payload bytes"),
        // More bytes than the receive holds.
        (short_packet(2, 0, 5, 64, &[0x5A; 64]), "holds only 8"),
        // Out of order.
        (short_packet(2, 5, 5, 8, &body), "sequence 5"),
        // Another build's wire version.
        (short_packet(1, 0, 5, 8, &body), "version 1"),
        // Cut short inside its header.
        (
            {
                let mut f = frame(1, 0, 0, 0, 10, 0, 0);
                f.extend_from_slice(&short_packet(2, 0, 5, 8, &body)[HDR..HDR + 10]);
                f
            },
            "shorter",
        ),
    ];
    for (i, (packet, why)) in refused.iter().enumerate() {
        let (got, intact) = engine_meets(packet);
        let e = got.expect_err(&format!("case {i} accepted"));
        assert!(e.contains("rank 1") && e.contains(why), "case {i}: {e}");
        assert!(intact, "case {i}: memory outside the receive changed");
    }
    // The honest packet lands, so the refusals were the forgeries'.
    let (got, intact) = engine_meets(&short_packet(2, 0, 5, 8, &body));
    assert_eq!(got, Ok(body.to_vec()));
    assert!(
        intact,
        "the honest packet changed memory outside its receive"
    );
}
