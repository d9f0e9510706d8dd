//! ovbench's own broadcasts and barriers on point-to-point calls, and the
//! shapes the methods need to know: each rank's children and the path
//! from the root to a rank (OL_i's assumption is checked along it).

use ovbench_core::{Buf, Communicator, Rank, Tag};

use super::{Algorithm, BarrierKind};

pub(super) const TAG_BCAST: Tag = 0x4f56_0301;
pub(super) const TAG_BARRIER: Tag = 0x4f56_0302;

/// One broadcast of `m` bytes from `root`, as algorithm `alg`.
// deviation: own-broadcasts — ovbench's own broadcasts, shapes known, see docs/methods/bcast.md
pub(super) fn bcast(
    c: &mut dyn Communicator,
    alg: Algorithm,
    b: Buf,
    m: usize,
    root: Rank,
) -> anyhow::Result<()> {
    if alg == Algorithm::Library {
        return Ok(c.bcast_library(b.first(m), root)?);
    }
    let (me, n) = (c.rank(), c.size());
    if let Some(p) = parent(alg, me, root, n) {
        c.recv(b.first(m), Some(p), Some(TAG_BCAST))?;
    }
    // The children without building a list (this runs once per rank per
    // broadcast, and at 1024 ranks often).
    match alg {
        Algorithm::Binomial | Algorithm::Library => {
            let vr = (me + n - root) % n;
            let mut mask = binomial_parent(vr, n).1;
            while mask > 0 {
                if vr + mask < n {
                    c.send(b.first(m), (vr + mask + root) % n, TAG_BCAST)?;
                }
                mask >>= 1;
            }
        }
        _ => {
            for k in children(alg, me, root, n) {
                c.send(b.first(m), k, TAG_BCAST)?;
            }
        }
    }
    Ok(())
}

/// Who `me` receives the broadcast from (`None` at the root).
pub(super) fn parent(alg: Algorithm, me: Rank, root: Rank, n: u32) -> Option<Rank> {
    if me == root {
        return None;
    }
    Some(match alg {
        Algorithm::Binomial | Algorithm::Library => {
            let vr = (me + n - root) % n;
            (binomial_parent(vr, n).0? + root) % n
        }
        Algorithm::Linear => (me + n - 1) % n,
        Algorithm::Backward => (me + 1) % n,
        Algorithm::Flat => root,
    })
}

/// Whom `me` forwards the broadcast to, in sending order.
pub(super) fn children(alg: Algorithm, me: Rank, root: Rank, n: u32) -> Vec<Rank> {
    match alg {
        Algorithm::Binomial | Algorithm::Library => {
            let vr = (me + n - root) % n;
            binomial_tree(vr, n)
                .1
                .into_iter()
                .map(|c| (c + root) % n)
                .collect()
        }
        Algorithm::Linear | Algorithm::Backward => {
            let next = if alg == Algorithm::Linear {
                (me + 1) % n
            } else {
                (me + n - 1) % n
            };
            if next == root {
                vec![]
            } else {
                vec![next]
            }
        }
        Algorithm::Flat if me == root => (1..n).map(|k| (root + k) % n).collect(),
        Algorithm::Flat => vec![],
    }
}

/// The ranks the broadcast passes from the root (first) to `i` (last).
pub(super) fn path(alg: Algorithm, root: Rank, i: Rank, n: u32) -> Vec<Rank> {
    let mut p = vec![i];
    let mut at = i;
    while let Some(up) = parent(alg, at, root, n) {
        p.push(up);
        at = up;
    }
    p.reverse();
    p
}

/// The depth of the deepest rank (the root's is 0).
pub(super) fn height(alg: Algorithm, n: u32) -> usize {
    match alg {
        // A rank's depth is its relative rank's count of one bits: the
        // most among 0..n is the bit length of n − 1, less one unless
        // n − 1 is all ones.
        Algorithm::Binomial | Algorithm::Library => {
            let x = n.saturating_sub(1);
            let bits = u32::BITS - x.leading_zeros();
            (if x.count_ones() == bits {
                bits
            } else {
                bits - 1
            }) as usize
        }
        Algorithm::Linear | Algorithm::Backward => n.saturating_sub(1) as usize,
        Algorithm::Flat => usize::from(n > 1),
    }
}

/// A barrier on point-to-point messages (not the communicator's own).
pub(super) fn barrier(c: &mut dyn Communicator, kind: BarrierKind, b: Buf) -> anyhow::Result<()> {
    let (me, n) = (c.rank(), c.size());
    let tag = Some(TAG_BARRIER);
    match kind {
        BarrierKind::Dissemination => {
            let mut k = 1;
            while k < n {
                let r = c.irecv(b.first(0), Some((me + n - k) % n), tag)?;
                c.send(b.first(0), (me + k) % n, TAG_BARRIER)?;
                c.wait(r)?;
                k <<= 1;
            }
        }
        BarrierKind::Ring => {
            let (prev, next) = ((me + n - 1) % n, (me + 1) % n);
            if me == 0 {
                c.send(b.first(0), next, TAG_BARRIER)?;
                c.recv(b.first(0), Some(prev), tag)?;
                if n > 2 {
                    c.send(b.first(0), next, TAG_BARRIER)?;
                }
            } else if me == n - 1 {
                c.recv(b.first(0), Some(prev), tag)?;
                c.send(b.first(0), next, TAG_BARRIER)?;
            } else {
                c.recv(b.first(0), Some(prev), tag)?;
                c.send(b.first(0), next, TAG_BARRIER)?;
                c.recv(b.first(0), Some(prev), tag)?;
                if me != n - 2 {
                    c.send(b.first(0), next, TAG_BARRIER)?;
                }
            }
        }
    }
    Ok(())
}

/// MPICH's binomial tree in relative ranks (the root is 0): the parent
/// of `vr` and its children, largest subtree first.
pub fn binomial_tree(vr: u32, n: u32) -> (Option<u32>, Vec<u32>) {
    let (parent, mut mask) = binomial_parent(vr, n);
    let mut children = Vec::new();
    while mask > 0 {
        if vr + mask < n {
            children.push(vr + mask);
        }
        mask >>= 1;
    }
    (parent, children)
}

/// The parent of `vr` in [`binomial_tree`] and the mask of its largest
/// possible child (children are `vr + mask` for it and each smaller power
/// of two, those below `n`).
fn binomial_parent(vr: u32, n: u32) -> (Option<u32>, u32) {
    let mut mask = 1u32;
    while mask < n {
        if vr & mask != 0 {
            return (Some(vr - mask), mask >> 1);
        }
        mask <<= 1;
    }
    (None, mask >> 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_is_mpich_order() {
        assert_eq!(binomial_tree(0, 8), (None, vec![4, 2, 1]));
        assert_eq!(binomial_tree(4, 8), (Some(0), vec![6, 5]));
        assert_eq!(binomial_tree(6, 8), (Some(4), vec![7]));
        assert_eq!(binomial_tree(7, 8), (Some(6), vec![]));
        assert_eq!(binomial_tree(0, 5), (None, vec![4, 2, 1]));
        assert_eq!(binomial_tree(2, 5), (Some(0), vec![3]));
        // Every non-root rank has exactly one parent that lists it.
        for n in 1..40u32 {
            for v in 1..n {
                let (p, _) = binomial_tree(v, n);
                let p = p.unwrap();
                assert!(binomial_tree(p, n).1.contains(&v), "n {n} v {v}");
            }
        }
    }

    #[test]
    fn paths_run_from_the_root() {
        assert_eq!(path(Algorithm::Binomial, 0, 7, 8), vec![0, 4, 6, 7]);
        assert_eq!(path(Algorithm::Binomial, 0, 0, 8), vec![0]);
        assert_eq!(path(Algorithm::Linear, 0, 3, 5), vec![0, 1, 2, 3]);
        assert_eq!(path(Algorithm::Backward, 0, 3, 5), vec![0, 4, 3]);
        assert_eq!(path(Algorithm::Flat, 0, 3, 5), vec![0, 3]);
        assert_eq!(children(Algorithm::Flat, 0, 0, 4), vec![1, 2, 3]);
        assert_eq!(children(Algorithm::Linear, 4, 0, 5), Vec::<Rank>::new());
        assert_eq!(children(Algorithm::Binomial, 5, 1, 8), vec![7, 6]);
        for alg in [
            Algorithm::Binomial,
            Algorithm::Linear,
            Algorithm::Backward,
            Algorithm::Flat,
        ] {
            for n in 1..70 {
                let deepest = (0..n).map(|r| path(alg, 0, r, n).len() - 1).max();
                assert_eq!(Some(height(alg, n)), deepest, "{alg:?} n {n}");
            }
        }
    }
}
