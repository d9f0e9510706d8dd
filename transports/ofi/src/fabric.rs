//! Provider selection (`fi_getinfo`) and the objects one rank needs:
//! fabric, domain, an `FI_EP_RDM` endpoint, an address vector and one
//! completion queue for both directions (see [`crate::fi`]; each closes
//! itself, children first).

use std::sync::OnceLock;

use ovbench_core::{OpKind, TransportError};
use ovbench_ofi_sys as sys;

use crate::error::{fi_str, local};
use crate::fi::av::MAX_ADDR;
use crate::fi::fabric::Hints;
use crate::fi::{AddressVector, CompletionQueue, Domain, Fabric, Info, RdmEndpoint};
use crate::shm_name;

/// Completion queue depth.
const CQ_SIZE: usize = 4096;
/// Smallest universe size ovbench gives libfabric.
const MIN_UNIVERSE: usize = 16;
/// libfabric's environment variable for the number of peer processes.
const UNIVERSE_VAR: &str = "FI_UNIVERSE_SIZE";

/// How many peers libfabric sizes its resources for (`FI_UNIVERSE_SIZE`).
#[derive(Clone, Debug)]
pub(crate) struct Universe {
    /// The value in effect (`None`: the user's value does not parse, and
    /// libfabric decides what it means).
    pub size: Option<usize>,
    /// Whether ovbench chose it (the variable was unset).
    pub ours: bool,
}

impl Universe {
    /// One line for the header.
    pub fn describe(&self) -> String {
        match (self.size, self.ours) {
            (Some(n), true) => format!(
                "{n} (FI_UNIVERSE_SIZE was unset: ovbench set it to the rank count, at least {MIN_UNIVERSE}; ofi_rxm sizes its core provider's completion queue for this many peers, and libfabric's default of 256 exceeds soft-RoCE's max_cqe)"
            ),
            (Some(n), false) => format!("{n} (FI_UNIVERSE_SIZE from the environment)"),
            (None, _) => "FI_UNIVERSE_SIZE from the environment, not a number".into(),
        }
    }
}

/// Give libfabric a universe size before its first call in this process.
///
/// ofi_rxm sizes the completion queue of its core provider as
/// `(msg rx size + msg tx size) × universe size`; with libfabric's default
/// universe of 256 that is 65536 entries over verbs, which soft-RoCE
/// (rxe, `max_cqe` 32767) refuses, so `verbs;ofi_rxm` could not open
/// (ofiwg/libfabric#10692). No `fi_info` attribute bounds it: libfabric
/// reads `FI_UNIVERSE_SIZE` once, when it initialises on the first
/// `fi_getinfo`. So, when the user has not set it, ovbench sets it to the
/// run's rank count (at least [`MIN_UNIVERSE`]) here, once per process
/// and before any libfabric call of this crate; a value the user set is
/// left alone. The first transport opened in a process decides.
pub(crate) fn universe(ranks: u32) -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(|| match std::env::var(UNIVERSE_VAR) {
        Ok(v) => Universe {
            size: v.trim().parse().ok(),
            ours: false,
        },
        Err(_) => {
            let n = (ranks as usize).max(MIN_UNIVERSE);
            // Changing the environment races with C code reading it on
            // another thread (getenv is not synchronised with setenv).
            // This runs once, before this process's first libfabric call
            // (which is what reads it), inside a OnceLock that holds back
            // every other rank of the process; Rust's own env readers take
            // std's lock.
            std::env::set_var(UNIVERSE_VAR, n.to_string());
            Universe {
                size: Some(n),
                ours: true,
            }
        }
    })
}

/// What the chosen provider offers, read from its `fi_info`.
#[derive(Clone, Debug)]
pub(crate) struct Attrs {
    pub provider: String,
    pub fabric: String,
    pub domain: String,
    pub mr_mode: u32,
    pub inject_size: usize,
    pub data_progress_auto: bool,
    /// The provider offers `FI_DELIVERY_COMPLETE` on this endpoint.
    pub delivery_complete: bool,
    /// The provider offers `FI_MATCH_COMPLETE` (completion once matched
    /// with a posted receive: a synchronous send).
    pub match_complete: bool,
    pub addr_len: usize,
    pub addr_format: u32,
    pub wait_fd: Option<libc::c_int>,
    pub max_msg_size: usize,
    /// The universe size libfabric was initialised with.
    pub universe: Universe,
}

/// The libfabric objects of one rank, in the order they close (each
/// keeps its parents open, so the order is libfabric's whatever it is).
pub(crate) struct Libfabric {
    /// The endpoint, with its completion queue; left open at drop where
    /// [`close_crashes`] says its provider's close crashes.
    pub ep: RdmEndpoint,
    pub av: AddressVector,
    pub domain: Domain,
    pub fabric: Fabric,
    pub attrs: Attrs,
    pub address: Vec<u8>,
}

/// Whether closing this provider's endpoint can crash the process.
/// verbs;ofi_rxm (libfabric 1.17, Debian 12's) dereferences a freed
/// connection in `fi_close` of the endpoint when a completion (a credit
/// message of its core provider) is still queued: rxm closes the
/// connections' msg endpoints and only then flushes their shared
/// completion queue (fixed upstream in 2026 by ofiwg/libfabric#12674).
/// The 20 ms of progress before the close (`settle_rxm`) made it rare,
/// not impossible: one ofi-rdma-write run of the soft-RoCE VM still
/// crashed there after printing its results. Such an endpoint is left
/// open (`RdmEndpoint::leave_open_at_drop`), with the queue, address
/// vector, domain and fabric it keeps open: the process's exit releases
/// them (the kernel destroys the queue pairs, the peer sees the
/// connection close), and a process opens one endpoint per run.
fn close_crashes(provider: &str) -> bool {
    let has = |layer: &str| provider.split(';').any(|p| p == layer);
    has("verbs") && has("ofi_rxm")
}

fn getinfo(provider: &str, node: Option<&str>, op_flags: u64) -> Result<Info, i32> {
    Info::get(&Hints {
        provider,
        node,
        op_flags,
    })
}

fn opening(call: &str, rc: i32) -> TransportError {
    local(OpKind::Connect, call, i64::from(rc), "")
}

impl Libfabric {
    /// Pick the first provider entry matching `provider` (bound to `node`
    /// where it takes an address) and open everything.
    /// `wait_fd`: give the completion queue a file-descriptor wait object
    /// (for a progress thread that sleeps on it). Without one the CQ is
    /// poll-only, as fi_pingpong's: with tcp;ofi_rxm an fd-backed CQ cost a
    /// signalling write and a read on every completion (~0.9 µs of a
    /// 9 µs one-way 8-byte latency).
    /// `ranks`: the run's rank count, libfabric's universe size unless
    /// the user set `FI_UNIVERSE_SIZE` (see [`universe`]).
    pub fn open(
        provider: &str,
        node: Option<&str>,
        wait_fd: bool,
        ranks: u32,
    ) -> Result<Libfabric, TransportError> {
        let universe = universe(ranks).clone();
        // Does the provider know match completion at all?
        let mc = getinfo(provider, node, u64::from(sys::FI_MATCH_COMPLETE)).is_ok();
        // Learn whether the provider offers delivery completion (used per
        // operation; the endpoint's defaults stay cheap).
        let (mut info, dc) = match getinfo(provider, node, u64::from(sys::FI_DELIVERY_COMPLETE)) {
            Ok(i) => (i, true),
            Err(_) => match getinfo(provider, node, 0) {
                Ok(i) => (i, false),
                Err(rc) => {
                    return Err(local(
                        OpKind::Connect,
                        &format!("fi_getinfo(provider {provider:?}, node {node:?}, FI_EP_RDM, FI_MSG|FI_RMA|FI_TAGGED)"),
                        i64::from(rc),
                        "; `fi_info -l` lists the providers this libfabric has (try tcp;ofi_rxm, shm or sockets)",
                    ))
                }
            },
        };
        let mut attrs = Attrs {
            provider: info.provider(),
            fabric: info.fabric_name(),
            domain: info.domain_name(),
            mr_mode: info.mr_mode(),
            inject_size: info.inject_size(),
            data_progress_auto: info.data_progress_auto(),
            delivery_complete: dc,
            match_complete: mc,
            addr_len: 0,
            addr_format: info.addr_format(),
            wait_fd: None,
            max_msg_size: info.max_msg_size(),
            universe,
        };
        // Writes and synchronous sends ask for delivery completion per
        // operation; everything else keeps the cheaper default.
        info.clear_op_flags();
        let fabric = Fabric::open(&info).map_err(|rc| opening("fi_fabric", rc))?;
        let domain = Domain::open(&fabric, &info).map_err(|rc| opening("fi_domain", rc))?;
        let cq = CompletionQueue::open(&domain, CQ_SIZE, wait_fd)
            .map_err(|rc| opening("fi_cq_open", rc))?;
        attrs.wait_fd = cq.wait_fd();
        let av = AddressVector::open(&domain).map_err(|rc| opening("fi_av_open", rc))?;
        let name = (attrs.provider == "shm").then(shm_name::unique);
        let mut ep = RdmEndpoint::open(&domain, &info, cq, &av, name)
            .map_err(|(call, rc)| opening(call, rc))?;
        if close_crashes(&attrs.provider) {
            ep.leave_open_at_drop();
        }
        let address = ep
            .name()
            .map_err(|rc| local(OpKind::Connect, "fi_getname", i64::from(rc), ""))?;
        attrs.addr_len = address.len();
        Ok(Libfabric {
            ep,
            av,
            domain,
            fabric,
            attrs,
            address,
        })
    }

    /// Insert every rank's address; returns the fi_addr of each.
    pub fn insert(&mut self, addrs: &[Vec<u8>]) -> Result<Vec<sys::fi_addr_t>, TransportError> {
        let mut out = Vec::with_capacity(addrs.len());
        for (r, a) in addrs.iter().enumerate() {
            // Fixed-format addresses (sockaddr) have one length; string
            // addresses (shm names) vary. Either way the AV copies the
            // bytes into a zeroed buffer so the provider cannot read past
            // them.
            let fixed = self.attrs.addr_format != sys::FI_ADDR_STR;
            if a.is_empty() || a.len() >= MAX_ADDR || (fixed && a.len() != self.attrs.addr_len) {
                return Err(TransportError::Peer {
                    peer: r as u32,
                    op: OpKind::Connect,
                    status: format!(
                        "its {}-byte libfabric address does not fit this provider's {}-byte addresses; all ranks must use the same --provider",
                        a.len(),
                        self.attrs.addr_len
                    ),
                });
            }
            let fa = self.av.insert(a).map_err(|n| TransportError::Peer {
                peer: r as u32,
                op: OpKind::Connect,
                status: format!(
                    "fi_av_insert returned {n} ({}); its address is not valid for this provider",
                    fi_str(i64::from(n.min(0)))
                ),
            })?;
            out.push(fa);
        }
        Ok(out)
    }

    /// `fi_trywait` on the CQ: whether sleeping on its fd is safe now.
    pub fn trywait(&self) -> bool {
        self.fabric.trywait(self.ep.cq())
    }
}

#[cfg(test)]
mod tests {
    use super::close_crashes;

    #[test]
    fn only_verbs_under_rxm_is_left_open() {
        assert!(close_crashes("verbs;ofi_rxm"));
        for p in [
            "tcp;ofi_rxm",
            "shm",
            "verbs",
            "sockets",
            "ofi_rxm",
            "verbs;ofi_rxd",
        ] {
            assert!(!close_crashes(p), "{p}");
        }
    }
}
