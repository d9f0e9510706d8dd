//! Capabilities: the two axes the overlap paper (Shet, Sadayappan,
//! Bernholdt, Nieplocha and Tipparaju, "A Framework for Characterizing
//! Overlap of Communication and Computation in Parallel Applications")
//! cares about — RMA offload and two-sided progress — plus the sizes the
//! engine must respect.

use serde::Serialize;

/// Whether one-sided operations are real RDMA or emulated by messages,
/// decided by what really moves the bytes, not by whether the library
/// has a put/get call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RmaKind {
    /// The data moves by a direct memory access: an RDMA NIC (verbs, UCX
    /// and libfabric over RDMA devices) or a cross-memory copy between
    /// processes (UCX cma/knem/xpmem lanes, libfabric shm with CMA).
    Native,
    /// The data moves as messages that the target's software unpacks:
    /// ovbench's TCP transport, UCX over tcp or UCP's active-message
    /// emulation, libfabric's tcp/sockets/udp providers.
    Emulated,
}

/// Which clock a completion's time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CompletionStamps {
    /// The host's, when the caller takes the completion.
    #[default]
    Host,
    /// The device's: [`crate::Transport::completion_time`] gives the
    /// NIC's completion timestamp (verbs on a device that has them, the
    /// simulator's virtual NIC).
    Nic,
}

/// Who moves one-sided data at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RmaProgress {
    /// The NIC serves it with no target CPU involvement (verbs RC).
    Offloaded,
    /// The target's progress engine serves it (TCP, UCX over tcp).
    TargetProgress,
}

/// How two-sided (and emulated one-sided) traffic makes progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Progress {
    /// Only when the application is inside a library call.
    #[default]
    Poll,
    /// An asynchronous progress thread (blocking, not spinning).
    Thread,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Progress::Poll => "poll",
            Progress::Thread => "thread",
        })
    }
}

impl std::str::FromStr for Progress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "poll" => Ok(Progress::Poll),
            "thread" => Ok(Progress::Thread),
            _ => Err(format!(
                "unknown progress mode `{s}`: use `poll` or `thread`"
            )),
        }
    }
}

/// What a transport can do; printed in every header. (Whether it has the
/// library's own tagged protocol is [`crate::Transport::tagged`].)
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Caps {
    /// Whether writes and reads are real RDMA or emulated by messages.
    pub rma: RmaKind,
    /// Who serves one-sided operations at the target; with
    /// [`RmaKind::Native`] and [`RmaProgress::Offloaded`] auto prefers
    /// rdma-read.
    pub rma_progress: RmaProgress,
    /// How two-sided traffic progresses, as the transport was opened
    /// (`--progress`).
    pub progress: Progress,
    /// Largest single two-sided message ([`crate::Transport::post_send`]),
    /// header included: the size of one pre-posted receive buffer.
    pub eager_buf_size: usize,
    /// Whether [`crate::Tagged::tsend`] can be synchronous (ssend);
    /// false where the transport has no tagged protocol.
    pub native_sync_send: bool,
    /// Whether completions carry the NIC's timestamps.
    pub completion_stamps: CompletionStamps,
    /// Passes over a message's payload in user space (staging and bounce
    /// buffer copies, zero-fills; both sides together) that an eager
    /// message to a posted receive makes and a rendezvous does not:
    /// auto's eager limit weighs them against the rendezvous's trips
    /// ([`crate::eager_limit`]).
    pub eager_copies: u32,
}
