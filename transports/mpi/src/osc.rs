//! Which one-sided component (`osc`) Open MPI runs the window on.
//!
//! Open MPI picks one per window among the components its `osc` setting
//! leaves (Debian's openmpi-mca-params.conf leaves out ucx and pt2pt),
//! and says which nowhere an application can read. So ovbench settles it
//! before `MPI_Init`: a single component named by the user's
//! `OMPI_MCA_osc` is kept; otherwise ovbench sets `OMPI_MCA_osc` to
//! [`DEFAULT_OSC`] for this process, and says so. After `MPI_Init` the
//! library's own `osc` control variable (MPI_T) is read back to confirm
//! what Open MPI sees.
//!
//! Which component works for ovbench's own protocols on Open MPI 4.1.4
//! is recorded in docs/transports/mpi.md (both pass its tests).

/// The component ovbench asks for when the user leaves the choice open.
pub const DEFAULT_OSC: &str = "rdma";
/// The one it asks for when the BTLs the user chose have no shared
/// memory: Open MPI 4.1's osc rdma cannot create a dynamic window over
/// the tcp BTL alone (`MPI_Win_create_dynamic`: MPI_ERR_WIN).
pub const TCP_OSC: &str = "pt2pt";

/// Whether a `btl` setting (`OMPI_MCA_btl`) leaves only BTLs osc rdma
/// cannot run dynamic windows on: a list naming neither vader nor sm.
fn btl_without_rdma(btl: Option<&str>) -> bool {
    match btl.map(str::trim) {
        Some(b) if !b.is_empty() && !b.starts_with('^') => !b
            .split(',')
            .any(|c| matches!(c.trim(), "vader" | "sm" | "uct" | "openib")),
        _ => false,
    }
}

/// The decision taken before `MPI_Init`.
#[derive(Clone, Debug)]
pub(crate) struct OscPlan {
    component: String,
    how: String,
}

/// The one-sided component in use and how it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OscChoice {
    /// `rdma`, `pt2pt`, `ucx`, …
    pub component: String,
    /// Where the choice came from, in words.
    pub how: String,
}

impl OscChoice {
    /// How its one-sided operations move, for the header.
    pub fn rma_note(&self) -> String {
        match self.component.as_str() {
            "pt2pt" => "emulated: puts and gets are messages the target's progress engine serves".into(),
            "rdma" => "emulated unless shown otherwise: osc rdma over the BTL (shared memory or tcp here), counted as served by the target's progress".into(),
            other => format!("osc {other}: counted as emulated and served by the target's progress"),
        }
    }
}

/// Settle the component for an Open MPI `library` (from
/// `MPI_Get_library_version`); `None` for another library.
pub(crate) fn plan(library: &str) -> Option<OscPlan> {
    if !library.contains("Open MPI") {
        return None;
    }
    let user = std::env::var("OMPI_MCA_osc").ok();
    let btl = std::env::var("OMPI_MCA_btl").ok();
    Some(match user.as_deref().map(str::trim) {
        Some(one) if is_single(one) => OscPlan {
            component: one.to_string(),
            how: "OMPI_MCA_osc".into(),
        },
        other => {
            let (pick, why) = if btl_without_rdma(btl.as_deref()) {
                (
                    TCP_OSC,
                    format!(
                        "; OMPI_MCA_btl={} has no shared-memory BTL, over which alone Open MPI 4.1's osc rdma creates dynamic windows",
                        btl.as_deref().unwrap_or_default()
                    ),
                )
            } else {
                (DEFAULT_OSC, String::new())
            };
            // Before MPI_Init and before any thread of ours starts.
            std::env::set_var("OMPI_MCA_osc", pick);
            OscPlan {
                component: pick.into(),
                how: match other {
                    None => format!("set by ovbench (OMPI_MCA_osc={pick}; it was unset{why})"),
                    Some(v) => format!(
                        "set by ovbench (OMPI_MCA_osc={pick}; it was `{v}`, which leaves Open MPI several{why})"
                    ),
                },
            }
        }
    })
}

/// One component named, not a list or an exclusion.
fn is_single(v: &str) -> bool {
    !v.is_empty() && !v.contains([',', '^', ' '])
}

impl OscPlan {
    /// The choice, checked against the library's `osc` variable read
    /// after `MPI_Init` (`None` when the library has none to read).
    pub(crate) fn confirm(self, seen: Option<String>) -> OscChoice {
        match seen {
            Some(s) if s.trim() != self.component => OscChoice {
                component: s.trim().to_string(),
                how: format!(
                    "the library's osc variable says `{}` where ovbench expected `{}` ({})",
                    s.trim(),
                    self.component,
                    self.how
                ),
            },
            _ => OscChoice {
                component: self.component,
                how: self.how,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_component_is_kept_and_lists_are_not() {
        assert!(is_single("pt2pt"));
        assert!(!is_single("^ucx,pt2pt"));
        assert!(!is_single("rdma,pt2pt"));
        assert!(!is_single(""));
    }

    #[test]
    fn tcp_alone_takes_pt2pt() {
        assert!(btl_without_rdma(Some("self,tcp")));
        assert!(!btl_without_rdma(Some("self,vader")));
        assert!(!btl_without_rdma(Some("self,vader,tcp")));
        assert!(!btl_without_rdma(Some("^openib")));
        assert!(!btl_without_rdma(None));
    }

    #[test]
    fn a_disagreeing_library_is_reported() {
        let p = OscPlan {
            component: "rdma".into(),
            how: "OMPI_MCA_osc".into(),
        };
        let c = p.clone().confirm(Some("rdma".into()));
        assert_eq!(c.component, "rdma");
        let c = p.confirm(Some("pt2pt".into()));
        assert_eq!(c.component, "pt2pt");
        assert!(c.how.contains("expected `rdma`"), "{}", c.how);
    }
}
