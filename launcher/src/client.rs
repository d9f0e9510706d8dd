//! The rank's side of the bootstrap service: put/get, barrier, allgather.
//!
//! Every call has a deadline (the timeout given at connect). The service
//! answers a wait it cannot satisfy with an error that names the rank at
//! fault, which this client passes on verbatim.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::role::RankEnv;
use crate::secret;
use crate::service::Service;
use crate::wire::{
    read_frame, write_frame, CollKind, ReadError, Request, Response, MAX_KEY, MAX_RESPONSE,
    MAX_VALUE, MAX_WAIT_MS,
};

/// Socket read timeout: how often a blocked read re-checks its deadline.
const TICK: Duration = Duration::from_millis(100);
/// Extra time a reply may take beyond the wait the service was asked for.
const REPLY_GRACE: Duration = Duration::from_secs(5);

/// A rank's connection to the job's bootstrap service.
pub struct Bootstrap {
    stream: TcpStream,
    addr: SocketAddr,
    rank: u32,
    size: u32,
    timeout: Duration,
    /// The service itself, when this rank hosts it (rank 0 under srun/mpirun).
    service: Option<Service>,
    finished: bool,
    /// Held for each request, so the watchdog's stall report
    /// ([`crate::watchdog`]) never cuts into one.
    io: Arc<Mutex<()>>,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bootstrap(rank {}/{} at {})",
            self.rank, self.size, self.addr
        )
    }
}

impl Bootstrap {
    /// Connects this rank to its job's service, starting the service first
    /// when `env` says this rank hosts it. Retries a refused connection
    /// (the host rank may still be starting) until `timeout`.
    pub fn connect(env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        let mut service = None;
        let mut addr = env.bootstrap.clone();
        if env.hosts_service {
            let bind = service_bind_addr(env)?;
            let s = Service::start(bind, env.size, env.secret.as_bytes())?;
            addr = if s.addr().ip().is_unspecified() {
                format!("127.0.0.1:{}", s.addr().port())
            } else {
                s.addr().to_string()
            };
            service = Some(s);
        }
        let mut b = Self::connect_to(&addr, env.rank, env.size, env.secret.as_bytes(), timeout)
            .with_context(|| {
                format!(
                    "rank {} cannot join the bootstrap service ({})",
                    env.rank,
                    env.source.hint()
                )
            })?;
        b.service = service;
        Ok(b)
    }

    /// Connects to the service at `addr` ("host:port") as `rank` of `size`,
    /// proving it holds `secret` by answering the service's challenge (the
    /// secret itself is never sent).
    pub fn connect_to(
        addr: &str,
        rank: u32,
        size: u32,
        secret: &[u8],
        timeout: Duration,
    ) -> Result<Bootstrap> {
        if secret.is_empty() {
            bail!("rank {rank} has no job secret to join the bootstrap service with (OVBENCH_SECRET is empty)");
        }
        let deadline = Instant::now() + timeout;
        let candidates = resolve_all(addr)?;
        let (stream, sockaddr) = 'connected: loop {
            let mut last = None;
            for sa in &candidates {
                let left = deadline.saturating_duration_since(Instant::now());
                match TcpStream::connect_timeout(sa, left.clamp(TICK, Duration::from_secs(5))) {
                    Ok(s) => break 'connected (s, *sa),
                    Err(e) => last = Some(e),
                }
            }
            // Refused: the hosting rank may still be starting; retry,
            // unless this rank is being stopped.
            if ovbench_core::stop::check().is_err() {
                bail!("rank {rank}: stopped by a signal while connecting to the bootstrap service at {addr}");
            }
            if Instant::now() + Duration::from_millis(50) >= deadline {
                bail!(
                    "cannot reach the bootstrap service at {addr} within {:.1} s: {}",
                    timeout.as_secs_f64(),
                    last.map_or_else(|| "no address".to_string(), |e| e.to_string())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(TICK))?;
        stream.set_write_timeout(Some(timeout.max(Duration::from_secs(1))))?;
        let mut b = Bootstrap {
            stream,
            addr: sockaddr,
            rank,
            size,
            timeout,
            service: None,
            finished: false,
            io: Arc::new(Mutex::new(())),
        };
        let nonce = match b.call(&Request::Hello { rank, size }, Duration::ZERO)? {
            Response::Challenge(nonce) => nonce,
            other => return Err(unexpected(other, "hello")),
        };
        let mac = secret::proof(secret, &nonce, rank, size).to_vec();
        match b.call(&Request::Proof { mac }, Duration::ZERO)? {
            Response::Ok => Ok(b),
            other => Err(unexpected(other, "handshake")),
        }
    }

    /// The stall watchdog on this connection, for
    /// `ovbench_core::watch::install`.
    pub fn watch(&self) -> Result<crate::watchdog::BootstrapWatch> {
        let stream = self
            .stream
            .try_clone()
            .context("a second handle on the bootstrap connection")?;
        Ok(crate::watchdog::BootstrapWatch::new(
            stream,
            self.addr,
            self.rank,
            Arc::clone(&self.io),
        ))
    }

    /// The service's address this client is connected to.
    pub fn service_addr(&self) -> SocketAddr {
        self.addr
    }

    /// This rank's number, 0-based.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Stores `val` under `key` (overwriting), visible to every rank.
    pub fn put(&mut self, key: &str, val: &[u8]) -> Result<()> {
        check_key(key)?;
        if val.len() > MAX_VALUE {
            bail!(
                "value for {key:?} is {} bytes; the bootstrap service stores at most {MAX_VALUE}",
                val.len()
            );
        }
        let req = Request::Put {
            key: key.into(),
            value: val.to_vec(),
        };
        match self.call(&req, Duration::ZERO)? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other, "put")),
        }
    }

    /// The value under `key`, waiting until some rank stores it (at most
    /// the connect timeout).
    pub fn get(&mut self, key: &str) -> Result<Vec<u8>> {
        check_key(key)?;
        let req = Request::Get {
            wait_ms: self.wait_ms(),
            key: key.into(),
        };
        match self.call(&req, self.timeout)? {
            Response::Value(v) => Ok(v),
            other => Err(unexpected(other, "get")),
        }
    }

    /// Returns once every rank has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        let req = Request::Collective {
            kind: CollKind::Barrier,
            wait_ms: self.wait_ms(),
            data: Vec::new(),
        };
        match self.call(&req, self.timeout)? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other, "barrier")),
        }
    }

    /// Every rank's `mine`, in rank order (this is how transport addresses
    /// are exchanged before `Transport::connect`).
    pub fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        if mine.len() > MAX_VALUE {
            bail!(
                "allgather contribution is {} bytes; the bootstrap service takes at most {MAX_VALUE}",
                mine.len()
            );
        }
        let req = Request::Collective {
            kind: CollKind::Allgather,
            wait_ms: self.wait_ms(),
            data: mine.to_vec(),
        };
        match self.call(&req, self.timeout)? {
            Response::Gathered(all) if all.len() == self.size as usize => Ok(all),
            Response::Gathered(all) => bail!(
                "allgather returned {} entries for {} ranks",
                all.len(),
                self.size
            ),
            other => Err(unexpected(other, "allgather")),
        }
    }

    /// Every rank's `mine` at `root` (in rank order); `None` elsewhere.
    pub fn gather_to_root(&mut self, mine: &[u8], root: u32) -> Result<Option<Vec<Vec<u8>>>> {
        let all = self.allgather(mine)?;
        Ok((self.rank == root).then_some(all))
    }

    /// `root`'s `data` on every rank (other ranks' `data` is ignored).
    pub fn broadcast(&mut self, root: u32, data: &[u8]) -> Result<Vec<u8>> {
        if root >= self.size {
            bail!("broadcast root {root} out of range for {} ranks", self.size);
        }
        let mine = if self.rank == root { data } else { &[] };
        let mut all = self.allgather(mine)?;
        Ok(std::mem::take(&mut all[root as usize]))
    }

    /// Says goodbye so the service knows this rank finished normally. The
    /// rank hosting the service then waits (up to the timeout) for the
    /// others to finish before shutting it down. Dropping does the same.
    pub fn finish(mut self) -> Result<()> {
        self.goodbye()
    }

    /// Closes the connection without a goodbye, as a crashed rank would.
    #[cfg(test)]
    pub(crate) fn vanish(mut self) {
        self.finished = true;
    }

    fn goodbye(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let r = match self.call(&Request::Bye, Duration::ZERO) {
            Ok(Response::Ok) => Ok(()),
            Ok(other) => Err(unexpected(other, "goodbye")),
            Err(e) => Err(e),
        };
        if let Some(s) = &self.service {
            s.wait_all_gone(Instant::now() + self.timeout);
        }
        r
    }

    fn wait_ms(&self) -> u32 {
        u32::try_from(self.timeout.as_millis())
            .unwrap_or(MAX_WAIT_MS)
            .min(MAX_WAIT_MS)
    }

    /// Sends `req` and reads the reply, allowing `wait` for the service
    /// to satisfy the request plus a grace period.
    fn call(&mut self, req: &Request, wait: Duration) -> Result<Response> {
        let who = format!("bootstrap service at {}", self.addr);
        let io = Arc::clone(&self.io);
        let _held = io.lock().unwrap_or_else(|e| e.into_inner());
        write_frame(&mut self.stream, &req.encode())
            .with_context(|| format!("rank {}: cannot send to the {who}", self.rank))?;
        let deadline = Instant::now() + wait + REPLY_GRACE;
        let body = match read_frame(&mut self.stream, MAX_RESPONSE, Some(deadline), None) {
            Ok(b) => b,
            Err(ReadError::Closed) => bail!(
                "rank {}: the {who} closed the connection (the launcher or the rank hosting it is gone)",
                self.rank
            ),
            Err(ReadError::Stopped) => {
                bail!("rank {}: stopped by a signal while waiting on the {who}", self.rank)
            }
            Err(ReadError::TimedOut) => bail!(
                "rank {}: no reply from the {who} within {:.1} s",
                self.rank,
                (wait + REPLY_GRACE).as_secs_f64()
            ),
            Err(ReadError::Other(e)) => {
                return Err(e.context(format!("rank {}: reading from the {who}", self.rank)))
            }
        };
        Response::decode(&body)
            .with_context(|| format!("rank {}: bad reply from the {who}", self.rank))
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        let _ = self.goodbye();
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY {
        bail!("bootstrap keys must be 1 to {MAX_KEY} bytes, {key:?} is not");
    }
    Ok(())
}

fn unexpected(resp: Response, what: &str) -> anyhow::Error {
    match resp {
        Response::Err(msg) => anyhow!("bootstrap {what} failed: {msg}"),
        other => anyhow!("bootstrap {what}: unexpected reply {other:?}"),
    }
}

/// Where a rank hosting the service (rank 0 under srun/mpirun) listens:
/// loopback when the job's bootstrap address is a loopback one (the whole
/// job is on this node), else every interface, since ranks on other hosts
/// must reach it. This is the place a multi-host launcher would pick the
/// interface the other hosts reach (e.g. the one `OVBENCH_BOOTSTRAP_HOST`
/// names); the job secret's challenge–response guards it either way.
pub fn service_bind_addr(env: &RankEnv) -> Result<SocketAddr> {
    let addr = resolve(&env.bootstrap)?;
    let ip = if addr.ip().is_loopback() {
        addr.ip()
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    Ok(SocketAddr::new(ip, addr.port()))
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    Ok(resolve_all(addr)?[0])
}

/// Every address of `addr`, IPv4 first (the hosting rank binds 0.0.0.0).
fn resolve_all(addr: &str) -> Result<Vec<SocketAddr>> {
    let mut all: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .with_context(|| {
            format!("cannot resolve the bootstrap address {addr:?} (expected host:port)")
        })?
        .collect();
    if all.is_empty() {
        bail!("the bootstrap address {addr:?} resolves to nothing");
    }
    all.sort_by_key(|a| !a.is_ipv4());
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role::JobSource;

    fn env(bootstrap: &str) -> RankEnv {
        RankEnv {
            rank: 0,
            size: 2,
            local_rank: 0,
            local_size: None,
            bootstrap: bootstrap.into(),
            secret: String::from("s").into(),
            cpu: None,
            ncpus: None,
            source: JobSource::Slurm,
            hosts_service: true,
            launcher_oversubscribed: false,
            stderr_tty: None,
            launcher_binding: None,
        }
    }

    #[test]
    fn the_hosting_rank_binds_loopback_unless_the_job_spans_hosts() {
        // One node: the bootstrap address is loopback, and so is the bind.
        let one = service_bind_addr(&env("127.0.0.1:41000")).unwrap();
        assert_eq!(one, SocketAddr::from(([127, 0, 0, 1], 41000)));
        assert!(service_bind_addr(&env("localhost:41000"))
            .unwrap()
            .ip()
            .is_loopback());
        // Ranks on other hosts connect to a routable address of rank 0's
        // host: every interface, since which one they reach is unknown.
        let many = service_bind_addr(&env("192.0.2.7:41000")).unwrap();
        assert_eq!(many, SocketAddr::from(([0, 0, 0, 0], 41000)));
    }

    #[test]
    fn a_hosting_rank_on_one_node_serves_on_loopback() {
        let mut e = env("127.0.0.1:0");
        e.size = 1;
        let b = Bootstrap::connect(&e, Duration::from_secs(5)).unwrap();
        let served = b.service.as_ref().unwrap().addr();
        assert!(served.ip().is_loopback(), "{served}");
        b.finish().unwrap();
    }
}
