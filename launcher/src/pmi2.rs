//! The PMI-2 wire protocol, spoken directly (no libpmi2): the key-value
//! service of `srun --mpi=pmi2` and MPICH's Hydra, reached through the
//! socket the launcher passed down (`PMI_FD`) or its address (`PMI_PORT`).
//!
//! After a PMI-1-style `cmd=init pmi_version=2 pmi_subversion=0` line,
//! every command is a 6-character decimal length followed by that many
//! bytes of `key=value;` pairs (a literal `;` doubled), the first pair
//! naming the command: `fullinit`, `kvs-put`, `kvs-fence`, `kvs-get`,
//! `finalize`, each answered by `<cmd>-response` with `rc=0` on success.
//! (MPICH's `src/pmi/maint/pmi-2.0.txt` lists the commands.)
//!
//! Values are text of bounded length (Slurm takes 1024 bytes), so an
//! allgather hex-encodes the bytes in chunks of [`CHUNK`] under keys
//! `ovb<round>.<rank>.<chunk>`, the first value prefixed with the count.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::errno::Errno;
use nix::sys::socket::{recv, send, MsgFlags};

use crate::exchange::{Exchange, ExchangeKind, Seat};
use crate::role::RankEnv;

/// Bytes of payload per key (512 hex digits, under Slurm's 1024).
const CHUNK: usize = 256;
/// The longest command or reply accepted (the length field has 6 digits).
const MAX_MESSAGE: usize = 999_999;

/// Whether the job offers a PMI service.
pub fn offered(var: &dyn Fn(&str) -> Option<String>) -> bool {
    var("PMI_FD").is_some() || var("PMI_PORT").is_some()
}

/// The connection to the PMI server.
enum Conn {
    /// Inherited socket: driven with non-blocking send/recv on the raw
    /// descriptor, which needs no ownership of it.
    Fd(RawFd),
    Tcp(TcpStream),
}

impl Conn {
    fn send_all(&mut self, mut buf: &[u8], deadline: Instant) -> Result<()> {
        match self {
            Conn::Tcp(s) => Ok(s.write_all(buf)?),
            Conn::Fd(fd) => {
                while !buf.is_empty() {
                    match send(*fd, buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL) {
                        Ok(n) => buf = &buf[n..],
                        Err(Errno::EAGAIN | Errno::EINTR) => wait_a_moment(deadline)?,
                        Err(e) => bail!("writing to PMI_FD {fd}: {e}"),
                    }
                }
                Ok(())
            }
        }
    }

    /// Fills `buf` completely before `deadline`.
    fn recv_exact(&mut self, buf: &mut [u8], deadline: Instant) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = match self {
                Conn::Tcp(s) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        bail!("no reply from the PMI server in time");
                    }
                    s.set_read_timeout(Some(left))?;
                    match s.read(&mut buf[got..]) {
                        Ok(n) => n,
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) =>
                        {
                            continue
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Conn::Fd(fd) => match recv(*fd, &mut buf[got..], MsgFlags::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(Errno::EAGAIN | Errno::EINTR) => {
                        wait_a_moment(deadline)?;
                        continue;
                    }
                    Err(e) => bail!("reading PMI_FD {fd}: {e}"),
                },
            };
            if n == 0 {
                bail!("the PMI server closed the connection (the launcher is gone)");
            }
            got += n;
        }
        Ok(())
    }

    /// One PMI-1-style line (the init reply).
    fn recv_line(&mut self, deadline: Instant) -> Result<String> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while b[0] != b'\n' {
            self.recv_exact(&mut b, deadline)?;
            line.push(b[0]);
            if line.len() > 1024 {
                bail!("the PMI server's init reply is not a line");
            }
        }
        Ok(String::from_utf8_lossy(&line).trim().to_string())
    }
}

/// Sleeps a millisecond, or fails if `deadline` has passed.
fn wait_a_moment(deadline: Instant) -> Result<()> {
    if Instant::now() >= deadline {
        bail!("no reply from the PMI server in time");
    }
    std::thread::sleep(Duration::from_millis(1));
    Ok(())
}

/// A PMI-2 command or reply: `cmd=<name>;k=v;…`, `;` in values doubled.
pub(crate) fn encode(cmd: &str, pairs: &[(&str, &str)]) -> String {
    let mut s = format!("cmd={cmd};");
    for (k, v) in pairs {
        s.push_str(k);
        s.push('=');
        s.push_str(&v.replace(';', ";;"));
        s.push(';');
    }
    s
}

/// The pairs of a PMI-2 message, in order (`cmd` first).
pub(crate) fn decode(msg: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = msg.trim_end_matches('\0').chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        let mut val = String::new();
        loop {
            match chars.next() {
                None => break,
                Some(';') if chars.peek() == Some(&';') => {
                    chars.next();
                    val.push(';');
                }
                Some(';') => break,
                Some(c) => val.push(c),
            }
        }
        if key.is_empty() {
            bail!("a PMI-2 message has a pair without a key: {msg:?}");
        }
        pairs.push((key, val));
    }
    Ok(pairs)
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>> {
    if s.len() % 2 != 0 {
        bail!("an odd number of hex digits");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).unwrap_or("x"), 16)
                .map_err(|_| anyhow!("{:?} is not hex", s.get(i..i + 2)))
        })
        .collect()
}

/// A rank's PMI-2 session.
pub struct Pmi2 {
    conn: Conn,
    seat: Seat,
    round: u32,
    timeout: Duration,
    server: String,
    finalized: bool,
}

impl std::fmt::Debug for Pmi2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pmi2({} via {})", self.seat, self.server)
    }
}

impl Pmi2 {
    /// Connects (PMI_FD, else PMI_PORT), says init and fullinit.
    pub fn init(
        var: &dyn Fn(&str) -> Option<String>,
        env: &RankEnv,
        timeout: Duration,
    ) -> Result<Pmi2> {
        let (conn, server) = if let Some(fd) = var("PMI_FD") {
            let n: RawFd = fd
                .trim()
                .parse()
                .map_err(|_| anyhow!("PMI_FD={fd:?} is not a file descriptor number"))?;
            (Conn::Fd(n), format!("PMI_FD {n}"))
        } else if let Some(port) = var("PMI_PORT") {
            let s = TcpStream::connect(&port)
                .with_context(|| format!("connecting to PMI_PORT={port}"))?;
            (Conn::Tcp(s), format!("PMI_PORT {port}"))
        } else {
            bail!("neither PMI_FD nor PMI_PORT is set");
        };
        let pmi_rank: u32 = match var("PMI_RANK") {
            Some(r) => r
                .trim()
                .parse()
                .map_err(|_| anyhow!("PMI_RANK={r:?} is not a rank"))?,
            None => env.rank,
        };
        let mut p = Pmi2 {
            conn,
            seat: Seat {
                rank: pmi_rank,
                size: 0,
            },
            round: 0,
            timeout,
            server,
            finalized: false,
        };
        let deadline = Instant::now() + timeout;
        p.conn
            .send_all(b"cmd=init pmi_version=2 pmi_subversion=0\n", deadline)?;
        let reply = p.conn.recv_line(deadline)?;
        if !reply.contains("cmd=response_to_init") || !reply.contains("rc=0") {
            bail!("the PMI server refused PMI-2 init: {reply:?}");
        }
        // Slurm's server also wants the job id it gave (PMI_JOBID).
        let rank_s = pmi_rank.to_string();
        let jobid = var("PMI_JOBID");
        let mut args = vec![("pmirank", rank_s.as_str()), ("threaded", "FALSE")];
        if let Some(j) = &jobid {
            args.push(("pmijobid", j.as_str()));
        }
        let r = p.call("fullinit", &args)?;
        let num = |k: &str| -> Result<u32> {
            field(&r, k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| anyhow!("PMI-2 fullinit's reply has no {k}"))
        };
        p.seat = Seat {
            rank: num("rank")?,
            size: num("size")?,
        };
        p.seat.agrees_with("PMI-2", env)?;
        Ok(p)
    }

    /// Sends one command and returns its reply's pairs; an error when
    /// the reply is not `<cmd>-response` with `rc=0`.
    fn call(&mut self, cmd: &str, pairs: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
        let body = encode(cmd, pairs);
        if body.len() > MAX_MESSAGE {
            bail!("a PMI-2 {cmd} of {} bytes is too long", body.len());
        }
        let deadline = Instant::now() + self.timeout;
        let msg = format!("{:6}{body}", body.len());
        self.conn
            .send_all(msg.as_bytes(), deadline)
            .with_context(|| format!("PMI-2 {cmd}"))?;
        let mut len = [0u8; 6];
        self.conn.recv_exact(&mut len, deadline).with_context(|| {
            format!(
                "PMI-2 {cmd} on rank {} ({} died, or did not arrive within {:.0} s)",
                self.seat.rank,
                crate::exchange::awaited(self.seat.rank, self.seat.size),
                self.timeout.as_secs_f64()
            )
        })?;
        let n: usize = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&n| n <= MAX_MESSAGE)
            .ok_or_else(|| anyhow!("PMI-2 {cmd}: bad length field {len:?} from the server"))?;
        let mut reply = vec![0u8; n];
        self.conn.recv_exact(&mut reply, deadline)?;
        let pairs = decode(&String::from_utf8_lossy(&reply))?;
        let want = format!("{cmd}-response");
        if field(&pairs, "cmd") != Some(want.as_str()) {
            bail!("PMI-2 {cmd}: the server answered {pairs:?}");
        }
        match field(&pairs, "rc") {
            Some("0") => Ok(pairs),
            rc => bail!(
                "PMI-2 {cmd} failed (rc {}): {}",
                rc.unwrap_or("missing"),
                field(&pairs, "errmsg").unwrap_or("no message")
            ),
        }
    }

    fn get(&mut self, key: &str) -> Result<String> {
        let r = self.call("kvs-get", &[("srcid", "-1"), ("key", key)])?;
        if field(&r, "found") != Some("TRUE") {
            bail!("PMI-2 kvs-get: no value under {key}");
        }
        Ok(field(&r, "value").unwrap_or_default().to_string())
    }

    fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        self.call("finalize", &[]).map(drop)
    }
}

impl Exchange for Pmi2 {
    fn kind(&self) -> ExchangeKind {
        ExchangeKind::Pmi2
    }

    fn describe(&self) -> String {
        format!("PMI-2 wire protocol ({})", self.server)
    }

    fn seat(&self) -> Seat {
        self.seat
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.round += 1;
        let round = self.round;
        let chunks: Vec<&[u8]> = if mine.is_empty() {
            vec![&[]]
        } else {
            mine.chunks(CHUNK).collect()
        };
        for (i, c) in chunks.iter().enumerate() {
            let key = format!("ovb{round}.{}.{i}", self.seat.rank);
            let val = if i == 0 {
                format!("{}:{}", chunks.len(), hex(c))
            } else {
                hex(c)
            };
            self.call("kvs-put", &[("key", &key), ("value", &val)])?;
        }
        self.call("kvs-fence", &[])?;
        (0..self.seat.size)
            .map(|r| {
                let first = self.get(&format!("ovb{round}.{r}.0"))?;
                let (count, head) = first
                    .split_once(':')
                    .ok_or_else(|| anyhow!("rank {r}'s PMI-2 value lacks its chunk count"))?;
                let count: usize = count
                    .parse()
                    .map_err(|_| anyhow!("rank {r}'s PMI-2 chunk count {count:?}"))?;
                let mut bytes = unhex(head)?;
                for i in 1..count {
                    bytes.extend(unhex(&self.get(&format!("ovb{round}.{r}.{i}"))?)?);
                }
                Ok(bytes)
            })
            .collect()
    }

    fn barrier(&mut self) -> Result<()> {
        self.call("kvs-fence", &[]).map(drop)
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.finalize()
    }
}

impl Drop for Pmi2 {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_doubled_semicolons() {
        let m = encode("kvs-put", &[("key", "a"), ("value", "x;y")]);
        assert_eq!(m, "cmd=kvs-put;key=a;value=x;;y;");
        let d = decode(&m).unwrap();
        assert_eq!(field(&d, "cmd"), Some("kvs-put"));
        assert_eq!(field(&d, "value"), Some("x;y"));
        let r = decode("cmd=fullinit-response;rc=0;rank=1;size=2;\0").unwrap();
        assert_eq!(field(&r, "size"), Some("2"));
        assert!(decode("=x;").is_err());
    }

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }

    /// A PMI-2 server on a socket pair, answering like Slurm's: the
    /// client's whole conversation for one rank of one.
    #[test]
    fn a_one_rank_conversation_over_a_socket() {
        use std::os::fd::AsRawFd;
        use std::os::unix::net::UnixStream;
        let (client, mut server) = UnixStream::pair().unwrap();
        let fd = client.as_raw_fd().to_string();
        let srv = std::thread::spawn(move || {
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while b[0] != b'\n' {
                server.read_exact(&mut b).unwrap();
                line.push(b[0]);
            }
            assert!(String::from_utf8(line).unwrap().starts_with("cmd=init"));
            server
                .write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")
                .unwrap();
            let mut store = std::collections::HashMap::new();
            loop {
                let mut len = [0u8; 6];
                if server.read_exact(&mut len).is_err() {
                    return store.len();
                }
                let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                let mut body = vec![0u8; n];
                server.read_exact(&mut body).unwrap();
                let p = decode(&String::from_utf8(body).unwrap()).unwrap();
                let cmd = field(&p, "cmd").unwrap().to_string();
                let reply = match cmd.as_str() {
                    "fullinit" => encode(
                        "fullinit-response",
                        &[("rc", "0"), ("rank", "0"), ("size", "1")],
                    ),
                    "kvs-put" => {
                        store.insert(
                            field(&p, "key").unwrap().to_string(),
                            field(&p, "value").unwrap().to_string(),
                        );
                        encode("kvs-put-response", &[("rc", "0")])
                    }
                    "kvs-get" => match store.get(field(&p, "key").unwrap()) {
                        Some(v) => encode(
                            "kvs-get-response",
                            &[("rc", "0"), ("found", "TRUE"), ("value", v)],
                        ),
                        None => encode("kvs-get-response", &[("rc", "0"), ("found", "FALSE")]),
                    },
                    other => encode(&format!("{other}-response"), &[("rc", "0")]),
                };
                server
                    .write_all(format!("{:6}{reply}", reply.len()).as_bytes())
                    .unwrap();
                if cmd == "finalize" {
                    return store.len();
                }
            }
        });
        let var = |k: &str| (k == "PMI_FD").then(|| fd.clone());
        let env = RankEnv {
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: Some(1),
            bootstrap: String::new(),
            secret: Default::default(),
            cpu: None,
            ncpus: None,
            source: crate::role::JobSource::Pmi,
            hosts_service: false,
            launcher_oversubscribed: false,
            stderr_tty: None,
            launcher_binding: None,
        };
        let mut p = Pmi2::init(&var, &env, Duration::from_secs(5)).unwrap();
        // 600 bytes: three chunks under three keys.
        let mine: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(p.allgather(&mine).unwrap(), vec![mine]);
        assert_eq!(p.allgather(b"").unwrap(), vec![Vec::<u8>::new()]);
        p.barrier().unwrap();
        Box::new(p).finish().unwrap();
        assert_eq!(srv.join().unwrap(), 4);
        drop(client);
    }
}
