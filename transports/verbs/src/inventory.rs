//! What `ovbench devices` lists for verbs: every RDMA device
//! (`ibv_get_device_list`), each port's state, MTU and link layer
//! (`ibv_query_port`) and its populated GIDs (`ibv_query_gid`, with the
//! GID type from sysfs, which the verbs call does not report).

use crate::{gid, DeviceList, VerbsError};

/// One port of a device.
#[derive(Clone, Debug)]
pub struct PortInfo {
    pub port: u8,
    /// `ACTIVE`, `DOWN`, `INIT`, `ARMED`, … (`ibv_port_state`).
    pub state: &'static str,
    /// Active MTU in bytes.
    pub mtu: u32,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: &'static str,
    /// Populated GID entries (index, GID, type).
    pub gids: Vec<gid::GidEntry>,
}

/// One device and its ports, or why it could not be opened.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub firmware: String,
    pub ports: Result<Vec<PortInfo>, String>,
}

/// A port state (`ibv_port_state`) as ibv_devinfo prints it.
pub(crate) fn state_name(s: u32) -> &'static str {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

/// Every device of this machine with its ports; empty without any.
pub fn devices() -> Result<Vec<DeviceInfo>, VerbsError> {
    let list = DeviceList::new()?;
    let mut out = Vec::new();
    for name in list.names() {
        let mut firmware = String::new();
        let ports = list.open(Some(&name)).and_then(|ctx| {
            let attr = ctx.query()?;
            firmware = attr.fw_ver.clone();
            let mut ports = Vec::new();
            for port in 1..=attr.phys_port_cnt {
                let p = ctx.query_port(port)?;
                let mut gids = Vec::new();
                let types = gid::read_sysfs(&name, port, p.gid_tbl_len);
                for index in 0..p.gid_tbl_len {
                    let Ok(raw) = ctx.query_gid(port, index) else {
                        continue;
                    };
                    if raw.iter().all(|&b| b == 0) {
                        continue;
                    }
                    let text = raw
                        .chunks(2)
                        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
                        .collect::<Vec<_>>()
                        .join(":");
                    let kind = types
                        .iter()
                        .find(|e| e.index == index)
                        .map(|e| e.kind.clone())
                        .unwrap_or_default();
                    gids.push(gid::GidEntry {
                        index,
                        gid: text,
                        kind,
                    });
                }
                ports.push(PortInfo {
                    port,
                    state: state_name(p.state),
                    mtu: crate::mtu_bytes(p.active_mtu.min(5) as u8),
                    link_layer: if p.ethernet { "Ethernet" } else { "InfiniBand" },
                    gids,
                });
            }
            Ok(ports)
        });
        out.push(DeviceInfo {
            name,
            firmware,
            ports: ports.map_err(|e| e.to_string()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_states_read_as_the_verbs_names() {
        assert_eq!(state_name(4), "ACTIVE");
        assert_eq!(state_name(1), "DOWN");
    }

    #[test]
    fn listing_works_with_or_without_devices() {
        // Whatever this machine has: no error, every port a known state.
        for d in devices().unwrap() {
            for p in d.ports.unwrap_or_default() {
                assert_ne!(p.state, "NOP", "{}", d.name);
            }
        }
    }
}
