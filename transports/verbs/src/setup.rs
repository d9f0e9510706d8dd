//! Opening the device the options name: port and GID selection.

use crate::context::{DeviceAttr, PortAttr};
use crate::inventory::state_name;
use crate::{gid, Context, DeviceList, ProtectionDomain, VerbsError, VerbsOptions};

/// An opened device with its chosen port and GID.
pub(crate) struct Device {
    pub pd: ProtectionDomain,
    pub ctx: Context,
    pub attr: DeviceAttr,
    pub port: u8,
    pub port_attr: PortAttr,
    pub gid_index: u32,
    pub gid: [u8; 16],
}

/// A GID as sysfs prints it.
pub fn gid_text(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

pub(crate) fn open(opts: &VerbsOptions) -> Result<Device, VerbsError> {
    let list = DeviceList::new()?;
    let ctx = list.open(opts.device.as_deref())?;
    drop(list);
    let attr = ctx.query()?;
    let (port, port_attr) = match opts.port {
        Some(p) => {
            if p == 0 || p > attr.phys_port_cnt {
                return Err(VerbsError::Port(format!(
                    "--port {p} does not exist on {} (ports 1..={})",
                    ctx.name(),
                    attr.phys_port_cnt
                )));
            }
            let a = ctx.query_port(p)?;
            if !a.active {
                return Err(VerbsError::Port(format!(
                    "port {p} of {} is {}, not ACTIVE: check the link (`ibv_devinfo -d {}`, `rdma link`)",
                    ctx.name(),
                    state_name(a.state),
                    ctx.name()
                )));
            }
            (p, a)
        }
        None => {
            let mut found = None;
            let mut states = Vec::new();
            for p in 1..=attr.phys_port_cnt {
                let a = ctx.query_port(p)?;
                states.push(format!("port {p} {}", state_name(a.state)));
                if a.active {
                    found = Some((p, a));
                    break;
                }
            }
            found.ok_or_else(|| {
                VerbsError::Port(format!(
                    "{} has no ACTIVE port ({}): bring its link up (for rxe: `ip link set <netdev> up`)",
                    ctx.name(),
                    states.join(", ")
                ))
            })?
        }
    };
    let gid_index = match opts.gid_index {
        Some(i) => {
            if i >= port_attr.gid_tbl_len {
                return Err(VerbsError::Port(format!(
                    "--gid-index {i} is beyond the GID table of {} port {port} ({} entries)",
                    ctx.name(),
                    port_attr.gid_tbl_len
                )));
            }
            i
        }
        None if port_attr.ethernet => {
            let entries = gid::read_sysfs(ctx.name(), port, port_attr.gid_tbl_len);
            gid::choose(&entries).ok_or_else(|| {
                VerbsError::Port(format!(
                    "{} port {port} is RoCE but has no GID yet: give its netdev an IP address \
                     (e.g. `ip addr add 10.0.2.15/24 dev <netdev>`) or pass --gid-index",
                    ctx.name()
                ))
            })?
        }
        None => 0,
    };
    let gid = ctx.query_gid(port, gid_index)?;
    let pd = ctx.alloc_pd()?;
    Ok(Device {
        pd,
        ctx,
        attr,
        port,
        port_attr,
        gid_index,
        gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_text_matches_sysfs() {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[10, 0, 2, 15]);
        assert_eq!(gid_text(&g), "0000:0000:0000:0000:0000:ffff:0a00:020f");
    }
}
