//! A point-to-point call's operands, carried as one value from the
//! [`crate::Communicator`] method through [`super::Comm`] to the path
//! that runs it, instead of five loose parameters at every hop.

use crate::{Rank, Source, Span, Tag, TagSel};

/// The bytes of `span`, to or from `peer` with `tag`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Args<P, T> {
    pub(crate) span: Span,
    pub(crate) peer: P,
    pub(crate) tag: T,
}

/// A send's operands: one destination and one tag.
pub(crate) type SendArgs = Args<Rank, Tag>;
/// A receive's operands: its source and tag may be wildcards (`None`).
pub(crate) type RecvArgs = Args<Source, TagSel>;

impl<P, T> Args<P, T> {
    #[inline(always)]
    pub(crate) fn new(span: Span, peer: P, tag: T) -> Self {
        Args { span, peer, tag }
    }
}
