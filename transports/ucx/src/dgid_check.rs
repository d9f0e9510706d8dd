//! UCX's ud_verbs check of a RoCE packet's destination GID, off on
//! soft-RoCE.
//!
//! UCX 1.13's ud_verbs decides whether a received RoCE packet carries an
//! IPv4 or an IPv6 header from the completion's `sl` field, which rxe
//! leaves empty, so it compares the wrong bytes with its GID and drops
//! every UD packet: the wire-up never finishes. `ETH_DGID_CHECK=n` skips
//! that comparison (UCX fixed the check itself in 1.19). ovbench turns
//! it off when a selected device is a software RDMA device and a UD
//! transport may open, unless the user set it; a NIC keeps UCX's default.

/// The user's own setting, which ovbench never overrides.
pub(crate) const USER_VAR: &str = "UCX_UD_VERBS_ETH_DGID_CHECK";
/// The name given to `ucp_config_modify`: UCX keeps it for the UD
/// transports' configuration (their table's `UD_` prefix).
const CONFIG_NAME: &str = "UD_ETH_DGID_CHECK";

/// What became of the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DgidCheck {
    /// Turned off by ovbench: `device` is a software RDMA device.
    Off { device: String },
    /// The user set `UCX_UD_VERBS_ETH_DGID_CHECK` to this.
    User(String),
    /// Left on: no selected device is a software one.
    Default,
    /// A software device, but no UD transport can open with this
    /// `UCX_TLS`: there is nothing to turn off.
    NoUd { device: String },
}

impl DgidCheck {
    /// Decide from the transport list, the software devices among the
    /// selected ones, and the user's variable.
    pub fn decide(tls: &str, soft: &[String], user: Option<String>) -> DgidCheck {
        if let Some(v) = user {
            return DgidCheck::User(v);
        }
        let Some(device) = soft.first().cloned() else {
            return DgidCheck::Default;
        };
        if may_open_ud(tls) {
            DgidCheck::Off { device }
        } else {
            DgidCheck::NoUd { device }
        }
    }

    /// The UCX setting to apply, if any.
    pub fn setting(&self) -> Option<(&'static str, &'static str)> {
        matches!(self, DgidCheck::Off { .. }).then_some((CONFIG_NAME, "n"))
    }

    /// For the header and the JSON.
    pub fn describe(&self) -> String {
        match self {
            DgidCheck::Off { device } => format!(
                "off ({USER_VAR}=n set by ovbench: {device} is a software RDMA device, whose UD completions lack the field UCX 1.13 reads the packet's IP version from; set {USER_VAR} yourself to override)"
            ),
            DgidCheck::User(v) => format!("{USER_VAR}={v} (set by the user)"),
            DgidCheck::Default => "UCX's default (no software RDMA device selected)".into(),
            DgidCheck::NoUd { device } => format!(
                "UCX's default ({device} is a software RDMA device, but no UD transport is in UCX_TLS)"
            ),
        }
    }
}

/// Whether `tls` (as UCX_TLS) may open ud_verbs, itself or as the
/// auxiliary transport of rc (UCX's aliases `rc`, `rc_v`).
fn may_open_ud(tls: &str) -> bool {
    let names: Vec<&str> = tls.split(',').map(str::trim).collect();
    let is_ud = |n: &str| matches!(n, "all" | "ib" | "ud" | "ud_v" | "ud_verbs" | "rc" | "rc_v");
    if let Some(first) = names.first().filter(|n| n.starts_with('^')) {
        // `^a,b`: everything but a and b.
        let excluded: Vec<&str> = std::iter::once(&first[1..])
            .chain(names[1..].iter().copied())
            .collect();
        return !excluded
            .iter()
            .any(|n| matches!(*n, "ib" | "ud" | "ud_v" | "ud_verbs"));
    }
    names.iter().any(|n| is_ud(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soft() -> Vec<String> {
        vec!["rxe0".into()]
    }

    #[test]
    fn off_on_soft_roce_with_ud() {
        for tls in [
            "rc_verbs,ud_verbs,self",
            "ud_verbs,self",
            "all",
            "rc,self",
            "^tcp",
        ] {
            let d = DgidCheck::decide(tls, &soft(), None);
            assert_eq!(
                d,
                DgidCheck::Off {
                    device: "rxe0".into()
                },
                "{tls}"
            );
            assert_eq!(d.setting(), Some(("UD_ETH_DGID_CHECK", "n")));
            assert!(d.describe().contains("rxe0"), "{}", d.describe());
        }
    }

    #[test]
    fn a_nic_is_left_alone() {
        let d = DgidCheck::decide("rc_verbs,ud_verbs,self", &[], None);
        assert_eq!(d, DgidCheck::Default);
        assert_eq!(d.setting(), None);
    }

    #[test]
    fn the_user_wins() {
        let d = DgidCheck::decide("ud_verbs,self", &soft(), Some("y".into()));
        assert_eq!(d, DgidCheck::User("y".into()));
        assert_eq!(d.setting(), None);
        assert!(d.describe().contains("=y"));
    }

    #[test]
    fn nothing_to_do_without_ud() {
        for tls in ["rc_verbs,self", "tcp,self", "^ud_verbs"] {
            let d = DgidCheck::decide(tls, &soft(), None);
            assert_eq!(
                d,
                DgidCheck::NoUd {
                    device: "rxe0".into()
                },
                "{tls}"
            );
            assert_eq!(d.setting(), None);
        }
    }
}
