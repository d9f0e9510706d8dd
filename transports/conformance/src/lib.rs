//! The transport contract's conformance suite and the fabric crates'
//! test harnesses, generic over [`Transport`].
//!
//! Test-only code: every fabric crate takes this crate as a
//! dev-dependency (tests, benches, examples), so none of it is linked
//! into a release build of `ovbench`.
//!
//! - The suite: every fabric crate runs it against its own transport, in
//!   one process.
//! - Harnesses: two ranks in one process ([`pair`]), two real processes
//!   ([`processes`]), the by-hand latency check ([`pingpong`]) and the
//!   benches' per-message software cost ([`comm_cost`]).
//!
//! ```ignore
//! fn make(n: u32) -> Vec<Box<dyn Transport>> { /* n unconnected endpoints */ }
//! mod two_ranks { ovbench_conformance::conformance_tests!(super::make, 2); }
//! ```
//!
//! [`conformance_tests!`] generates one `#[test]` per check; [`run_all`]
//! runs them all and reports each result. A check gets freshly made
//! endpoints, already connected by [`connect_all`], and drives all of
//! them from one thread by polling them in turn (every loop has a
//! deadline), so a target that needs its progress engine to serve a
//! one-sided request gets it. What the checks pin, beyond the contract's
//! module docs (`ovbench_core::Transport`):
//!
//! * an `Err` from a transport names the peer as `rank N` in its message,
//!   and a [`Completion::Error`](ovbench_core::Completion::Error) carries
//!   the peer, the operation and the context of the failed operation;
//! * a one-sided access outside a live registration, through a
//!   deregistered key or through a garbled key is refused (an `Err` at
//!   post or an error completion) and leaves the target's memory untouched;
//! * a peer whose transport was dropped is reported within
//!   [`PEER_LOSS_DEADLINE`], and the other peers keep working;
//! * a send that finished inside the call ([`Posted::Done`] from
//!   [`post_send`](Transport::post_send) or [`tsend`](Tagged::tsend))
//!   never completes through `poll`, and one in flight
//!   ([`Posted::Queued`]) completes once;
//! * each send's end is known exactly once — from `Done` at the call's
//!   return or from one later queued completion, never both, never
//!   neither — and a time the transport gives for it (a `Done`'s, or a
//!   completion's [`completion_time`](Transport::completion_time)) is not
//!   later than the return of the call that gave it (what the overlap
//!   method's XFER_END relies on: [`send_end_known_once`]);
//! * where the transport offers a tagged protocol
//!   ([`Transport::tagged`]), [`trecv_wait`](Tagged::trecv_wait)
//!   receives, times out, withdraws and refuses truncation without ever
//!   queueing a completion;
//! * messages taken through [`poll`](Transport::poll) with `arrivals`
//!   arrive once each and in order whether handed over or queued, and a
//!   taker's error fails that poll without losing what follows.

use std::time::Duration;

#[cfg(doc)]
use ovbench_core::{Posted, Tagged};
use ovbench_core::{Transport, TransportError};

mod checks;
pub mod comm_cost;
pub mod pair;
pub mod pingpong;
pub mod processes;

pub use checks::*;

/// A job's endpoints, index = rank.
pub type Endpoints = Vec<Box<dyn Transport>>;
/// One check: gets connected endpoints, says what went wrong.
pub type Check = fn(&mut Endpoints) -> Result<(), String>;

/// Longest any single wait of a check may take.
pub const WAIT_DEADLINE: Duration = Duration::from_secs(20);
/// How soon the survivors must report a dropped peer (docs/architecture.md: a killed
/// rank stops the job within 5 s).
pub const PEER_LOSS_DEADLINE: Duration = Duration::from_secs(5);

/// Exchange every endpoint's address and connect all of them at once
/// (connect is collective, so each runs on its own scoped thread).
pub fn connect_all(ts: &mut [Box<dyn Transport>]) -> Result<(), TransportError> {
    let addrs: Vec<Vec<u8>> = ts.iter().map(|t| t.address()).collect();
    let results: Vec<Result<(), TransportError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ts
            .iter_mut()
            .map(|t| {
                let a = &addrs;
                s.spawn(move || t.connect(a))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

/// Make `size` endpoints, connect them and run `check`.
pub fn run_check(check: Check, make: &dyn Fn(u32) -> Endpoints, size: u32) -> Result<(), String> {
    let mut ts = make(size);
    if ts.len() != size as usize {
        return Err(format!(
            "the factory made {} endpoints, {size} asked",
            ts.len()
        ));
    }
    connect_all(&mut ts).map_err(|e| format!("connect failed: {e}"))?;
    check(&mut ts)
}

/// The job sizes a lane runs its checks at: one, or several in turn.
pub trait Sizes {
    /// Each size, in order.
    fn sizes(&self) -> Vec<u32>;
}

impl Sizes for u32 {
    fn sizes(&self) -> Vec<u32> {
        vec![*self]
    }
}

impl<const N: usize> Sizes for [u32; N] {
    fn sizes(&self) -> Vec<u32> {
        self.to_vec()
    }
}

/// [`run_check`] at each of `sizes` in turn, every size run whatever the
/// others gave; the failures, each naming its size.
pub fn run_check_at(
    check: Check,
    make: &dyn Fn(u32) -> Endpoints,
    sizes: &dyn Sizes,
) -> Result<(), String> {
    let failed: Vec<String> = sizes
        .sizes()
        .into_iter()
        .filter_map(|n| {
            run_check(check, make, n)
                .err()
                .map(|e| format!("at {n} ranks: {e}"))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// Run every check on fresh endpoints; one result per check.
pub fn run_all(
    make: &dyn Fn(u32) -> Endpoints,
    size: u32,
) -> Vec<(&'static str, Result<(), String>)> {
    CHECKS
        .iter()
        .map(|(name, check)| (*name, run_check(*check, make, size)))
        .collect()
}

/// Endpoints `0..n` made by `open(rank)`, for a conformance factory.
pub fn endpoints<T: Transport + 'static>(n: u32, open: impl Fn(u32) -> T) -> Endpoints {
    (0..n)
        .map(|r| Box::new(open(r)) as Box<dyn Transport>)
        .collect()
}

/// One `#[test]` per conformance check for a factory
/// `Fn(u32) -> Vec<Box<dyn Transport>>` and a job size (at least 2), or
/// an array of sizes the test runs in turn ([`Sizes`]).
/// After them, `; skip a, b` names checks that cannot run on this lane
/// (each lane's comment says why and which test covers them instead),
/// and `; known_fault c` names checks a library is known to fail there:
/// those run and must fail, so the day the library is fixed the test
/// says to drop the entry.
///
/// The `@`-prefixed arms are internal: they keep the list of checks in one
/// place, which also builds [`CHECKS`].
#[macro_export]
macro_rules! conformance_tests {
    (@list $($pre:tt)*) => {
        $crate::conformance_tests!($($pre)*;
            identity_and_caps, regions, send_order_and_max_size, zero_length_messages,
            oversize_send_rejected, write_visible_on_completion, read_returns_target_bytes,
            out_of_range_rejected, deregistered_key_rejected, garbled_key_rejected,
            many_outstanding, key_through_the_wire, block_returns_when_ready,
            tagged_if_offered, send_done_contract, tsend_done_contract,
            send_end_known_once, trecv_wait_contract, trecv_wait_truncation, arrivals_contract,
            peer_dropped_reported);
    };
    (@consts; $($name:ident),* $(,)?) => {
        /// Every check, by name.
        pub const CHECKS: &[(&str, Check)] = &[$((stringify!($name), $name)),*];
    };
    (@each $make:expr, $size:expr, skip [$($skip:ident),*], known_fault [$($fault:ident),*];
        $($name:ident),* $(,)?) => {
        /// Checks that cannot run on this lane (its comment says why).
        const CONFORMANCE_SKIP: &[&str] = &[$(stringify!($skip)),*];
        /// Checks the library is known to fail on this lane.
        const CONFORMANCE_KNOWN_FAULT: &[&str] = &[$(stringify!($fault)),*];
        $(
            #[test]
            fn $name() {
                let name = stringify!($name);
                if CONFORMANCE_SKIP.contains(&name) {
                    eprintln!("`{name}` cannot run on this lane (see its comment)");
                    return;
                }
                let result = $crate::run_check_at($crate::$name, &$make, &$size);
                match (result, CONFORMANCE_KNOWN_FAULT.contains(&name)) {
                    (Ok(()), false) => {}
                    (Err(e), false) => panic!("conformance check `{name}` failed: {e}"),
                    (Err(e), true) => eprintln!("`{name}` fails here, as known: {e}"),
                    (Ok(()), true) => panic!(
                        "conformance check `{name}` passed where the library was known to fail it: the fault is gone, take it off this lane's known_fault list"
                    ),
                }
            }
        )*
    };
    ($make:expr, $size:expr) => {
        $crate::conformance_tests!(@list @each $make, $size, skip [], known_fault []);
    };
    ($make:expr, $size:expr; skip $($skip:ident),+ $(,)?) => {
        $crate::conformance_tests!(@list @each $make, $size, skip [$($skip),+], known_fault []);
    };
    ($make:expr, $size:expr; known_fault $($fault:ident),+ $(,)?) => {
        $crate::conformance_tests!(@list @each $make, $size, skip [], known_fault [$($fault),+]);
    };
}

conformance_tests!(@list @consts);
