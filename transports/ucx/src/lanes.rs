//! Who serves one-sided operations: offloaded (an RDMA NIC moves the
//! data) or the target's progress engine (tcp, and UCP's software RMA
//! emulation over active-message lanes when no transport has put/get,
//! e.g. `posix` or `sysv` alone).
//!
//! The answer comes from the endpoint's lane table (`ucp_ep_print_info`),
//! which names the transport of each `rma_bw` lane; before an endpoint
//! exists, the transport list gives a first guess. Shared-memory lanes
//! (cma, knem, xpmem) are *not* counted as offloaded: with UCX 1.13 a get
//! or put over `shm` — whose lane table shows a cma `rma_bw` lane — never
//! completes while the target does not poll, at 4 KiB and at 1 MiB
//! (`tests/pair.rs` checks it), so the target's progress serves it.
//!
//! Whether RMA is *native* or *emulated* is decided by what moves the
//! bytes. Over tcp the data travels as socket messages that the target's
//! UCX unpacks, and UCP's software RMA is active messages: both are
//! emulated. A shared-memory lane (cma, knem, xpmem) moves the bytes by a
//! direct cross-process copy with no message for the target to unpack, so
//! it counts as native — served by the target's progress only because
//! UCX 1.13 completes it there (a judgement call: the copy itself is a
//! real one-sided access).

use ovbench_core::{RmaKind, RmaProgress};

/// UCT transports whose put/get need no CPU at the target (RDMA NICs).
const OFFLOADED: &[&str] = &[
    "rc", "rc_v", "rc_x", "rc_mlx5", "rc_verbs", "dc", "dc_x", "dc_mlx5", "gga",
];

/// UCT transports whose put/get travel as messages the target unpacks.
const EMULATED: &[&str] = &["tcp", "ud", "ud_v", "ud_x", "ud_mlx5", "sockcm"];

/// How RMA reaches the peer, for caps and the header.
#[derive(Clone, Debug)]
pub struct RmaPath {
    /// Native (RDMA or cross-memory copy) or emulated (messages).
    pub kind: RmaKind,
    pub progress: RmaProgress,
    /// The transports of the RMA lanes, e.g. `cma/memory` or `tcp/lo`.
    pub lanes: String,
    /// Why `progress` was chosen, in words.
    pub reason: String,
}

/// Whether to ask for peer-failure detection (error mode PEER): UCX's
/// shared-memory transports have no failure handler and refuse it (with
/// an error on stderr), so a list of only those connects without.
pub(crate) fn detects_peer_failure(tls: &str) -> bool {
    const SHM_ONLY: &[&str] = &[
        "self", "shm", "sm", "posix", "sysv", "mm", "cma", "knem", "xpmem",
    ];
    !tls.split(',').all(|n| SHM_ONLY.contains(&n))
}

/// A first guess from `UCX_TLS`, before any endpoint exists.
pub(crate) fn guess(tls: &str) -> RmaPath {
    let names: Vec<&str> = tls.split(',').collect();
    let offload = names.iter().any(|n| *n == "ib" || OFFLOADED.contains(n));
    let direct = names
        .iter()
        .any(|n| matches!(*n, "shm" | "sm" | "cma" | "knem" | "xpmem" | "all"));
    RmaPath {
        kind: if offload || direct {
            RmaKind::Native
        } else {
            RmaKind::Emulated
        },
        progress: if offload {
            RmaProgress::Offloaded
        } else {
            RmaProgress::TargetProgress
        },
        lanes: String::new(),
        reason: format!("guessed from UCX_TLS={tls} before connecting"),
    }
}

/// Parse a lane table as `ucp_ep_print_info` prints it: lines such as
/// `lane[1]:  2:cma/memory.0 md[2] -> md[2]/cma/sysdev[255] rma_bw#0`.
pub(crate) fn from_lane_table(table: &str) -> RmaPath {
    let mut rma = Vec::new();
    for line in table.lines().filter(|l| l.contains("lane[")) {
        if !line
            .split_whitespace()
            .any(|w| w.starts_with("rma_bw") || w.starts_with("rma#"))
        {
            continue;
        }
        // "N:tl/dev.idx" right after the lane label.
        if let Some(tl) = line
            .split_whitespace()
            .find_map(|w| {
                w.split_once(':')
                    .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
            })
            .map(|(_, rest)| rest.to_string())
        {
            rma.push(tl);
        }
    }
    rma.sort();
    rma.dedup();
    let tl_of = |s: &String| s.split('/').next().unwrap_or("").to_string();
    if rma.is_empty() {
        return RmaPath {
            kind: RmaKind::Emulated,
            progress: RmaProgress::TargetProgress,
            lanes: "none (software RMA over active messages)".into(),
            reason: "no transport in UCX_TLS has put/get to this peer: UCP emulates RMA with active messages served by the target's progress, one per segment of the active-message transport (over tcp UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE: larger segments, fewer round trips)".into(),
        };
    }
    let all_off = rma.iter().all(|l| OFFLOADED.contains(&tl_of(l).as_str()));
    let by_messages = rma.iter().any(|l| EMULATED.contains(&tl_of(l).as_str()));
    RmaPath {
        kind: if by_messages {
            RmaKind::Emulated
        } else {
            RmaKind::Native
        },
        progress: if all_off {
            RmaProgress::Offloaded
        } else {
            RmaProgress::TargetProgress
        },
        lanes: rma.join(" "),
        reason: if all_off {
            "the RMA lanes are RDMA: the NIC moves the data without the target's CPU".into()
        } else {
            "RMA is served by the target's progress engine (tcp: the target's UCX reads the socket; shared memory: UCX 1.13 completes it only once the target polls), not offloaded".into()
        },
    }
}

/// Every lane of a lane table with what UCX uses it for, for the header:
/// `rc_verbs/rxe0:1.0 (am am_bw rma_bw)` per lane, `; `-separated (a
/// lane's `#N` rail index dropped), and the connection manager of a
/// client-server endpoint as `cm rdmacm` (or `cm tcp`).
pub(crate) fn summary(table: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in table.lines().filter(|l| l.contains("lane[")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        // The client-server path's connection manager: `lane[2]: cm rdmacm`.
        if let Some(i) = words.iter().position(|w| *w == "cm") {
            if let Some(cm) = words.get(i + 1) {
                out.push(format!("cm {cm}"));
            }
            continue;
        }
        let Some(tl) = words.iter().find_map(|w| {
            w.split_once(':')
                .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                .map(|(_, rest)| rest)
        }) else {
            continue;
        };
        // The usage words follow the remote md ("-> md[4]/ib/sysdev[255]").
        let uses: Vec<&str> = words
            .iter()
            .skip_while(|w| **w != "->")
            .skip(2)
            .map(|w| w.split('#').next().unwrap_or(w))
            .collect();
        out.push(format!("{tl} ({})", uses.join(" ")));
    }
    if out.is_empty() {
        "unknown (UCX printed no lane table)".into()
    } else {
        out.join("; ")
    }
}

/// Correct the connection manager's name where UCX 1.13 gets it wrong:
/// it prints the name at the endpoint's index in the context's list
/// (rdmacm, tcp), but the index counts only the managers the worker
/// could open, so where rdmacm cannot open (no `/dev/infiniband/rdma_cm`)
/// the tcp one is printed as rdmacm.
pub(crate) fn name_cm(summary: String, rdmacm_opens: bool) -> String {
    if rdmacm_opens || !summary.contains("cm rdmacm") {
        return summary;
    }
    summary.replace(
        "cm rdmacm",
        "cm tcp (UCX names it rdmacm: it counts only the connection managers that opened, and rdmacm cannot open here)",
    )
}

/// The transport/device pairs of a context, from `ucp_context_print_info`
/// lines such as `#      resource 1  :  md 1  dev 1  flags -- tcp/lo`.
pub(crate) fn resources(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.contains("resource") && l.contains("--"))
        .filter_map(|l| l.rsplit("--").next())
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_lane_tables() {
        let cma = "#  lane[0]:  1:posix/memory.0 md[1] -> md[1]/posix/sysdev[255] am am_bw#0\n#  lane[1]:  3:cma/memory.0 md[3] -> md[3]/cma/sysdev[255] rma_bw#0\n";
        let p = from_lane_table(cma);
        assert_eq!(p.progress, RmaProgress::TargetProgress);
        assert_eq!(p.kind, RmaKind::Native);
        assert_eq!(p.lanes, "cma/memory.0");
        let rc = "#  lane[1]:  2:rc_mlx5/mlx5_0:1.0 md[2] -> md[2]/ib/sysdev[255] rma_bw#0\n";
        assert_eq!(from_lane_table(rc).progress, RmaProgress::Offloaded);
        let tcp = "#  lane[0]:  1:tcp/lo.0 md[1] -> md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0\n";
        let p = from_lane_table(tcp);
        assert_eq!(p.progress, RmaProgress::TargetProgress);
        assert_eq!(p.lanes, "tcp/lo.0");
        assert_eq!(p.kind, RmaKind::Emulated);
        let none = "#  lane[0]:  1:posix/memory.0 md[1] -> md[1]/posix/sysdev[255] am am_bw#0\n";
        assert_eq!(from_lane_table(none).progress, RmaProgress::TargetProgress);
        assert_eq!(from_lane_table(none).kind, RmaKind::Emulated);
        assert_eq!(guess("tcp,self").kind, RmaKind::Emulated);
        assert_eq!(guess("posix,cma,self").kind, RmaKind::Native);
    }

    #[test]
    fn peer_failure_only_where_a_network_transport_is_listed() {
        assert!(detects_peer_failure("tcp,self"));
        assert!(detects_peer_failure("all"));
        assert!(!detects_peer_failure("posix,self"));
        assert!(!detects_peer_failure("shm,self"));
    }

    #[test]
    fn reads_context_resources() {
        let t = "#            md 0  :  component 0  self \n#      resource 0  :  md 0  dev 0  flags -- self/memory0\n#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n";
        assert_eq!(resources(t), ["self/memory0", "tcp/lo"]);
    }

    #[test]
    fn summarises_every_lane() {
        let t = "#   lane[0]:  8:rc_verbs/rxe0:1.0 md[4] -> md[4]/ib/sysdev[255] rma_bw#0 am am_bw#0\n#   lane[1]:  0:self/memory0.0 md[0] -> md[0]/self/sysdev[255] rma_bw#1 wireup\n#                 lane[2]: cm rdmacm\n";
        assert_eq!(
            summary(t),
            "rc_verbs/rxe0:1.0 (rma_bw am am_bw); self/memory0.0 (rma_bw wireup); cm rdmacm"
        );
        assert!(summary("").starts_with("unknown"));
        let cm = "tcp/lo.0 (am); cm rdmacm".to_string();
        assert_eq!(name_cm(cm.clone(), true), cm);
        assert!(name_cm(cm, false).contains("cm tcp (UCX names it rdmacm"));
    }

    #[test]
    fn guesses_from_tls() {
        assert_eq!(guess("shm,self").progress, RmaProgress::TargetProgress);
        assert_eq!(guess("rc_x,self").progress, RmaProgress::Offloaded);
        assert_eq!(guess("posix,self").progress, RmaProgress::TargetProgress);
        assert_eq!(guess("tcp,self").progress, RmaProgress::TargetProgress);
    }
}
