//! The devices `UCX_NET_DEVICES` selects, as sysfs describes them: which
//! are RDMA devices, whether one is a software device (soft-RoCE `rxe`,
//! soft-iWARP `siw`), which network interface an RDMA device runs over,
//! and so the IP address a client-server listener binds.
//!
//! A software RDMA device has a `parent` attribute naming the interface
//! it was stacked on (`rdma link add rxe0 type rxe netdev dummy0`); a NIC
//! has none, its `device` link leads to the bus device instead, whose
//! `net/` directory names its interfaces.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

/// A sysfs tree (`/sys`, or a test's copy).
pub(crate) struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The running system's.
    pub fn system() -> Sysfs {
        Sysfs::at("/sys")
    }

    pub fn at(root: impl AsRef<Path>) -> Sysfs {
        Sysfs {
            root: root.as_ref().to_path_buf(),
        }
    }

    fn rdma(&self) -> PathBuf {
        self.root.join("class/infiniband")
    }

    /// The RDMA devices among `net_devices` (`rxe0:1,lo` → `rxe0`); `all`
    /// selects every RDMA device present.
    pub fn selected_rdma(&self, net_devices: &str) -> Vec<String> {
        let present: Vec<String> = std::fs::read_dir(self.rdma())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let mut picked: Vec<String> = if net_devices.split(',').any(|d| d == "all") {
            present
        } else {
            net_devices
                .split(',')
                .map(|d| d.split(':').next().unwrap_or(d).to_string())
                .filter(|d| present.contains(d))
                .collect()
        };
        picked.sort();
        picked.dedup();
        picked
    }

    /// Whether `dev` is a software RDMA device (it names a parent
    /// interface).
    pub fn is_soft(&self, dev: &str) -> bool {
        self.rdma().join(dev).join("parent").is_file()
    }

    /// The network interface an RDMA device runs over: a software
    /// device's parent, a NIC's first interface.
    pub fn netdev_of(&self, dev: &str) -> Option<String> {
        let base = self.rdma().join(dev);
        if let Ok(p) = std::fs::read_to_string(base.join("parent")) {
            let p = p.trim();
            if !p.is_empty() {
                return Some(p.to_string());
            }
        }
        let mut nets: Vec<String> = std::fs::read_dir(base.join("device/net"))
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        nets.sort();
        nets.into_iter().next()
    }

    /// Where a client-server listener binds: the IPv4 address of the
    /// interface behind the first device of `net_devices` (an RDMA
    /// device's interface, or an interface named directly), loopback for
    /// `all`. `ipv4_of` looks an interface's address up.
    pub fn listen_ip(
        &self,
        net_devices: &str,
        ipv4_of: impl Fn(&str) -> Option<Ipv4Addr>,
    ) -> Result<(IpAddr, String), String> {
        let first = net_devices.split(',').next().unwrap_or("all");
        if first == "all" || first.is_empty() {
            return Ok((
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                "loopback (UCX_NET_DEVICES=all; name a device with --ucx-net-devices for a job across hosts)".into(),
            ));
        }
        let name = first.split(':').next().unwrap_or(first);
        let (netdev, how) = if self.rdma().join(name).exists() {
            let netdev = self.netdev_of(name).ok_or_else(|| {
                format!("the RDMA device {name} has no network interface in sysfs (neither a parent nor device/net): the client-server path needs an IP address; use --ucx-connect worker")
            })?;
            let how = format!("{netdev}, the interface of {name}");
            (netdev, how)
        } else {
            (name.to_string(), name.to_string())
        };
        match ipv4_of(&netdev) {
            Some(ip) => Ok((IpAddr::V4(ip), how)),
            None => Err(format!(
                "the interface {netdev} (from UCX_NET_DEVICES={net_devices}) has no IPv4 address for the client-server listener: give it one (ip addr add ADDR dev {netdev}) or use --ucx-connect worker"
            )),
        }
    }
}

/// An interface's first IPv4 address.
pub(crate) fn ipv4_of(netdev: &str) -> Option<Ipv4Addr> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| i.interface_name == netdev)
        .find_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A sysfs with soft-RoCE `rxe0` on `dummy0` and a NIC `mlx5_0`
    /// whose PCI device has interface `ens1f0`.
    fn tree() -> (PathBuf, Sysfs) {
        let root = std::env::temp_dir().join(format!(
            "ovb-ucx-sysfs-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&root);
        let ib = root.join("class/infiniband");
        fs::create_dir_all(ib.join("rxe0/ports/1")).unwrap();
        fs::write(ib.join("rxe0/parent"), "dummy0\n").unwrap();
        fs::create_dir_all(ib.join("mlx5_0/device/net/ens1f0")).unwrap();
        fs::create_dir_all(ib.join("mlx5_0/ports/1")).unwrap();
        let s = Sysfs::at(&root);
        (root, s)
    }

    #[test]
    fn tells_software_devices_from_nics() {
        let (root, s) = tree();
        assert!(s.is_soft("rxe0"));
        assert!(!s.is_soft("mlx5_0"));
        assert!(!s.is_soft("absent0"));
        assert_eq!(s.netdev_of("rxe0").as_deref(), Some("dummy0"));
        assert_eq!(s.netdev_of("mlx5_0").as_deref(), Some("ens1f0"));
        assert_eq!(s.selected_rdma("rxe0:1"), ["rxe0"]);
        assert_eq!(s.selected_rdma("all"), ["mlx5_0", "rxe0"]);
        assert!(s.selected_rdma("lo,eth0").is_empty());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn listener_binds_the_rdma_interface_address() {
        let (root, s) = tree();
        let addrs = |n: &str| match n {
            "dummy0" => Some(Ipv4Addr::new(10, 0, 2, 15)),
            "lo" => Some(Ipv4Addr::LOCALHOST),
            _ => None,
        };
        let (ip, how) = s.listen_ip("rxe0:1", addrs).unwrap();
        assert_eq!(ip, IpAddr::V4(Ipv4Addr::new(10, 0, 2, 15)));
        assert!(how.contains("dummy0") && how.contains("rxe0"), "{how}");
        assert_eq!(s.listen_ip("lo", addrs).unwrap().0, Ipv4Addr::LOCALHOST);
        assert_eq!(s.listen_ip("all", addrs).unwrap().0, Ipv4Addr::LOCALHOST);
        let e = s.listen_ip("mlx5_0:1", addrs).unwrap_err();
        assert!(
            e.contains("ens1f0") && e.contains("--ucx-connect worker"),
            "{e}"
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn finds_loopback_address() {
        assert_eq!(ipv4_of("lo"), Some(Ipv4Addr::LOCALHOST));
        assert_eq!(ipv4_of("no-such-interface"), None);
    }
}
