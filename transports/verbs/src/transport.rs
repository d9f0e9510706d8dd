//! [`VerbsTransport`]: the ovbench [`Transport`] contract over RC queue
//! pairs (one per peer), with credit-counted sends into pre-posted
//! receive buffers and native RDMA write and read.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, CompletionTime, Ctx, Idle, LocalSlice, MrHandle,
    Msg, OpKind, Posted, Progress, Rank, RegionId, Registered, RmaKind, RmaOp, RmaProgress,
    Transport, TransportError, TransportInfo,
};

use crate::cm::CmEndpoint;
use crate::cq::{CqConfig, WorkCompletion};
use crate::credits::{Credits, MAX_WINDOW};
use crate::memory::Memory;
use crate::options::{mtu_bytes, mtu_code};
use crate::peer::{is_queue_full, OpTable, Peer, Pending};
use crate::qp::{QpCap, SendOp, Sge};
use crate::setup::{self, Device};
use crate::timestamp::{host_monotonic_ns, NicClock};
use crate::wire::{Address, MsgKind, MSG_HDR};
use crate::{CompChannel, CompletionQueue, VerbsError, VerbsOptions};

/// The verbs transport. Fields drop in declaration order: connections
/// first, then `mem` (registrations, then the memory they cover), then
/// the CQ.
pub struct VerbsTransport {
    pub(crate) peers: Vec<Option<Peer>>,
    mem: Memory,
    pub(crate) cq: CompletionQueue,
    pub(crate) channel: CompChannel,
    pub(crate) dev: Device,
    pub(crate) opts: VerbsOptions,
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    pub(crate) ops: OpTable,
    pub(crate) wcs: Vec<WorkCompletion>,
    pub(crate) stash: Vec<Completion>,
    pub(crate) pool: Vec<Vec<u8>>,
    pub(crate) connected: bool,
    pub(crate) armed: bool,
    pub(crate) nic_clock: Option<NicClock>,
    /// NIC completion times of the last poll's completions (index in its
    /// `out`, host time); only filled when `nic_clock` is set.
    pub(crate) nic_times: Vec<(usize, Instant)>,
    /// The same for `stash` (completions reaped by `block`).
    pub(crate) stash_times: Vec<(usize, Instant)>,
    /// Empty polls of a caller that keeps waiting, and since when (see
    /// [`VerbsTransport::idle_wait`]).
    pub(crate) idle_polls: u32,
    pub(crate) idle_since: Option<Instant>,
    /// With `--cm`: the rdma_cm listener and connection ids.
    pub(crate) cm: Option<CmEndpoint>,
}

impl VerbsTransport {
    /// Open the device, create the CQ and one RC QP per peer (in INIT,
    /// receive buffers posted). [`Transport::connect`] finishes the job.
    pub fn new(rank: Rank, size: u32, opts: VerbsOptions) -> Result<VerbsTransport, VerbsError> {
        if rank >= size {
            return Err(VerbsError::Config(format!(
                "rank {rank} is not below the job size {size}"
            )));
        }
        if !(1..=MAX_WINDOW).contains(&opts.rx_depth) || opts.tx_depth == 0 {
            return Err(VerbsError::Config(format!(
                "--rx-depth must be 1..={MAX_WINDOW} and --tx-depth at least 1 (got {} and {})",
                opts.rx_depth, opts.tx_depth
            )));
        }
        if opts.eager_buf_size < 64 || opts.eager_buf_size > (1 << 30) {
            return Err(VerbsError::Config(format!(
                "eager buffer size {} must be between 64 bytes and 1 GiB",
                opts.eager_buf_size
            )));
        }
        if let Some(m) = opts.mtu {
            if mtu_code(m).is_none() {
                return Err(VerbsError::Config(format!(
                    "--mtu {m} is not one of 256, 512, 1024, 2048, 4096"
                )));
            }
        }
        let dev = setup::open(&opts)?;
        let buf_size = opts.eager_buf_size + MSG_HDR;
        let rx_count = opts.rx_depth + Credits::spare(opts.rx_depth);
        let npeers = size.saturating_sub(1);
        let cqe = npeers
            .max(1)
            .saturating_mul(opts.tx_depth.saturating_add(rx_count));
        if cqe > dev.attr.max_cqe
            || opts.tx_depth > dev.attr.max_qp_wr
            || rx_count > dev.attr.max_qp_wr
        {
            return Err(VerbsError::Config(format!(
                "{} ranks with --tx-depth {} and --rx-depth {} need {cqe} CQ entries and {} queue entries; \
                 {} allows {} and {}: lower the depths",
                size,
                opts.tx_depth,
                opts.rx_depth,
                opts.tx_depth.max(rx_count),
                dev.ctx.name(),
                dev.attr.max_cqe,
                dev.attr.max_qp_wr
            )));
        }
        let channel = dev.ctx.comp_channel()?;
        let cq = CompletionQueue::new(
            &dev.ctx,
            CqConfig {
                cqe,
                extended: opts.extended_cq,
                timestamps: opts.timestamps && dev.attr.completion_timestamp_mask != 0,
            },
            Some(&channel),
        )?;
        let nic_clock = if cq.has_timestamps() {
            NicClock::calibrate(
                dev.attr.hca_core_clock_khz,
                dev.attr.completion_timestamp_mask,
                Duration::from_millis(5),
                || dev.ctx.raw_clock(),
            )
        } else {
            None
        };
        let cm = if opts.cm {
            let g = dev.gid;
            if g[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
                return Err(VerbsError::Config(format!(
                    "--cm needs an IPv4 address on {} port {}: GID {} ({}) is not IPv4-mapped; \
                     give its netdev an IPv4 address or pick its GID with --gid-index",
                    dev.ctx.name(),
                    dev.port,
                    dev.gid_index,
                    crate::setup::gid_text(&g)
                )));
            }
            let ip = std::net::Ipv4Addr::new(g[12], g[13], g[14], g[15]);
            Some(CmEndpoint::listen(ip).map_err(|e| {
                VerbsError::Config(format!("--cm: listening on {ip} with rdma_cm failed: {e}"))
            })?)
        } else {
            None
        };
        let mut t = VerbsTransport {
            peers: Vec::new(),
            mem: Memory::default(),
            cq,
            channel,
            dev,
            opts,
            rank,
            size,
            ops: OpTable::default(),
            wcs: Vec::with_capacity(64),
            stash: Vec::new(),
            pool: Vec::new(),
            connected: false,
            armed: false,
            nic_clock,
            nic_times: Vec::new(),
            stash_times: Vec::new(),
            idle_polls: 0,
            idle_since: None,
            cm,
        };
        let seed = host_monotonic_ns() ^ ((std::process::id() as u64) << 20);
        for r in 0..size {
            if r == rank {
                t.peers.push(None);
                continue;
            }
            let peer = t.make_peer(r, buf_size, rx_count, seed)?;
            t.peers.push(Some(peer));
        }
        Ok(t)
    }

    fn make_peer(
        &mut self,
        r: Rank,
        buf_size: usize,
        rx_count: u32,
        seed: u64,
    ) -> Result<Peer, VerbsError> {
        let o = self.opts.clone();
        let qp = crate::QueuePair::new_rc(
            &self.dev.pd,
            &self.cq,
            QpCap {
                max_send_wr: o.tx_depth,
                max_recv_wr: rx_count,
                max_inline_data: o.inline_size,
            },
        )?;
        qp.to_init(self.dev.port)?;
        let (rx, rx_mr) = self.mem.ring(&self.dev.pd, buf_size * rx_count as usize)?;
        let (tx, tx_mr) = self
            .mem
            .ring(&self.dev.pd, buf_size * o.tx_depth as usize)?;
        let psn = ((seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as u32 ^ r.wrapping_mul(7919))
            & 0xFF_FFFF;
        let inline = qp.cap.max_inline_data.min(o.inline_size);
        Peer::new(
            r, psn, qp, rx, rx_mr, tx, tx_mr, buf_size, o.rx_depth, o.tx_depth, inline,
        )
        .map_err(|e| VerbsError::call("ibv_post_recv", self.dev.ctx.name(), e))
    }

    /// The NIC clock conversion, when completions carry NIC timestamps.
    pub fn nic_clock(&self) -> Option<&NicClock> {
        self.nic_clock.as_ref()
    }

    /// The host time of the most recent completion of the last poll as
    /// stamped by the NIC; `None` on devices without completion
    /// timestamps (rxe).
    pub fn last_completion_time(&self) -> Option<Instant> {
        self.nic_times.last().map(|&(_, t)| t)
    }

    fn check_peer(&self, peer: Rank, op: OpKind) -> Result<usize, TransportError> {
        if !self.connected {
            return Err(TransportError::Invalid(format!(
                "{op} to rank {peer} before connect"
            )));
        }
        let p = self
            .peers
            .get(peer as usize)
            .and_then(|p| p.as_ref())
            .ok_or_else(|| {
                TransportError::Invalid(format!(
                    "{op} to rank {peer}: no such peer (job of {} ranks, this is rank {})",
                    self.size, self.rank
                ))
            })?;
        if let Some(why) = &p.broken {
            return Err(TransportError::Peer {
                peer,
                op,
                status: format!("connection is down: {why}"),
            });
        }
        Ok(peer as usize)
    }

    fn rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let (op, local, remote) = (rma.op.op(), rma.local, rma.remote);
        let (addr, lkey) = self.mem.rma_local(rma.mr, local)?;
        let bad = |detail: String| TransportError::BadKey { peer, detail };
        let rkey: [u8; 4] = remote.blob.as_slice().try_into().map_err(|_| {
            bad(format!(
                "verbs key blob must be 4 bytes, got {}",
                remote.blob.len()
            ))
        })?;
        remote
            .check_range(rma.remote_offset, local.len as u64)
            .map_err(bad)?;
        let len = u32::try_from(local.len).map_err(|_| {
            TransportError::Invalid(format!("{op} of {} bytes exceeds 4 GiB", local.len))
        })?;
        let remote_addr = remote.addr + rma.remote_offset;
        let rkey = u32::from_le_bytes(rkey);
        let sop = match op {
            OpKind::Read => SendOp::Read { remote_addr, rkey },
            _ => SendOp::Write { remote_addr, rkey },
        };
        let sge = Sge { addr, len, lkey };
        let i = self.check_peer(peer, op)?;
        let p = self.peers[i].as_mut().expect("checked peer");
        if p.pending.is_empty() && p.sq_free > 0 {
            match p.post_rma(&mut self.ops, sop, sge, ctx) {
                Err(e) if !is_queue_full(&e) => return Err(post_failed(peer, op, e)),
                Err(_) => {}
                Ok(()) => return Ok(()),
            }
        }
        p.pending.push_back(Pending::Rma {
            op: sop,
            local: sge,
            ctx,
        });
        Ok(())
    }
}

fn post_failed(peer: Rank, op: OpKind, e: std::io::Error) -> TransportError {
    TransportError::Peer {
        peer,
        op,
        status: format!("ibv_post_send failed: {e}"),
    }
}

impl Transport for VerbsTransport {
    fn info(&self) -> TransportInfo {
        let d = &self.dev;
        let mut extra = vec![
            ("gid_index".to_string(), d.gid_index.to_string()),
            ("gid".to_string(), crate::setup::gid_text(&d.gid)),
            ("lid".to_string(), d.port_attr.lid.to_string()),
            ("mtu".to_string(), mtu_bytes(self.mtu_code()).to_string()),
            (
                "link_layer".to_string(),
                (if d.port_attr.ethernet {
                    "Ethernet"
                } else {
                    "InfiniBand"
                })
                .to_string(),
            ),
            (
                "max_rd_atomic".to_string(),
                d.attr.max_qp_init_rd_atom.to_string(),
            ),
            ("tx_depth".to_string(), self.opts.tx_depth.to_string()),
            (
                "eager_buf_size".to_string(),
                self.opts.eager_buf_size.to_string(),
            ),
            ("rx_depth".to_string(), self.opts.rx_depth.to_string()),
            ("inline_size".to_string(), self.max_inline().to_string()),
            (
                "cq".to_string(),
                (if self.cq.is_extended() {
                    "extended"
                } else {
                    "classic"
                })
                .to_string(),
            ),
        ];
        if !d.attr.fw_ver.is_empty() {
            extra.push(("firmware".to_string(), d.attr.fw_ver.clone()));
        }
        TransportInfo {
            name: "verbs".into(),
            device: format!("{}:{}", d.ctx.name(), d.port),
            library: format!("libibverbs {}", ovbench_verbs_sys::IBVERBS_VERSION),
            extra,
            caps: Caps {
                rma: RmaKind::Native,
                rma_progress: RmaProgress::Offloaded,
                progress: Progress::Poll,
                eager_buf_size: self.opts.eager_buf_size,
                native_sync_send: false,
                completion_stamps: if self.nic_clock.is_some() {
                    CompletionStamps::Nic
                } else {
                    CompletionStamps::Host
                },
                // The copy into a registered send buffer; at the receiver
                // the copy out of the receive buffer and into the user's.
                eager_copies: 3,
            },
            rank: self.rank,
            size: self.size,
        }
    }

    fn address(&self) -> Vec<u8> {
        Address {
            lid: self.dev.port_attr.lid,
            gid: self.dev.gid,
            mtu: self.mtu_code(),
            rx_window: self.opts.rx_depth,
            buf_size: (self.opts.eager_buf_size + MSG_HDR) as u32,
            qps: self
                .peers
                .iter()
                .map(|p| p.as_ref().map_or((0, 0), |p| (p.qp.qp_num(), p.psn)))
                .collect(),
            cm: self.cm.as_ref().map(|c| (c.addr().0.octets(), c.addr().1)),
        }
        .encode()
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        self.connect_all(addresses)
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.mem.table.alloc(len)
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.mem.table.free(region)
    }

    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        f(self.mem.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        self.mem.register(&self.dev.pd, s)
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.mem.deregister(mr)
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let total = msg.within(peer, self.opts.eager_buf_size)?;
        let Msg { header, payload } = msg;
        let pbytes: &[u8] = match payload {
            Some(s) => self.mem.slice(s)?,
            None => &[],
        };
        let i = self.check_peer(peer, OpKind::Send)?;
        let p = self.peers[i].as_mut().expect("checked peer");
        if p.pending.is_empty() && p.can_send_data() {
            if let Some(c) = p.credits.as_mut() {
                c.take();
            }
            match p.post_msg(&mut self.ops, MsgKind::Data, &[header, pbytes], ctx) {
                Err(e) if !is_queue_full(&e) => return Err(post_failed(peer, OpKind::Send, e)),
                Err(_) => {}
                Ok(()) => return Ok(Posted::Queued),
            }
        }
        let mut bytes = Vec::with_capacity(total);
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(pbytes);
        p.pending.push_back(Pending::Send { bytes, ctx });
        Ok(Posted::Queued)
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        self.rma(peer, rma, ctx)
    }

    /// Hands nothing over: receive buffers are reposted to the QP as
    /// their messages are copied out.
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        _arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let mut n = self.stash.len();
        let base = out.len();
        let stamped = self.nic_clock.is_some();
        if stamped {
            // Kept as positions in `out` until the end, then made relative.
            self.nic_times.clear();
            let st = &mut self.stash_times;
            self.nic_times
                .extend(st.drain(..).map(|(i, t)| (base + i, t)));
        }
        out.append(&mut self.stash);
        let got = self.reap(out)?;
        n += got;
        if self.opts.use_event {
            if got > 0 && self.armed {
                self.cq.drain_events(&self.channel)?;
                self.armed = false;
            } else if n == 0 && !self.armed {
                self.cq.req_notify()?;
                self.armed = true;
                n += self.reap(out)?;
            }
        }
        if n > 0 {
            self.idle_polls = 0;
            self.idle_since = None;
        }
        if stamped {
            for e in &mut self.nic_times {
                e.0 -= base;
            }
        }
        Ok(n)
    }

    fn completion_time(&self, index: usize) -> Option<CompletionTime> {
        self.nic_times
            .iter()
            .find(|&&(i, _)| i == index)
            .map(|&(_, t)| CompletionTime::Host(t))
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < 1024 {
            self.pool.push(data);
        }
    }

    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        match why {
            Idle::EmptyPoll => self.idle_wait(),
            Idle::WatchingMemory => self.idle_since = None,
            Idle::Block(timeout) => return self.block(timeout),
        }
        Ok(())
    }
}

impl VerbsTransport {
    /// The completion channel's fd: readable when a poll may find
    /// something (armed by [`Self::block`]).
    pub fn wait_fd(&self) -> Option<RawFd> {
        Some(self.channel.fd())
    }

    /// Largest payload sent inline, after the message header.
    fn max_inline(&self) -> usize {
        self.peers
            .iter()
            .flatten()
            .map(|p| p.max_inline as usize)
            .min()
            .unwrap_or(self.opts.inline_size as usize)
            .saturating_sub(MSG_HDR)
    }

    /// Sleep until a completion may be ready or `timeout` passes.
    pub(crate) fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        if !self.stash.is_empty() {
            return Ok(());
        }
        if !self.armed {
            self.cq.req_notify()?;
            self.armed = true;
        }
        // A completion that arrived before arming raises no event: look once.
        let mut stash = std::mem::take(&mut self.stash);
        let times = std::mem::take(&mut self.nic_times);
        let r = self.reap(&mut stash);
        // `stash` was empty: the positions reap recorded are its indices.
        self.stash_times = std::mem::replace(&mut self.nic_times, times);
        self.stash = stash;
        r?;
        if !self.stash.is_empty() {
            return Ok(());
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let ready = self
            .channel
            .wait_readable(ms)
            .map_err(|e| TransportError::io("waiting on the verbs completion channel", e))?;
        if ready {
            self.cq.drain_events(&self.channel)?;
            self.armed = false;
        }
        Ok(())
    }
}

impl VerbsTransport {
    /// The MTU code this rank announces: `--mtu`, else the port's active MTU.
    pub(crate) fn mtu_code(&self) -> u8 {
        self.opts
            .mtu
            .and_then(mtu_code)
            .unwrap_or(self.dev.port_attr.active_mtu.clamp(1, 5) as u8)
    }
}
