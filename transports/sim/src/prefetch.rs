//! Prefetching for the rank that runs next. At a thousand ranks every
//! rank's stack and state have left the caches by its next turn, and a
//! handoff stalls on each line it touches again. So while one rank runs,
//! the runner asks for the lines the rank expected to run next touches
//! first: the frames above the point where it yielded, its state in the
//! world, the message that woke it, and what its transport noted. A wrong guess costs a few wasted line fills; nothing the
//! simulation computes depends on it.

/// Bytes of stack above a rank's yield point to prefetch: its frames up
/// through the engine's wait loop (a rank yields about 5.5 KiB below its
/// entry). Measured at 512 and 1024 ranks: 2–3 KiB gains 10–15% of user
/// time, 8 KiB loses it again.
pub(crate) const STACK_BYTES: usize = 3072;

/// Bytes of the message last delivered to a rank: a header and a small
/// payload (the engine decodes it, then copies the payload out).
pub(crate) const MSG_BYTES: usize = 320;

/// Bytes at each address a rank's transport noted before sleeping (its
/// own state, the caller's completion list).
pub(crate) const TOUCH_BYTES: usize = 128;

/// Ask for the cache lines covering `[start, start + LEN)` (and at most
/// one more): a count known at compile time lets the loop unroll into
/// bare prefetches (it runs at every handoff).
#[inline]
pub(crate) fn lines<const LEN: usize>(start: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = start & !63;
        let mut k = 0;
        while k <= LEN / 64 {
            // SAFETY: a prefetch is only a hint: it never faults, whatever
            // the address, and changes no memory.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(k * 64) as *const i8) };
            k += 1;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = start;
}
