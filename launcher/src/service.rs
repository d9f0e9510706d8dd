//! The bootstrap service: a key-value store with barrier and allgather for
//! the ranks of one job, on a TCP socket guarded by the job's secret.
//!
//! A connection is served only once it has answered a fresh challenge with
//! an HMAC of the secret (see [`crate::wire`]); the secret itself never
//! crosses the socket.
//!
//! The launcher runs it on loopback; under srun/mpirun rank 0 runs it, on
//! loopback too when the whole job is on its node (see
//! [`crate::client::service_bind_addr`]). One
//! thread accepts, one thread serves each rank. A rank whose connection
//! drops without a goodbye is recorded as dead, and everyone waiting on the
//! service gets an error naming it instead of waiting out the deadline.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::secret;
use crate::wire::{
    read_frame, write_frame, CollKind, ReadError, Request, Response, MAX_RANKS, MAX_REQUEST,
};

/// How long a new connection has for its whole handshake (hello, then the
/// answer to the challenge).
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often blocked threads look at the stop flag.
const TICK: Duration = Duration::from_millis(100);
/// A stalled reader must not block a service thread for longer than this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections beyond one per rank (refused attempts still handshaking).
const EXTRA_CONNS: usize = 64;
/// Total bytes of values the store will hold; a runaway rank is refused.
const MAX_STORED: usize = 256 * 1024 * 1024;

/// Where each rank stands with the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presence {
    NotYet,
    Connected,
    /// Said goodbye: finished normally.
    Left,
    /// Connection dropped or broke the protocol.
    Died,
}

/// One step of the ranks' common sequence of collectives.
struct Coll {
    kind: CollKind,
    contrib: Vec<Option<Vec<u8>>>,
    arrived: u32,
    result: Option<Arc<Vec<Vec<u8>>>>,
    taken: u32,
    mismatch: Option<String>,
    /// The watchdog has said which ranks this step waits for.
    warned: bool,
}

struct State {
    kv: HashMap<String, Vec<u8>>,
    stored: usize,
    presence: Vec<Presence>,
    died: Vec<u32>,
    colls: BTreeMap<u64, Coll>,
    next_step: Vec<u64>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    secret: Vec<u8>,
    size: u32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for the state to change, a tick at most (so that a stop is
    /// seen): the guard again, or the request's answer where it ends here,
    /// `late()` past `deadline` or the service stopping.
    fn wait<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        deadline: Instant,
        late: impl FnOnce() -> String,
    ) -> Result<MutexGuard<'a, State>, Response> {
        let now = Instant::now();
        if now >= deadline {
            return Err(Response::Err(late()));
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(Response::Err(
                "the bootstrap service is shutting down".into(),
            ));
        }
        let st = self.cv.wait_timeout(st, (deadline - now).min(TICK));
        Ok(st.unwrap_or_else(|e| e.into_inner()).0)
    }
}

/// A running bootstrap service; dropping it stops it and joins its threads.
pub struct Service {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Service({}, {} ranks)", self.addr, self.shared.size)
    }
}

impl Service {
    /// Binds `bind` (port 0 for an ephemeral one) and serves a job of
    /// `size` ranks that must prove they hold `secret`.
    ///
    /// `bind` should be loopback unless ranks on other hosts must reach
    /// it: the local launcher passes 127.0.0.1, a hosting rank under
    /// srun/mpirun [`crate::client::service_bind_addr`].
    pub fn start(bind: SocketAddr, size: u32, secret: &[u8]) -> Result<Service> {
        if size == 0 || size > MAX_RANKS {
            bail!("a job needs between 1 and {MAX_RANKS} ranks, not {size}");
        }
        if secret.is_empty() {
            bail!("the bootstrap service needs a non-empty job secret");
        }
        let listener = TcpListener::bind(bind).with_context(|| {
            format!("cannot open the bootstrap service on {bind}; if the port is taken, set OVBENCH_BOOTSTRAP=host:port to another one")
        })?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                kv: HashMap::new(),
                stored: 0,
                presence: vec![Presence::NotYet; size as usize],
                died: Vec::new(),
                colls: BTreeMap::new(),
                next_step: vec![0; size as usize],
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            secret: secret.to_vec(),
            size,
        });
        let sh = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("ovbench-bootstrap".into())
            .spawn(move || accept_loop(listener, sh))
            .context("cannot start the bootstrap service thread")?;
        Ok(Service {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The address ranks connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ranks whose connection dropped without a goodbye, first one first.
    pub fn died(&self) -> Vec<u32> {
        self.shared.lock().died.clone()
    }

    /// Waits until every rank has said goodbye or died, or `deadline`,
    /// or this process is asked to stop (`ovbench_core::stop`): the rank
    /// hosting the service is then being torn down with the job (srun
    /// ends a step so once a task died), and a rank that never joined
    /// would keep it waiting out the whole deadline. Returns whether they
    /// all did.
    pub fn wait_all_gone(&self, deadline: Instant) -> bool {
        let mut st = self.shared.lock();
        loop {
            if st
                .presence
                .iter()
                .all(|p| matches!(p, Presence::Left | Presence::Died))
            {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || ovbench_core::stop::check().is_err() {
                return false;
            }
            st = self
                .shared
                .cv
                .wait_timeout(st, (deadline - now).min(TICK))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.cv.notify_all();
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    let max_conns = shared.size as usize + EXTRA_CONNS;
    while !shared.stop.load(Ordering::Relaxed) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(100u8));
        if !matches!(ready, Ok(n) if n > 0) {
            continue;
        }
        let Ok((stream, _peer)) = listener.accept() else {
            continue;
        };
        conns.retain(|h| !h.is_finished());
        if conns.len() >= max_conns {
            // A connection flood must not exhaust threads; ranks retry.
            drop(stream);
            continue;
        }
        let sh = Arc::clone(&shared);
        if let Ok(h) = std::thread::Builder::new()
            .name("ovbench-bootstrap-conn".into())
            .spawn(move || serve(stream, sh))
        {
            conns.push(h);
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

/// Serves one connection: the handshake first, then requests until goodbye.
fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(TICK)).is_err()
        || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let Some(rank) = handshake(&mut stream, &shared) else {
        return;
    };
    #[cfg(feature = "test-hooks")]
    die_if_asked(&shared);
    loop {
        let body = match read_frame(&mut stream, MAX_REQUEST, None, Some(&shared.stop)) {
            Ok(b) => b,
            Err(ReadError::Stopped) => return,
            Err(ReadError::Closed) => return mark_died(&shared, rank),
            Err(ReadError::TimedOut) => continue,
            Err(ReadError::Other(e)) => {
                let msg = format!("rank {rank}: bad bootstrap frame: {e:#}");
                let _ = write_frame(&mut stream, &Response::Err(msg).encode());
                return mark_died(&shared, rank);
            }
        };
        let req = match Request::decode(&body) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("rank {rank}: bad bootstrap request: {e:#}");
                let _ = write_frame(&mut stream, &Response::Err(msg).encode());
                return mark_died(&shared, rank);
            }
        };
        if let Request::Stall {
            waited_ms,
            timeout_ms,
            peer,
            text,
        } = &req
        {
            // No reply: the rank sent it from a wait loop and reads none.
            let ms = |m: &u32| Duration::from_millis(u64::from(*m));
            crate::watchdog::print_stall(rank, ms(waited_ms), ms(timeout_ms), *peer, text);
            continue;
        }
        let bye = req == Request::Bye;
        let resp = handle(&shared, rank, req);
        if write_frame(&mut stream, &resp.encode()).is_err() && !bye {
            return mark_died(&shared, rank);
        }
        if bye {
            return;
        }
    }
}

/// Runs the challenge–response: reads the hello, sends a fresh nonce,
/// checks the answer, and returns the rank, or refuses with an error frame
/// saying why. The whole exchange must finish within [`HELLO_TIMEOUT`].
fn handshake(stream: &mut TcpStream, shared: &Shared) -> Option<u32> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let verdict = check_peer(stream, shared, deadline);
    match verdict {
        Ok(rank) => {
            if write_frame(stream, &Response::Ok.encode()).is_err() {
                mark_died(shared, rank);
                return None;
            }
            Some(rank)
        }
        Err(Refusal::Silent) => None,
        Err(Refusal::Say(msg)) => {
            let _ = write_frame(stream, &Response::Err(msg).encode());
            None
        }
    }
}

/// Why a connection is not admitted.
enum Refusal {
    /// Closed, timed out or the service is stopping: nobody to tell.
    Silent,
    /// Answer with this error.
    Say(String),
}

impl From<String> for Refusal {
    fn from(msg: String) -> Refusal {
        Refusal::Say(msg)
    }
}

fn read_request(
    stream: &mut TcpStream,
    shared: &Shared,
    deadline: Instant,
    what: &str,
) -> Result<Request, Refusal> {
    let body = match read_frame(stream, MAX_REQUEST, Some(deadline), Some(&shared.stop)) {
        Ok(b) => b,
        Err(ReadError::TimedOut) => {
            return Err(Refusal::Say(format!(
                "no {what} within {} s of connecting",
                HELLO_TIMEOUT.as_secs()
            )))
        }
        Err(ReadError::Closed | ReadError::Stopped) => return Err(Refusal::Silent),
        Err(ReadError::Other(e)) => return Err(Refusal::Say(format!("bad {what}: {e:#}"))),
    };
    Request::decode(&body).map_err(|e| Refusal::Say(format!("bad {what}: {e:#}")))
}

/// The handshake up to the verdict; the secret is checked before anything
/// else about the rank is believed or told.
fn check_peer(stream: &mut TcpStream, shared: &Shared, deadline: Instant) -> Result<u32, Refusal> {
    let (rank, size) = match read_request(stream, shared, deadline, "hello")? {
        Request::Hello { rank, size } => (rank, size),
        _ => {
            return Err("the first request must be a hello (rank and job size)"
                .to_string()
                .into())
        }
    };
    let nonce =
        secret::nonce().map_err(|e| format!("the service cannot make a challenge: {e:#}"))?;
    write_frame(stream, &Response::Challenge(nonce).encode()).map_err(|_| Refusal::Silent)?;
    let mac = match read_request(stream, shared, deadline, "answer to the challenge")? {
        Request::Proof { mac } => mac,
        _ => {
            return Err(format!(
                "rank {rank}: missing proof of the job secret: the request after the hello must answer the challenge"
            )
            .into())
        }
    };
    if mac.is_empty() {
        return Err(format!("rank {rank}: missing job secret: the rank has none to prove").into());
    }
    if !secret::verify(&shared.secret, &nonce, rank, size, &mac) {
        return Err(format!(
            "rank {rank}: wrong job secret: the answer to this connection's challenge does not match (this service belongs to another ovbench job, or the answer was replayed from another connection)"
        )
        .into());
    }
    if size != shared.size {
        return Err(format!(
            "this job has {} ranks, the client believes {size}",
            shared.size
        )
        .into());
    }
    if rank >= size {
        return Err(format!("rank {rank} out of range for {size} ranks").into());
    }
    let mut st = shared.lock();
    let p = &mut st.presence[rank as usize];
    if *p == Presence::NotYet {
        *p = Presence::Connected;
        Ok(rank)
    } else {
        Err(format!("rank {rank} has already connected once").into())
    }
}

/// Test hook (feature `test-hooks`, never in a release build):
/// `OVBENCH_TEST_SERVICE_DIE=N` stops the service once N ranks have
/// joined, closing every connection, as a launcher that died during
/// start-up would (tests/faults.rs).
#[cfg(feature = "test-hooks")]
fn die_if_asked(shared: &Shared) {
    let Some(n) = std::env::var("OVBENCH_TEST_SERVICE_DIE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return;
    };
    let joined = shared
        .lock()
        .presence
        .iter()
        .filter(|p| **p != Presence::NotYet)
        .count();
    if joined >= n {
        let _ = writeln!(
            std::io::stderr(),
            "ovbench: test hook: the bootstrap service stops after {joined} ranks joined"
        );
        shared.stop.store(true, Ordering::Relaxed);
        shared.cv.notify_all();
    }
}

fn mark_died(shared: &Shared, rank: u32) {
    let mut st = shared.lock();
    if st.presence[rank as usize] == Presence::Connected {
        st.presence[rank as usize] = Presence::Died;
        st.died.push(rank);
    }
    drop(st);
    shared.cv.notify_all();
}

fn died_message(st: &State) -> Option<String> {
    let first = st.died.first()?;
    Some(format!(
        "rank {first} disconnected from the bootstrap service without finishing (it probably crashed or was killed)"
    ))
}

fn handle(shared: &Shared, rank: u32, req: Request) -> Response {
    match req {
        Request::Put { key, value } => {
            let mut st = shared.lock();
            let old = st.kv.get(&key).map_or(0, Vec::len);
            let stored = st.stored - old + value.len();
            if stored > MAX_STORED {
                return Response::Err(format!(
                    "rank {rank}: the bootstrap store is full ({MAX_STORED} bytes)"
                ));
            }
            st.stored = stored;
            st.kv.insert(key, value);
            drop(st);
            shared.cv.notify_all();
            Response::Ok
        }
        Request::Get { wait_ms, key } => get(shared, &key, wait_ms),
        Request::Collective {
            kind,
            wait_ms,
            data,
        } => collective(shared, rank, kind, wait_ms, data),
        Request::Bye => {
            let mut st = shared.lock();
            st.presence[rank as usize] = Presence::Left;
            drop(st);
            shared.cv.notify_all();
            Response::Ok
        }
        Request::Hello { .. } | Request::Proof { .. } => Response::Err(format!(
            "rank {rank}: handshake request after the handshake"
        )),
        // Answered by `serve` itself (with nothing).
        Request::Stall { .. } => Response::Ok,
    }
}

fn get(shared: &Shared, key: &str, wait_ms: u32) -> Response {
    let deadline = Instant::now() + Duration::from_millis(u64::from(wait_ms));
    let mut st = shared.lock();
    loop {
        if let Some(v) = st.kv.get(key) {
            return Response::Value(v.clone());
        }
        if let Some(msg) = died_message(&st) {
            return Response::Err(format!("waiting for key {key:?}: {msg}"));
        }
        let late = || {
            format!(
                "key {key:?} did not appear within {:.1} s; the rank that should publish it may be stuck",
                wait_ms as f64 / 1e3
            )
        };
        st = match shared.wait(st, deadline, late) {
            Ok(st) => st,
            Err(answer) => return answer,
        };
    }
}

fn collective(shared: &Shared, rank: u32, kind: CollKind, wait_ms: u32, data: Vec<u8>) -> Response {
    let deadline = Instant::now() + Duration::from_millis(u64::from(wait_ms));
    let size = shared.size;
    let mut st = shared.lock();
    let step = st.next_step[rank as usize];
    st.next_step[rank as usize] += 1;
    let coll = st.colls.entry(step).or_insert_with(|| Coll {
        kind,
        contrib: vec![None; size as usize],
        arrived: 0,
        result: None,
        taken: 0,
        mismatch: None,
        warned: false,
    });
    if coll.kind != kind && coll.mismatch.is_none() {
        coll.mismatch = Some(format!(
            "collective #{step}: rank {rank} called {kind:?} while others called {:?}; the ranks disagree on the program",
            coll.kind
        ));
    }
    coll.contrib[rank as usize] = Some(data);
    coll.arrived += 1;
    if coll.arrived == size {
        let all = coll
            .contrib
            .iter_mut()
            .map(|c| c.take().unwrap_or_default());
        coll.result = Some(Arc::new(all.collect()));
        shared.cv.notify_all();
    }
    loop {
        let Some(coll) = st.colls.get_mut(&step) else {
            return Response::Err(format!("collective #{step} vanished (service bug)"));
        };
        if let Some(msg) = &coll.mismatch {
            return Response::Err(msg.clone());
        }
        if let Some(result) = coll.result.clone() {
            coll.taken += 1;
            if coll.taken == size {
                st.colls.remove(&step);
            }
            return match kind {
                CollKind::Barrier => Response::Ok,
                CollKind::Allgather => Response::Gathered(result.to_vec()),
            };
        }
        // The watchdog's line, once per step, at a quarter of the wait.
        let waited = Duration::from_millis(u64::from(wait_ms))
            .saturating_sub(deadline.saturating_duration_since(Instant::now()));
        if !coll.warned && waited >= Duration::from_millis(u64::from(wait_ms)) / 4 {
            coll.warned = true;
            let absent: Vec<u32> = (0..size)
                .filter(|&r| coll.contrib[r as usize].is_none())
                .collect();
            let _ = writeln!(
                std::io::stderr(),
                "ovbench: watchdog: the ranks' exchange through the bootstrap service ({kind:?} #{step}) has waited {:.1} s for rank(s) {} (the job ends at --timeout {:.0} s)",
                waited.as_secs_f64(),
                list(&absent),
                f64::from(wait_ms) / 1e3
            );
        }
        let missing: Vec<u32> = (0..size)
            .filter(|&r| coll.contrib[r as usize].is_none() && r != rank)
            .collect();
        let gone: Vec<u32> = missing
            .iter()
            .copied()
            .filter(|&r| matches!(st.presence[r as usize], Presence::Left | Presence::Died))
            .collect();
        if !gone.is_empty() {
            let why = died_message(&st)
                .unwrap_or_else(|| format!("rank {} already finished and left the job", gone[0]));
            return Response::Err(format!("{kind:?} #{step}: {why}"));
        }
        let late = || {
            format!(
                "{kind:?} #{step} timed out after {:.1} s; still waiting for rank(s) {}",
                wait_ms as f64 / 1e3,
                list(&missing)
            )
        };
        st = match shared.wait(st, deadline, late) {
            Ok(st) => st,
            Err(answer) => return answer,
        };
    }
}

/// "1, 2, 3" (shortened for huge jobs).
fn list(ranks: &[u32]) -> String {
    let mut s: Vec<String> = ranks.iter().take(16).map(u32::to_string).collect();
    if ranks.len() > 16 {
        s.push(format!("and {} more", ranks.len() - 16));
    }
    s.join(", ")
}

#[cfg(test)]
mod tests;
