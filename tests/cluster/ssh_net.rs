//! Two "hosts" for ssh launch: host A in the root network namespace and
//! host B in a namespace of its own joined by a veth pair (198.18.0.0/15,
//! the benchmarking range), an sshd listening only on each veth address
//! with keys the test makes (tests/cluster_ssh.rs, tests/faults.rs).
//!
//! Needs root, iproute2, openssh-server and openssh-client (ci/deps).

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{exe, scratch, stdout_of};

const PORT: u16 = 22022;

/// Two "hosts" and their sshds; dropped: everything removed.
pub struct Net {
    pub ns: String,
    pub veth: String,
    /// Host A: the root namespace's end of the veth pair.
    pub a: String,
    /// Host B: the namespace's end.
    pub b: String,
    pub dir: PathBuf,
    sshds: Vec<Child>,
}

fn sh(args: &[&str]) {
    stdout_of(Command::new(args[0]).args(&args[1..]));
}

impl Net {
    pub fn up(name: &str) -> Net {
        // A subnet of its own per test process, so parallel runs never meet.
        let n = 1 + std::process::id() % 250;
        let id = format!("{}{}", name, std::process::id() % 10000);
        let dir = scratch(&format!("ssh-{name}"));
        let net = Net {
            ns: format!("ovb{id}"),
            veth: format!("ova{id}"),
            a: format!("198.18.{n}.1"),
            b: format!("198.18.{n}.2"),
            dir,
            sshds: Vec::new(),
        };
        let peer = format!("ovb{id}");
        sh(&["ip", "netns", "add", &net.ns]);
        let mut net = net;
        sh(&[
            "ip", "link", "add", &net.veth, "type", "veth", "peer", "name", &peer,
        ]);
        sh(&["ip", "link", "set", &peer, "netns", &net.ns]);
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", net.a),
            "dev",
            &net.veth,
        ]);
        sh(&["ip", "link", "set", &net.veth, "up"]);
        let ns = net.ns.clone();
        let inns = |args: &[&str]| {
            let mut v = vec!["ip", "netns", "exec", ns.as_str()];
            v.extend_from_slice(args);
            sh(&v);
        };
        inns(&["ip", "addr", "add", &format!("{}/24", net.b), "dev", &peer]);
        inns(&["ip", "link", "set", &peer, "up"]);
        inns(&["ip", "link", "set", "lo", "up"]);
        net.keys();
        let (a, b) = (net.a.clone(), net.b.clone());
        net.sshd(&a, None);
        net.sshd(&b, Some(&ns));
        net
    }

    fn keys(&self) {
        for k in ["host", "id"] {
            let f = self.dir.join(k);
            sh(&[
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &f.to_string_lossy(),
            ]);
        }
        std::fs::copy(self.dir.join("id.pub"), self.dir.join("authorized_keys"))
            .expect("authorized_keys");
        let cfg = format!(
            "Host *\n  Port {PORT}\n  User root\n  IdentityFile {id}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 10\n",
            id = self.dir.join("id").display()
        );
        std::fs::write(self.ssh_config(), cfg).expect("ssh config");
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
    }

    pub fn ssh_config(&self) -> PathBuf {
        self.dir.join("ssh_config")
    }

    /// sshd on `addr` only, in namespace `ns` (root's when None).
    fn sshd(&mut self, addr: &str, ns: Option<&str>) {
        let cfg = self.dir.join(format!("sshd-{addr}.conf"));
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {addr}:{PORT}\nHostKey {host}\nAuthorizedKeysFile {auth}\nPidFile {pid}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPrintMotd no\n",
                host = self.dir.join("host").display(),
                auth = self.dir.join("authorized_keys").display(),
                pid = self.dir.join(format!("sshd-{addr}.pid")).display(),
            ),
        )
        .expect("sshd config");
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "/usr/sbin/sshd"]);
                c
            }
            None => Command::new("/usr/sbin/sshd"),
        };
        cmd.args(["-D", "-e", "-f", &cfg.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.sshds
            .push(cmd.spawn().expect("start sshd (run ci/deps)"));
        // Ready when it answers.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // The root namespace reaches B's address over the veth.
            let sa = SocketAddr::new(addr.parse().expect("an address"), PORT);
            if TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "sshd on {addr} did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `ovbench ARGS` with ssh pointed at the test's keys and port.
    pub fn ovbench(&self, args: &[&str]) -> Command {
        let mut c = Command::new(exe());
        c.args(args).env(
            "OVBENCH_SSH",
            format!("ssh -F {}", self.ssh_config().display()),
        );
        c
    }

    /// The inode of B's namespace, as /proc/PID/ns/net names it.
    pub fn ns_id(&self) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "readlink", "/proc/self/ns/net"])
            .output()
            .expect("readlink in the namespace");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &mut self.sshds {
            let _ = c.kill();
            let _ = c.wait();
        }
        // pkill by pid file only: the sshds this test started.
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "pid") {
                if let Some(pid) = std::fs::read_to_string(&p)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        // Usually gone with the namespace (its peer went with it).
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
