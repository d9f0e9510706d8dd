//! ssh launch: one rank per `--hosts` entry (or `--hostfile` slot),
//! started with the system ssh client in batch mode, watched and torn
//! down like local ranks.
//!
//! ssh forwards no environment, so the rank's identity travels on the
//! remote command line (`env OVBENCH_RANK=… <binary> <args>`) and the job
//! secret on the rank's stdin, which stays open: a remote rank stops when
//! it closes, i.e. when this launcher or its ssh connection dies. Before
//! any rank starts, every host is asked to run the same binary path and
//! must print the same `--version`. The bootstrap service listens on the
//! address that routes to the hosts, not on every interface.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::service::Service;
use crate::spawn::{run_ranks, JobSignals, LaunchOptions, RankCommand};

/// Variables copied to the remote ranks (ssh forwards none): the fabric
/// libraries' settings, and the test hooks of builds that have them.
const FORWARDED_PREFIXES: &[&str] = &["UCX_", "FI_", "OVBENCH_TCP_", "OVBENCH_TEST_"];

/// The hosts of `--hosts a,b,a`: one rank each, in order.
pub fn parse_hosts(list: &str) -> Result<Vec<String>> {
    let hosts: Vec<String> = list.split(',').map(|h| h.trim().to_string()).collect();
    if let Some(bad) = hosts.iter().find(|h| !valid_host(h)) {
        bail!("--hosts {list:?}: {bad:?} is no host name; write --hosts HOST,HOST,… (one rank per entry)");
    }
    Ok(hosts)
}

/// The hosts of a hostfile: one host per line, optional `slots=N`
/// (N ranks there, default 1); `#` starts a comment.
pub fn parse_hostfile(text: &str, path: &Path) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let host = words.next().unwrap_or_default();
        let mut slots = 1u32;
        for w in words {
            match w.strip_prefix("slots=").map(str::parse::<u32>) {
                Some(Ok(n)) if (1..=4096).contains(&n) => slots = n,
                _ => bail!(
                    "{}:{}: {w:?} is not slots=N (N from 1 to 4096); a line is HOST [slots=N]",
                    path.display(),
                    i + 1
                ),
            }
        }
        if !valid_host(host) {
            bail!("{}:{}: {host:?} is no host name", path.display(), i + 1);
        }
        hosts.extend(std::iter::repeat(host.to_string()).take(slots as usize));
    }
    if hosts.is_empty() {
        bail!(
            "{} names no host: write one host per line, HOST [slots=N]",
            path.display()
        );
    }
    Ok(hosts)
}

/// A host name or address that is safe on a command line.
fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && !h.starts_with('-')
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:@[]".contains(c))
}

/// Quotes `s` for the remote shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The ssh client and its options: `OVBENCH_SSH` (split at whitespace),
/// else `ssh`; batch mode, no terminal, no X11 always added.
fn ssh_command() -> Vec<String> {
    let mut v: Vec<String> = std::env::var("OVBENCH_SSH")
        .ok()
        .map(|s| s.split_whitespace().map(String::from).collect())
        .filter(|v: &Vec<String>| !v.is_empty())
        .unwrap_or_else(|| vec!["ssh".into()]);
    v.extend(["-o", "BatchMode=yes", "-T", "-x"].map(String::from));
    v
}

fn ssh_to(host: &str) -> Command {
    let argv = ssh_command();
    let mut c = Command::new(&argv[0]);
    // `host` is checked by valid_host, so it is never an option.
    c.args(&argv[1..]).arg(host).arg("--");
    c
}

/// Runs `ssh host -- cmd` with a deadline; (status ok, stdout, stderr).
fn ssh_run(host: &str, remote: &str, timeout: Duration) -> Result<(bool, String, String)> {
    let mut child = ssh_to(host)
        .arg(remote)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {} (install openssh-client)", ssh_command()[0]))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "ssh {host} did not answer within {:.0} s",
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    Ok((status.success(), out, err))
}

/// Every host runs `program` at the same path and it prints the same
/// `--version` as ours; else an error naming the host and what to do.
pub fn check_hosts(hosts: &[String], program: &Path, timeout: Duration) -> Result<()> {
    let ours = Command::new(program)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {} --version", program.display()))?;
    let ours = String::from_utf8_lossy(&ours.stdout).trim().to_string();
    let path = program.to_string_lossy();
    let unique: std::collections::BTreeSet<&String> = hosts.iter().collect();
    for host in unique {
        let (ok, out, err) = ssh_run(host, &format!("{} --version", shell_quote(&path)), timeout)?;
        let theirs = out.trim();
        if !ok {
            let why = err.trim();
            bail!(
                "host {host}: `ssh {host} {path} --version` failed{}: make `ssh -o BatchMode=yes {host}` work without a password and install this ovbench at {path} there",
                if why.is_empty() { String::new() } else { format!(" ({why})") }
            );
        }
        if theirs != ours {
            bail!("host {host}: {path} is {theirs:?}, here it is {ours:?}: install the same build at the same path on every host");
        }
    }
    Ok(())
}

/// The address of this host that the others reach: the source address of
/// the route to the first host that is not this one (loopback when all
/// are). The bootstrap service listens there only.
pub fn service_address(hosts: &[String]) -> Result<IpAddr> {
    let mut chosen: Option<Ipv4Addr> = None;
    for host in hosts {
        let addrs: Vec<SocketAddr> = (host.as_str(), 22)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve host {host}"))?
            .filter(SocketAddr::is_ipv4)
            .collect();
        let Some(target) = addrs.first() else {
            bail!("host {host} has no IPv4 address");
        };
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        s.connect(SocketAddr::new(target.ip(), 9))
            .with_context(|| format!("no route to host {host} ({})", target.ip()))?;
        let IpAddr::V4(src) = s.local_addr()?.ip() else {
            continue;
        };
        if !src.is_loopback() {
            chosen = Some(src);
            break;
        }
    }
    Ok(IpAddr::V4(chosen.unwrap_or(Ipv4Addr::LOCALHOST)))
}

/// Starts one rank per entry of `hosts` over ssh and returns the job's
/// exit code (as [`crate::launch_local`]).
pub fn launch_ssh(hosts: &[String], args: &[OsString], opts: &LaunchOptions) -> Result<i32> {
    let np = u32::try_from(hosts.len()).map_err(|_| anyhow!("too many hosts"))?;
    let program: PathBuf = match &opts.program {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find this executable")?,
    };
    let signals = JobSignals::block()?;
    let secret = crate::secret::generate()?;
    let ip = service_address(hosts)?;
    let service = Service::start(SocketAddr::new(ip, 0), np, secret.as_bytes())?;
    let stderr_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut per_host: BTreeMap<&str, u32> = BTreeMap::new();
    for h in hosts {
        *per_host.entry(h).or_default() += 1;
    }
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    let forwarded: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| FORWARDED_PREFIXES.iter().any(|p| k.starts_with(p)))
        .collect();
    let quoted_args: Vec<String> = args
        .iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect();
    let mut cmds = Vec::new();
    for (rank, host) in hosts.iter().enumerate() {
        let local_rank = seen.entry(host).or_default();
        let mut vars = vec![
            format!("OVBENCH_RANK={rank}"),
            format!("OVBENCH_SIZE={np}"),
            format!("OVBENCH_LOCAL_RANK={local_rank}"),
            format!("OVBENCH_LOCAL_SIZE={}", per_host[host.as_str()]),
            format!("OVBENCH_BOOTSTRAP={}", service.addr()),
            "OVBENCH_SECRET_STDIN=1".to_string(),
            format!("OVBENCH_STDERR_TTY={}", u8::from(stderr_tty)),
        ];
        *local_rank += 1;
        if opts.pin {
            vars.push("OVBENCH_PIN_LOCAL=1".into());
        }
        vars.extend(
            forwarded
                .iter()
                .map(|(k, v)| shell_quote(&format!("{k}={v}"))),
        );
        let remote = format!(
            "exec env {} {} {}",
            vars.join(" "),
            shell_quote(&program.to_string_lossy()),
            quoted_args.join(" ")
        );
        let mut cmd = ssh_to(host);
        cmd.arg(remote);
        crate::signals::die_with_launcher(&mut cmd);
        cmds.push(RankCommand {
            rank: rank as u32,
            cmd,
            what: format!("ssh {host}"),
            stdin: Some(format!("{secret}\n").into_bytes()),
        });
    }
    run_ranks(&signals, cmds, &service, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_and_files() {
        assert_eq!(parse_hosts("a,b,a").unwrap(), ["a", "b", "a"]);
        assert!(parse_hosts("a,,b").is_err());
        assert!(parse_hosts("-oProxyCommand=x").is_err());
        let f = Path::new("hf");
        let h = parse_hostfile(
            "# cluster\nnode1 slots=2\n\n198.18.0.2  # the other one\n",
            f,
        )
        .unwrap();
        assert_eq!(h, ["node1", "node1", "198.18.0.2"]);
        let e = parse_hostfile("node1 slots=x\n", f)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("hf:1:") && e.contains("slots=N"), "{e}");
        assert!(parse_hostfile("# nothing\n", f).is_err());
    }

    #[test]
    fn quoting_survives_a_shell() {
        let s = "it's a \"test\" $HOME";
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote(s)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), s);
    }

    #[test]
    fn loopback_hosts_serve_on_loopback() {
        let ip = service_address(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        assert!(ip.is_loopback(), "{ip}");
    }
}
