//! The context of every posted operation, handed to libfabric as the
//! `context` pointer and returned in its completion entry.

use ovbench_core::{Ctx, OpKind, Rank};

use crate::fi::Scratch;

/// Bytes ovbench puts in front of every two-sided message: the source
/// rank and a per-peer sequence number (little-endian `u32`s). tcp;ofi_rxm
/// completes a rendezvous-sized message after smaller ones posted later,
/// so the receiver restores posting order from the sequence.
pub(crate) const SRC_HDR: usize = 8;

/// What a completion entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A pre-posted receive buffer (reposted after each message).
    RecvBuf,
    Send,
    /// A write whose completion means delivery (`FI_DELIVERY_COMPLETE`).
    Write,
    /// A write whose completion is only local; a fence read of the
    /// written range follows.
    WriteThenFence(Fence),
    /// The read that proves a preceding write was placed.
    Fence,
    Read,
    TaggedSend,
    TaggedRecv,
    /// ovbench's own control message: completes silently.
    Control,
}

impl Kind {
    pub fn op(self) -> OpKind {
        match self {
            Kind::RecvBuf => OpKind::Recv,
            Kind::Send => OpKind::Send,
            Kind::Write | Kind::WriteThenFence(_) | Kind::Fence => OpKind::Write,
            Kind::Read => OpKind::Read,
            Kind::TaggedSend => OpKind::TaggedSend,
            Kind::TaggedRecv => OpKind::TaggedRecv,
            Kind::Control => OpKind::Connect,
        }
    }
}

/// One operation in flight. `repr(C)` with the provider's scratch space
/// first: providers that ask for `FI_CONTEXT`/`FI_CONTEXT2` write into the
/// memory the context pointer points at. A receive slot's `ctx` is its
/// index (see [`crate::fi::endpoint`]).
#[repr(C)]
pub(crate) struct Op {
    pub fi_ctx: Scratch,
    pub kind: Kind,
    pub ctx: Ctx,
    pub peer: Rank,
    /// Send staging, receive buffer, or the fence read's landing byte.
    pub buf: Vec<u8>,
}

/// Where the fence read of a write goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fence {
    pub addr: u64,
    pub key: u64,
}

impl Op {
    pub fn new(kind: Kind, ctx: Ctx, peer: Rank, buf: Vec<u8>) -> Op {
        Op {
            fi_ctx: Scratch::default(),
            kind,
            ctx,
            peer,
            buf,
        }
    }

    pub fn boxed(kind: Kind, ctx: Ctx, peer: Rank, buf: Vec<u8>) -> Box<Op> {
        Box::new(Op::new(kind, ctx, peer, buf))
    }
}
