//! The fabric transports' own options (verbs, UCX, libfabric), flattened
//! into [`crate::cli::common::CommonArgs`] as its `fabric` field, and their
//! mapping onto each transport crate's options struct. Every option is
//! optional on the command line: an absent one keeps the crate's default,
//! so the defaults live in one place (the crate) and the help says what
//! they are.

#![deny(clippy::arithmetic_side_effects)]

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use ovbench_core::Progress;

/// The default libfabric provider (`--provider`).
pub const DEFAULT_PROVIDER: &str = "tcp;ofi_rxm";

/// Options of the verbs, UCX and libfabric transports, each fabric's
/// under its own help heading.
#[derive(Clone, Debug, Default, Args)]
pub struct FabricArgs {
    #[command(flatten)]
    pub verbs: VerbsArgs,
    #[command(flatten)]
    pub ucx: UcxArgs,
    #[command(flatten)]
    pub ofi: OfiArgs,
}

/// The verbs transport's options.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Verbs")]
pub struct VerbsArgs {
    /// RDMA device (rxe0, mlx5_0; default: the first).
    #[arg(long, global = true, value_name = "NAME")]
    pub device: Option<String>,
    /// Port of the device, 1-based (default: the first active one).
    #[arg(long, global = true, value_parser = clap::value_parser!(u8).range(1..))]
    pub port: Option<u8>,
    /// GID index (default: the RoCE v2 IPv4-mapped GID).
    #[arg(long, global = true)]
    pub gid_index: Option<u32>,
    /// Connect the queue pairs through rdma_cm instead of the bootstrap exchange.
    #[arg(long, global = true)]
    pub cm: bool,
    /// Send-queue entries per peer (perftest -t; default 128).
    #[arg(long, global = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub tx_depth: Option<u32>,
    /// Receive buffers pre-posted per peer, the credit window (perftest -r; default 128).
    #[arg(long, global = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub rx_depth: Option<u32>,
    /// Largest message sent inline, 0 = never (perftest -I; default 0).
    #[arg(long, global = true)]
    pub inline_size: Option<u32>,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    #[arg(long, global = true, value_parser = parse_mtu)]
    pub mtu: Option<u32>,
    /// Service level, 0-15 (default 0).
    #[arg(long, global = true, value_parser = clap::value_parser!(u8).range(0..16))]
    pub sl: Option<u8>,
    /// Traffic class of the GRH, the RoCE DSCP/ECN byte (default 0).
    #[arg(long, global = true)]
    pub tclass: Option<u8>,
    /// Payload of one eager (bounce) buffer, at most 1M (default 16K): the
    /// largest `--proto raw --op send` message (64K times it as ib_send_lat).
    #[arg(long, global = true, value_name = "SIZE", value_parser = crate::sizes::parse_bytes)]
    pub eager_buf: Option<usize>,
}

/// The UCX transport's options.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "UCX")]
pub struct UcxArgs {
    /// UCX transports, comma-separated: tcp, posix, sysv, cma, shm, rc, ...
    /// ("self" is added; default: UCX_TLS or UCX's choice).
    #[arg(long, global = true, value_name = "TLS,...")]
    pub ucx_tls: Option<String>,
    /// UCX network devices (default: UCX_NET_DEVICES, else lo when tcp is among --ucx-tls).
    #[arg(long, global = true, value_name = "DEV,...")]
    pub ucx_net_devices: Option<String>,
    /// How UCX endpoints connect: worker (worker addresses through the
    /// bootstrap; default) or sockaddr (client-server: the lower rank of
    /// each pair listens on its device's IP address, wire-up through
    /// rdmacm or tcp, so rc needs no UD).
    #[arg(long, global = true, value_enum, value_name = "PATH")]
    pub ucx_connect: Option<UcxConnectArg>,
}

/// The libfabric transport's options.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "libfabric")]
pub struct OfiArgs {
    /// libfabric provider: tcp;ofi_rxm, shm, sockets, verbs;ofi_rxm, ... (fi_info -l lists them).
    #[arg(long, global = true, default_value = DEFAULT_PROVIDER)]
    pub provider: String,
    /// Address libfabric binds for providers that take one (default 127.0.0.1; ignored by shm).
    #[arg(long, global = true, value_name = "ADDR")]
    pub ofi_node: Option<String>,
}

/// `--ucx-connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UcxConnectArg {
    Worker,
    Sockaddr,
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(b @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(b),
        _ => Err(format!(
            "'{s}' is not an InfiniBand MTU: use 256, 512, 1024, 2048 or 4096 (bytes)"
        )),
    }
}

/// The verbs transport has no progress thread: RMA is done by the NIC and
/// two-sided messages are consumed by the caller's polls.
pub fn verbs_progress(progress: Progress) -> Result<()> {
    if progress == Progress::Thread {
        bail!(
            "--progress thread is not available over verbs: its RMA is offloaded to the NIC and two-sided messages are taken by the caller's polls; use --progress poll (or --transport ucx/ofi/tcp for a progress thread)"
        );
    }
    Ok(())
}

#[cfg(feature = "verbs")]
impl VerbsArgs {
    /// The verbs transport's options: the given ones over perftest's defaults.
    pub fn options(&self, progress: Progress) -> Result<ovbench_verbs::VerbsOptions> {
        verbs_progress(progress)?;
        let d = ovbench_verbs::VerbsOptions::default();
        Ok(ovbench_verbs::VerbsOptions {
            device: self.device.clone(),
            port: self.port,
            gid_index: self.gid_index,
            cm: self.cm,
            tx_depth: self.tx_depth.unwrap_or(d.tx_depth),
            rx_depth: self.rx_depth.unwrap_or(d.rx_depth),
            inline_size: self.inline_size.unwrap_or(d.inline_size),
            mtu: self.mtu.or(d.mtu),
            sl: self.sl.unwrap_or(d.sl),
            tclass: self.tclass.unwrap_or(d.tclass),
            eager_buf_size: match self.eager_buf {
                Some(payload) => ovbench_verbs::eager_buf_for(payload)
                    .map_err(|e| anyhow::anyhow!("--eager-buf: {e}"))?,
                None => d.eager_buf_size,
            },
            ..d
        })
    }
}

#[cfg(feature = "ucx")]
impl UcxArgs {
    /// The UCX transport's options.
    pub fn options(&self, progress: Progress) -> ovbench_ucx::UcxOptions {
        ovbench_ucx::UcxOptions {
            tls: self.ucx_tls.clone(),
            net_devices: self.ucx_net_devices.clone(),
            progress,
            connect: match self.ucx_connect {
                None | Some(UcxConnectArg::Worker) => ovbench_ucx::UcxConnect::Worker,
                Some(UcxConnectArg::Sockaddr) => ovbench_ucx::UcxConnect::Sockaddr,
            },
        }
    }
}

#[cfg(feature = "ofi")]
impl OfiArgs {
    /// The libfabric transport's options.
    pub fn options(&self, progress: Progress) -> ovbench_ofi::OfiOptions {
        ovbench_ofi::OfiOptions {
            provider: self.provider.clone(),
            node: self.ofi_node.clone(),
            progress,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        f: FabricArgs,
    }

    fn parse(args: &[&str]) -> Result<FabricArgs, clap::Error> {
        let mut v = vec!["x"];
        v.extend_from_slice(args);
        T::try_parse_from(v).map(|t| t.f)
    }

    #[test]
    fn defaults_leave_everything_to_the_crates() {
        let f = parse(&[]).unwrap();
        assert_eq!(f.ofi.provider, "tcp;ofi_rxm");
        assert!(f.verbs.device.is_none() && f.verbs.port.is_none() && f.verbs.gid_index.is_none());
        assert!(!f.verbs.cm);
        assert!(f.verbs.tx_depth.is_none() && f.verbs.rx_depth.is_none() && f.verbs.mtu.is_none());
        assert!(
            f.ucx.ucx_tls.is_none() && f.ucx.ucx_net_devices.is_none() && f.ofi.ofi_node.is_none()
        );
        assert!(f.ucx.ucx_connect.is_none());
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            &["--mtu", "1500"][..],
            &["--sl", "16"],
            &["--port", "0"],
            &["--tx-depth", "0"],
            &["--tclass", "256"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        let e = parse(&["--mtu", "9000"]).unwrap_err().to_string();
        assert!(e.contains("4096"), "{e}");
    }

    #[test]
    fn progress_thread_is_refused_over_verbs_only() {
        assert!(verbs_progress(Progress::Poll).is_ok());
        let e = verbs_progress(Progress::Thread).unwrap_err().to_string();
        assert!(e.contains("--progress poll"), "{e}");
    }

    #[cfg(feature = "verbs")]
    #[test]
    fn verbs_options_map_every_flag() {
        let f = parse(&[
            "--device",
            "rxe0",
            "--port",
            "2",
            "--gid-index",
            "3",
            "--cm",
            "--tx-depth",
            "64",
            "--rx-depth",
            "4",
            "--inline-size",
            "220",
            "--mtu",
            "1024",
            "--sl",
            "5",
            "--tclass",
            "106",
        ])
        .unwrap();
        let o = f.verbs.options(Progress::Poll).unwrap();
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!(o.port, Some(2));
        assert_eq!(o.gid_index, Some(3));
        assert!(o.cm);
        assert_eq!((o.tx_depth, o.rx_depth, o.inline_size), (64, 4, 220));
        assert_eq!(o.mtu, Some(1024));
        assert_eq!((o.sl, o.tclass), (5, 106));
        let d = parse(&[]).unwrap().verbs.options(Progress::Poll).unwrap();
        assert_eq!(d, ovbench_verbs::VerbsOptions::default());
        assert!(f.verbs.options(Progress::Thread).is_err());
    }

    #[cfg(feature = "ucx")]
    #[test]
    fn ucx_options_map_every_flag() {
        let f = parse(&[
            "--ucx-tls",
            "posix",
            "--ucx-net-devices",
            "eth0",
            "--ucx-connect",
            "sockaddr",
        ])
        .unwrap();
        let o = f.ucx.options(Progress::Thread);
        assert_eq!(o.tls.as_deref(), Some("posix"));
        assert_eq!(o.net_devices.as_deref(), Some("eth0"));
        assert_eq!(o.progress, Progress::Thread);
        assert_eq!(o.connect, ovbench_ucx::UcxConnect::Sockaddr);
        let d = parse(&[]).unwrap().ucx.options(Progress::Poll);
        assert!(d.tls.is_none() && d.net_devices.is_none());
        assert_eq!(d.connect, ovbench_ucx::UcxConnect::Worker);
        assert!(parse(&["--ucx-connect", "rdmacm"]).is_err());
    }

    #[cfg(feature = "ofi")]
    #[test]
    fn ofi_options_map_every_flag() {
        let f = parse(&["--provider", "shm", "--ofi-node", "10.0.0.1"]).unwrap();
        let o = f.ofi.options(Progress::Thread);
        assert_eq!(o.provider, "shm");
        assert_eq!(o.node.as_deref(), Some("10.0.0.1"));
        assert_eq!(o.progress, Progress::Thread);
        let d = parse(&[]).unwrap().ofi.options(Progress::Poll);
        assert_eq!(d.provider, ovbench_ofi::OfiOptions::default().provider);
    }
}
