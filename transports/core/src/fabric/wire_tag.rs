//! The 64-bit library tag of the native tagged paths (UCX, libfabric):
//! the sender's rank in the high 32 bits and the user's tag in the low 32,
//! so that a receive can select on the source, the tag, both or neither.

use crate::{Rank, Tag, TransportError};

/// Where the sender's rank starts in a library tag.
const SRC_SHIFT: u32 = 32;

/// The library tag of a message from `rank` with user tag `tag`.
#[inline]
pub fn send_tag(rank: Rank, tag: Tag) -> u64 {
    (u64::from(rank) << SRC_SHIFT) | u64::from(tag)
}

/// The sender's rank and user tag a received library tag carries.
#[inline]
pub fn split(t: u64) -> (Rank, Tag) {
    ((t >> SRC_SHIFT) as Rank, t as u32 as Tag)
}

/// A tagged receive's library tag and the mask of its bits that must
/// match, for source `src` and `tag` (`None`: any); an error for a source
/// outside a job of `size` ranks.
#[inline]
pub fn recv_selector(
    src: Option<Rank>,
    tag: Option<Tag>,
    size: u32,
) -> Result<(u64, u64), TransportError> {
    if let Some(s) = src.filter(|&s| s >= size) {
        return Err(TransportError::Invalid(format!(
            "tagged receive from rank {s}, but the job has {size} ranks"
        )));
    }
    let t = send_tag(src.unwrap_or(0), tag.unwrap_or(0));
    let mask = if src.is_some() { !0 << SRC_SHIFT } else { 0 }
        | if tag.is_some() {
            u64::from(u32::MAX)
        } else {
            0
        };
    Ok((t, mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_carries_its_sender_and_selectors_mask_what_they_name() {
        let t = send_tag(7, 0xdead_beef);
        assert_eq!(split(t), (7, 0xdead_beef));
        let matches = |sel: (u64, u64)| t & sel.1 == sel.0 & sel.1;
        assert!(matches(
            recv_selector(Some(7), Some(0xdead_beef), 8).unwrap()
        ));
        assert!(matches(recv_selector(None, Some(0xdead_beef), 8).unwrap()));
        assert!(matches(recv_selector(Some(7), None, 8).unwrap()));
        assert!(matches(recv_selector(None, None, 8).unwrap()));
        assert!(!matches(recv_selector(Some(6), None, 8).unwrap()));
        assert!(!matches(recv_selector(None, Some(1), 8).unwrap()));
        let e = recv_selector(Some(8), None, 8).unwrap_err().to_string();
        assert!(e.contains("rank 8") && e.contains("8 ranks"), "{e}");
    }
}
