//! The UCX settings ovbench applies: which transports (`UCX_TLS`) and
//! network devices (`UCX_NET_DEVICES`), and the resources the context
//! found with them.

/// The effective UCX settings, for the header.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// Transport/device pairs the context found (`tcp/lo`, `posix/memory`).
    pub resources: Vec<String>,
    /// `UCX_TLS` as UCX will use it (ours, the user's, or UCX's default).
    pub tls: String,
    /// `UCX_NET_DEVICES` likewise.
    pub net_devices: String,
}

/// Compute the transport list and devices: `--ucx-tls` wins (with `self`
/// added so a rank can reach itself), then the user's `UCX_TLS`, then
/// UCX's default. Network devices default to `lo` when tcp is in the list
/// and neither `--ucx-net-devices` nor `UCX_NET_DEVICES` says otherwise,
/// so tcp does not bind the first Ethernet interface.
pub(crate) fn settings(tls: Option<&str>, net_devices: Option<&str>) -> Settings {
    let env_tls = std::env::var("UCX_TLS").ok();
    let tls = match tls {
        Some(t) => {
            let mut list: Vec<&str> = t.split(',').filter(|s| !s.is_empty()).collect();
            if !list.iter().any(|s| *s == "self" || *s == "all") {
                list.push("self");
            }
            list.join(",")
        }
        None => env_tls.unwrap_or_else(|| "all".to_string()),
    };
    let env_dev = std::env::var("UCX_NET_DEVICES").ok();
    let net_devices = match (net_devices, env_dev) {
        (Some(d), _) => d.to_string(),
        (None, Some(d)) => d,
        (None, None) if tls.split(',').any(|s| s == "tcp") => "lo".to_string(),
        (None, None) => "all".to_string(),
    };
    Settings {
        resources: Vec::new(),
        tls,
        net_devices,
    }
}
