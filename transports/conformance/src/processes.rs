//! Two real processes of one fabric transport (a test binary re-runs
//! itself as rank 1), so shared memory, CMA and sockets cross a process
//! boundary as in a run: messages, the native tag path, a write and a read
//! checked by the other side, and a rank killed with SIGKILL reported by
//! the survivor within 5 s, naming it. The UCX and libfabric crates'
//! `processes` tests (no harness) run it; a failure panics.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use ovbench_core::{
    Completion, LocalSlice, MrHandle, Msg, RemoteKey, RmaOp, TagRecv, TagSend, Tagged, Transport,
};

const DEADLINE: Duration = Duration::from_secs(20);
const LEN: usize = 1 << 20;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

thread_local! {
    /// Completions seen while waiting for another one, kept for later waits.
    static STASH: std::cell::RefCell<Vec<Completion>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Poll until a completion satisfies `want`; error completions fail.
fn wait<T: Transport>(t: &mut T, want: &dyn Fn(&Completion) -> bool) -> Completion {
    let end = Instant::now() + DEADLINE;
    let me = t.info().rank;
    let mut out = Vec::new();
    loop {
        let hit = STASH.with(|s| {
            let mut s = s.borrow_mut();
            s.extend(out.drain(..));
            if let Some(c) = s.iter().find(|c| matches!(c, Completion::Error { .. })) {
                panic!("rank {me}: {c:?}");
            }
            s.iter().position(want).map(|i| s.remove(i))
        });
        if let Some(c) = hit {
            return c;
        }
        assert!(Instant::now() < end, "rank {me}: timed out");
        t.poll(&mut out, None).unwrap();
    }
}

/// The transport's tagged protocol (these harnesses run on transports
/// that have one).
fn tagged<T: Transport>(t: &mut T) -> &mut dyn Tagged {
    t.tagged().expect("a transport with a tagged protocol")
}

fn recv<T: Transport>(t: &mut T) -> Vec<u8> {
    match wait(t, &|c| matches!(c, Completion::Recv { .. })) {
        Completion::Recv { data, .. } => data,
        _ => unreachable!(),
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// What rank 0 keeps from the exchange: rank 1's key, its own
/// registration and a buffer inside it.
#[derive(Debug)]
pub struct Kept {
    pub key: RemoteKey,
    pub mr: MrHandle,
    pub buf: LocalSlice,
}

/// The part both ranks run once connected. Rank 0 drives, rank 1 answers.
/// Rank 0 gets rank 1's key, its own registration and a buffer back.
fn exchange<T: Transport>(t: &mut T) -> Option<Kept> {
    let info = t.info();
    let me = info.rank;
    let sync_ok = info.caps.native_sync_send;
    let peer = 1 - me;
    let region = t.alloc(2 * LEN).unwrap();
    let mine = LocalSlice::new(region, 0, LEN);
    let other = LocalSlice::new(region, LEN, LEN);
    let reg = t.register(LocalSlice::new(region, 0, 2 * LEN)).unwrap();
    let mr = reg.mr;
    // Messages, both ways.
    for i in 0..100u32 {
        if me == 0 {
            t.post_send(peer, Msg::new(&i.to_le_bytes(), None), 1)
                .unwrap();
            assert_eq!(recv(t), (i + 1).to_le_bytes());
        } else {
            let m = recv(t);
            let v = u32::from_le_bytes(m[..4].try_into().unwrap());
            t.post_send(peer, Msg::new(&(v + 1).to_le_bytes(), None), 1)
                .unwrap();
        }
    }
    // Native tags with wildcards.
    for i in 0..100u32 {
        tagged(t)
            .trecv(TagRecv::new(None, None, other.sub(0, 64)), 2)
            .unwrap();
        if me == 0 {
            let sync = sync_ok && i % 10 == 0;
            tagged(t)
                .tsend(TagSend::new(peer, i, mine.sub(0, 8), sync), 3)
                .unwrap();
        }
        let c = wait(t, &|c| matches!(c, Completion::TaggedRecv { .. }));
        assert!(
            matches!(c, Completion::TaggedRecv { peer: p, len: 8, .. } if p == peer),
            "{c:?}"
        );
        if me == 1 {
            let Completion::TaggedRecv { tag, .. } = c else {
                unreachable!()
            };
            tagged(t)
                .tsend(TagSend::new(peer, tag, mine.sub(0, 8), false), 3)
                .unwrap();
        }
    }
    // Rank 1 hands out its key; rank 0 writes its pattern there and reads
    // rank 1's pattern back; rank 1 checks the write.
    t.region(mine, &mut |b| b.copy_from_slice(&pattern(LEN, me as u8)))
        .unwrap();
    if me == 1 {
        let mut msg = Vec::new();
        reg.key.encode(&mut msg);
        t.post_send(peer, Msg::new(&msg, None), 4).unwrap();
        assert_eq!(recv(t), b"written");
        t.region(other, &mut |b| {
            assert!(
                b == pattern(LEN, 0).as_slice(),
                "rank 0's write is not here"
            )
        })
        .unwrap();
        t.post_send(peer, Msg::new(b"checked", None), 5).unwrap();
        None
    } else {
        let (key, _) = RemoteKey::decode(&recv(t)).unwrap();
        t.post_rma(peer, RmaOp::write(mine, mr, &key, LEN as u64), 6)
            .unwrap();
        wait(t, &|c| matches!(c, Completion::Write { ctx: 6 }));
        t.post_send(peer, Msg::new(b"written", None), 7).unwrap();
        t.post_rma(peer, RmaOp::read(other, mr, &key, 0), 8)
            .unwrap();
        wait(t, &|c| matches!(c, Completion::Read { ctx: 8 }));
        t.region(other, &mut |b| {
            assert!(
                b == pattern(LEN, 1).as_slice(),
                "read brought the wrong bytes"
            )
        })
        .unwrap();
        assert_eq!(recv(t), b"checked");
        Some(Kept {
            key,
            mr,
            buf: other,
        })
    }
}

/// Both ranks of a two-rank job that its own launcher started (MPI's
/// mpirun: the transport knows its peer without an address exchange):
/// connect, then the same exchange as [`parent`] and [`child`] — messages
/// both ways, the native tag path with wildcards, a key through the wire,
/// a write checked by its target and a read. Rank 0 gets what it kept.
pub fn in_job<T: Transport>(t: &mut T) -> Option<Kept> {
    t.connect(&[]).unwrap_or_else(|e| panic!("connect: {e}"));
    exchange(t)
}

/// Rank 1: print the address, read rank 0's, run the exchange, then keep
/// polling until killed or told to stop (at most 30 s). `t` is rank 1 of
/// the transport [`parent`] was asked to run.
pub fn child<T: Transport>(mut t: T) {
    println!("ADDR {}", hex(&t.address()));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let a0 = unhex(line.trim());
    let addrs = vec![a0, t.address()];
    t.connect(&addrs).unwrap();
    let _ = exchange(&mut t);
    println!("DONE");
    let end = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    while Instant::now() < end {
        if t.poll(&mut out, None).is_err() {
            return;
        }
        out.clear();
    }
}

struct Kid {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

fn spawn(child_env: &str, tls: &str) -> Kid {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(child_env, tls)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    Kid {
        child,
        stdin,
        lines,
    }
}

fn expect_line(k: &mut Kid, prefix: &str) -> String {
    loop {
        let l = k.lines.next().expect("rank 1 exited early").unwrap();
        if let Some(rest) = l.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    }
}

/// Rank 0 of one scenario over `tls`, opened by `open`: re-runs this
/// binary as rank 1 with `tls` in the environment variable `child_env`
/// (whose `main` then calls [`child`]). `kill` also checks the loss of
/// rank 1: after SIGKILL, `provoke` posts an operation towards it, and an
/// error completion naming rank 1 must come within 5 s. Rank 1 ends
/// killed either way: its pid comes back, for the caller to clear what a
/// killed process leaves behind.
pub fn parent<T: Transport>(
    child_env: &str,
    tls: &str,
    kill: bool,
    open: impl FnOnce(u32) -> T,
    provoke: impl FnOnce(&mut T, &Kept),
) -> u32 {
    let mut k = spawn(child_env, tls);
    let a1 = unhex(&expect_line(&mut k, "ADDR"));
    let mut t = open(0);
    writeln!(k.stdin, "{}", hex(&t.address())).unwrap();
    let addrs = vec![t.address(), a1];
    // connect is collective: rank 1 connects in its own process meanwhile.
    t.connect(&addrs).unwrap_or_else(|e| panic!("{tls}: {e}"));
    let kept = exchange(&mut t).expect("rank 0 keeps rank 1's key");
    expect_line(&mut k, "DONE");
    if kill {
        k.child.kill().unwrap();
        k.child.wait().unwrap();
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(5);
        provoke(&mut t, &kept);
        let mut out = Vec::new();
        loop {
            t.poll(&mut out, None).unwrap();
            if let Some(c) = out.iter().find(|c| matches!(c, Completion::Error { .. })) {
                assert!(matches!(c, Completion::Error { peer: 1, .. }), "{c:?}");
                eprintln!(
                    "{tls}: loss of rank 1 reported after {:?}: {c:?}",
                    t0.elapsed()
                );
                break;
            }
            assert!(
                Instant::now() < end,
                "{tls}: rank 1 killed, nothing reported in 5 s: {out:?}"
            );
        }
    } else {
        k.child.kill().unwrap();
        k.child.wait().unwrap();
    }
    k.child.id()
}
