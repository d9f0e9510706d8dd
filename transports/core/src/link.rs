//! [`Link`]: a connected transport as a communicator holds it — as the
//! plain contract, or as its tagged protocol where it has one.
//!
//! Held as [`Tagged`], the native path reaches `tsend`/`trecv` directly;
//! held as a plain [`Transport`], each of its calls first asks
//! [`Transport::tagged`], one more dynamic call per message (measured
//! with the libfabric `comm_cost` bench: about 8 ns a message on shared
//! memory). Every other call goes to the transport either way: a `Link`
//! dereferences to `dyn Transport`.

use std::ops::{Deref, DerefMut};

use crate::{Tagged, Transport};

/// A connected transport, owned: plain, or known to be tagged.
pub enum Link {
    /// Held through the contract alone (its tagged path, if any, is
    /// asked for per call).
    Plain(Box<dyn Transport>),
    /// Held as its tagged protocol.
    Tagged(Box<dyn Tagged>),
}

impl Link {
    /// The library's tagged protocol, where the transport has one.
    #[inline]
    pub fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        match self {
            Link::Tagged(t) => Some(t.as_mut()),
            Link::Plain(t) => t.tagged(),
        }
    }

    /// The transport, as the plain contract.
    pub fn into_transport(self) -> Box<dyn Transport> {
        match self {
            Link::Plain(t) => t,
            Link::Tagged(t) => t,
        }
    }
}

impl From<Box<dyn Transport>> for Link {
    fn from(t: Box<dyn Transport>) -> Link {
        Link::Plain(t)
    }
}

impl From<Box<dyn Tagged>> for Link {
    fn from(t: Box<dyn Tagged>) -> Link {
        Link::Tagged(t)
    }
}

/// A concrete transport with a tagged protocol is held as one.
impl<T: Tagged + 'static> From<Box<T>> for Link {
    fn from(t: Box<T>) -> Link {
        Link::Tagged(t)
    }
}

impl Deref for Link {
    type Target = dyn Transport;

    #[inline]
    fn deref(&self) -> &(dyn Transport + 'static) {
        match self {
            Link::Plain(t) => t.as_ref(),
            Link::Tagged(t) => t.as_ref(),
        }
    }
}

impl DerefMut for Link {
    #[inline]
    fn deref_mut(&mut self) -> &mut (dyn Transport + 'static) {
        match self {
            Link::Plain(t) => t.as_mut(),
            Link::Tagged(t) => t.as_mut(),
        }
    }
}
