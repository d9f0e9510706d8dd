//! Test hook (feature `fault-inject`, never in a release build): stall
//! this rank right after it sends a message of a given length, as a rank
//! descheduled at that moment would be, so that tests can make its peer's
//! messages pile up unread and arrive in one poll.
//!
//! `OVBENCH_TCP_STALL=LEN:MS[@RANK]`: after each two-sided message of
//! exactly `LEN` bytes (the protocol's header included) that this process
//! posts, it sleeps `MS` milliseconds — only on rank `RANK` when given.
//! The message is on the wire before the sleep starts.

use std::time::Duration;

use ovbench_core::{Rank, TransportError};

/// The environment variable that arms the hook.
pub const VAR: &str = "OVBENCH_TCP_STALL";

/// An armed hook: after which message length to sleep, and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    len: usize,
    pause: Duration,
}

impl Stall {
    /// The hook `OVBENCH_TCP_STALL` asks for on rank `me`, if any.
    pub fn from_env(me: Rank) -> Result<Option<Stall>, TransportError> {
        match std::env::var(VAR) {
            Ok(v) => Stall::parse(&v, me),
            Err(_) => Ok(None),
        }
    }

    /// Parse `LEN:MS[@RANK]`; `None` when the hook names another rank.
    pub fn parse(v: &str, me: Rank) -> Result<Option<Stall>, TransportError> {
        let bad = || {
            TransportError::Invalid(format!(
                "{VAR}={v}: expected LEN:MS[@RANK] (sleep MS ms after each message of LEN bytes)"
            ))
        };
        let (spec, rank) = match v.split_once('@') {
            Some((s, r)) => (s, Some(r.trim().parse::<Rank>().map_err(|_| bad())?)),
            None => (v, None),
        };
        let (len, ms) = spec.split_once(':').ok_or_else(bad)?;
        let len: usize = len.trim().parse().map_err(|_| bad())?;
        let ms: u64 = ms.trim().parse().map_err(|_| bad())?;
        if ms == 0 || ms > 10_000 {
            return Err(bad());
        }
        if rank.is_some_and(|r| r != me) {
            return Ok(None);
        }
        Ok(Some(Stall {
            len,
            pause: Duration::from_millis(ms),
        }))
    }

    /// A message of `len` bytes was just posted: sleep if it is the kind.
    pub fn after_send(&self, len: usize) {
        if len == self.len {
            std::thread::sleep(self.pause);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_pause_and_rank() {
        let s = Stall::parse("36:200", 1).unwrap().unwrap();
        assert_eq!((s.len, s.pause), (36, Duration::from_millis(200)));
        assert!(Stall::parse("36:200@0", 1).unwrap().is_none());
        assert!(Stall::parse("36:200@1", 1).unwrap().is_some());
        for bad in ["", "36", "36:0", "36:99999", "x:1", "36:1@r"] {
            let e = Stall::parse(bad, 0).unwrap_err().to_string();
            assert!(e.contains("LEN:MS[@RANK]"), "{bad}: {e}");
        }
    }
}
