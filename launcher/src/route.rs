//! Which address a rank's transport should listen on: loopback while
//! every rank shares this host (and network namespace), else the address
//! of the interface that routes to the other hosts, so that a run across
//! hosts never hands its peers 127.0.0.1.
//!
//! Each rank describes its host ([`HostId`]: name, network namespace,
//! interface addresses); after an allgather every rank picks its own
//! listening address with [`choose`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use anyhow::{bail, Result};

/// What a rank tells the others about where it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostId {
    pub hostname: String,
    /// `/proc/self/ns/net`'s target: ranks in different network
    /// namespaces of one host are as far apart as two hosts.
    pub netns: String,
    /// Non-loopback IPv4 addresses with their interface names.
    pub addrs: Vec<(String, Ipv4Addr)>,
}

/// Where this rank's transport listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every rank is on this host: loopback.
    Loopback,
    /// Ranks elsewhere: this interface and address route to them.
    Interface { name: String, addr: Ipv4Addr },
}

impl Reach {
    /// The address to bind.
    pub fn ip(&self) -> IpAddr {
        match self {
            Reach::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Reach::Interface { addr, .. } => IpAddr::V4(*addr),
        }
    }

    /// The interface name (`lo` for loopback), for UCX_NET_DEVICES.
    pub fn interface(&self) -> &str {
        match self {
            Reach::Loopback => "lo",
            Reach::Interface { name, .. } => name,
        }
    }
}

impl HostId {
    /// This process's host.
    pub fn here() -> HostId {
        let hostname = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let netns = std::fs::read_link("/proc/self/ns/net")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut addrs = Vec::new();
        if let Ok(ifs) = nix::ifaddrs::getifaddrs() {
            for i in ifs {
                let Some(sin) = i.address.as_ref().and_then(|a| a.as_sockaddr_in()) else {
                    continue;
                };
                let ip = sin.ip();
                if !ip.is_loopback() && !ip.is_unspecified() {
                    addrs.push((i.interface_name.clone(), ip));
                }
            }
        }
        HostId {
            hostname,
            netns,
            addrs,
        }
    }

    /// Lines: hostname, netns, then `iface addr` per address.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{}\n{}\n", self.hostname, self.netns);
        for (n, a) in &self.addrs {
            s.push_str(&format!("{n} {a}\n"));
        }
        s.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<HostId> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.lines();
        let (Some(hostname), Some(netns)) = (lines.next(), lines.next()) else {
            bail!("a rank's host description is cut short");
        };
        let addrs = lines
            .map(|l| {
                let (n, a) = l
                    .split_once(' ')
                    .ok_or_else(|| anyhow::anyhow!("bad interface line {l:?}"))?;
                Ok((n.to_string(), a.parse()?))
            })
            .collect::<Result<_>>()?;
        Ok(HostId {
            hostname: hostname.into(),
            netns: netns.into(),
            addrs,
        })
    }

    fn same_place(&self, other: &HostId) -> bool {
        self.hostname == other.hostname && self.netns == other.netns
    }
}

/// The local source address of a route to `ip` (no packet is sent: a
/// UDP connect only asks the kernel for the route).
fn route_source(ip: Ipv4Addr) -> Option<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect(SocketAddr::new(IpAddr::V4(ip), 9)).ok()?;
    match s.local_addr().ok()?.ip() {
        IpAddr::V4(a) if !a.is_unspecified() => Some(a),
        _ => None,
    }
}

/// This rank's listening address, given every rank's [`HostId`]:
/// loopback when all share its place, else the source address of the
/// route to the first rank elsewhere (with that address's interface).
pub fn choose(me: &HostId, all: &[HostId]) -> Result<Reach> {
    choose_with(me, all, &route_source)
}

fn choose_with(
    me: &HostId,
    all: &[HostId],
    route: &dyn Fn(Ipv4Addr) -> Option<Ipv4Addr>,
) -> Result<Reach> {
    let others: Vec<&HostId> = all.iter().filter(|h| !h.same_place(me)).collect();
    if others.is_empty() {
        return Ok(Reach::Loopback);
    }
    for peer in &others {
        for (_, ip) in &peer.addrs {
            let Some(src) = route(*ip) else { continue };
            if let Some((name, _)) = me.addrs.iter().find(|(_, a)| *a == src) {
                return Ok(Reach::Interface {
                    name: name.clone(),
                    addr: src,
                });
            }
        }
    }
    bail!(
        "no route from {} to the ranks on {}: none of their addresses ({}) is reachable from this host's interfaces ({})",
        me.hostname,
        others
            .iter()
            .map(|h| h.hostname.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        others
            .iter()
            .flat_map(|h| h.addrs.iter().map(|(_, a)| a.to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        me.addrs
            .iter()
            .map(|(n, a)| format!("{n} {a}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, ns: &str, addrs: &[(&str, [u8; 4])]) -> HostId {
        HostId {
            hostname: name.into(),
            netns: ns.into(),
            addrs: addrs
                .iter()
                .map(|(n, a)| (n.to_string(), Ipv4Addr::from(*a)))
                .collect(),
        }
    }

    #[test]
    fn one_place_is_loopback_two_places_take_the_routed_interface() {
        let a = host(
            "h",
            "net:[1]",
            &[("eth0", [10, 0, 0, 1]), ("veth0", [198, 18, 0, 1])],
        );
        let b = host("h", "net:[2]", &[("veth1", [198, 18, 0, 2])]);
        assert_eq!(
            choose_with(&a, &[a.clone(), a.clone()], &|_| None).unwrap(),
            Reach::Loopback
        );
        // The route to b's 198.18.0.2 leaves through a's veth0.
        let route_a = |ip: Ipv4Addr| {
            (ip == Ipv4Addr::new(198, 18, 0, 2)).then(|| Ipv4Addr::new(198, 18, 0, 1))
        };
        let r = choose_with(&a, &[a.clone(), b.clone()], &route_a).unwrap();
        assert_eq!(
            r,
            Reach::Interface {
                name: "veth0".into(),
                addr: Ipv4Addr::new(198, 18, 0, 1)
            }
        );
        assert_eq!(r.interface(), "veth0");
        let e = choose_with(&a, &[a.clone(), b.clone()], &|_| None).unwrap_err();
        assert!(e.to_string().contains("198.18.0.2"), "{e}");
        assert_eq!(HostId::decode(&b.encode()).unwrap(), b);
        assert!(HostId::decode(b"only-one-line").is_err());
    }

    #[test]
    fn this_host_describes_itself() {
        let h = HostId::here();
        assert!(
            !h.hostname.is_empty() && h.netns.starts_with("net:"),
            "{h:?}"
        );
        assert!(h.addrs.iter().all(|(_, a)| !a.is_loopback()));
    }
}
