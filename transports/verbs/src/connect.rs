//! Bringing every peer's queue pair to RTS: from the bootstrap address
//! bytes (LID, GID, QPN, PSN, MTU) written by hand, or through rdma_cm
//! with `--cm`. Both check every address from the wire first.

use std::net::Ipv4Addr;
use std::time::Duration;

use ovbench_core::fabric::peers;
use ovbench_core::{OpKind, Rank, TransportError};

use crate::cm::CmPeer;
use crate::credits::Credits;
use crate::qp::{RtrAttr, RtsAttr};
use crate::transport::VerbsTransport;
use crate::wire::{Address, MSG_HDR};

/// How long rdma_cm may take to connect every peer.
const CM_DEADLINE: Duration = Duration::from_secs(30);

fn cerr(peer: Rank, status: String) -> TransportError {
    TransportError::Peer {
        peer,
        op: OpKind::Connect,
        status,
    }
}

impl VerbsTransport {
    pub(crate) fn connect_all(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        peers::check_connect(addresses, self.size, self.connected)?;
        let own_buf = (self.opts.eager_buf_size + MSG_HDR) as u32;
        let me = self.rank as usize;
        let mut addrs: Vec<Option<Address>> = Vec::with_capacity(addresses.len());
        for (r, bytes) in addresses.iter().enumerate() {
            if r == me {
                addrs.push(None);
                continue;
            }
            let peer = r as Rank;
            let a = Address::decode(bytes, self.size).map_err(|e| cerr(peer, e))?;
            if a.buf_size != own_buf {
                return Err(cerr(
                    peer,
                    format!(
                        "rank {peer} uses {}-byte receive buffers, this rank {own_buf}: start every rank with the same eager buffer size",
                        a.buf_size
                    ),
                ));
            }
            if a.qps[me].0 == 0 {
                return Err(cerr(
                    peer,
                    format!("rank {peer} announced no queue pair for rank {me}"),
                ));
            }
            if self.cm.is_some() != a.cm.is_some() {
                return Err(cerr(
                    peer,
                    format!("rank {peer} and this rank disagree about --cm: start every rank with the same options"),
                ));
            }
            addrs.push(Some(a));
        }
        if self.cm.is_some() {
            self.connect_cm(&addrs)?;
        } else {
            self.connect_manual(&addrs)?;
        }
        for (p, a) in self.peers.iter_mut().zip(&addrs) {
            if let (Some(p), Some(a)) = (p.as_mut(), a) {
                p.credits = Some(Credits::new(p.rx_window, a.rx_window));
            }
        }
        self.connected = true;
        Ok(())
    }

    fn connect_manual(&mut self, addrs: &[Option<Address>]) -> Result<(), TransportError> {
        let me = self.rank as usize;
        let own_mtu = self.mtu_code();
        let d = &self.dev;
        for (r, a) in addrs.iter().enumerate() {
            let (Some(p), Some(a)) = (self.peers[r].as_mut(), a) else {
                continue;
            };
            let peer = r as Rank;
            let (dest_qpn, rq_psn) = a.qps[me];
            let rtr = RtrAttr {
                port: d.port,
                dest_qpn,
                rq_psn,
                mtu: a.mtu.min(own_mtu) as u32,
                dlid: a.lid,
                global: d.port_attr.ethernet || a.gid != [0; 16],
                dgid: a.gid,
                sgid_index: u8::try_from(d.gid_index).unwrap_or(0),
                sl: self.opts.sl,
                traffic_class: self.opts.tclass,
                max_dest_rd_atomic: d.attr.max_qp_rd_atom.max(1),
                min_rnr_timer: 12,
            };
            p.qp.to_rtr(&rtr).map_err(|e| cerr(peer, e.to_string()))?;
            let rts = RtsAttr {
                sq_psn: p.psn,
                timeout: self.opts.timeout,
                retry_cnt: self.opts.retry_cnt,
                rnr_retry: self.opts.rnr_retry,
                max_rd_atomic: d.attr.max_qp_init_rd_atom.max(1),
            };
            p.qp.to_rts(&rts).map_err(|e| cerr(peer, e.to_string()))?;
        }
        Ok(())
    }

    fn connect_cm(&mut self, addrs: &[Option<Address>]) -> Result<(), TransportError> {
        let me = self.rank;
        let mut targets = Vec::new();
        for (r, (p, a)) in self.peers.iter().zip(addrs).enumerate() {
            let (Some(p), Some(a)) = (p.as_ref(), a) else {
                continue;
            };
            let addr = if (r as Rank) < me {
                let (ip, port) = a.cm.expect("checked: every address has a cm part");
                Some((Ipv4Addr::from(ip), port))
            } else {
                None
            };
            targets.push(CmPeer {
                rank: r as Rank,
                qp: &p.qp,
                addr,
            });
        }
        let d = &self.dev;
        let rd_atomic = (
            d.attr.max_qp_rd_atom.max(1),
            d.attr.max_qp_init_rd_atom.max(1),
        );
        let retry = (self.opts.retry_cnt, self.opts.rnr_retry);
        let cm = self.cm.as_mut().expect("connect_cm only with --cm");
        cm.connect(
            me,
            &targets,
            rd_atomic,
            retry,
            self.opts.timeout,
            CM_DEADLINE,
        )
        .map_err(|(peer, e)| match peer {
            Some(p) => cerr(p, format!("rdma_cm: {e}")),
            None => TransportError::Local {
                op: OpKind::Connect,
                detail: format!("rdma_cm: {e}"),
            },
        })
    }
}
