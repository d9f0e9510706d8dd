//! Capabilities: the two axes the overlap paper (Shet, Sadayappan,
//! Bernholdt, Nieplocha and Tipparaju, "A Framework for Characterizing
//! Overlap of Communication and Computation in Parallel Applications")
//! cares about — RMA offload and two-sided progress — plus the sizes the
//! engine must respect.

use serde::Serialize;

/// Whether one-sided operations are real RDMA or emulated by messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RmaKind {
    /// The fabric library offers put/get (verbs, UCX, libfabric).
    Native,
    /// Request messages served by the target (TCP).
    Emulated,
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

/// What a transport can do; printed in every header.
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
    /// Largest payload sent inline (no local buffer needed); 0 if none.
    pub max_inline: usize,
    /// Largest single two-sided message ([`crate::Transport::post_send`]),
    /// header included: the size of one pre-posted receive buffer.
    pub eager_buf_size: usize,
    /// Whether the transport exposes the library's own tagged protocol.
    pub native_tagged: bool,
    /// Whether [`crate::Transport::tsend`] can be synchronous (ssend).
    pub native_sync_send: bool,
}
