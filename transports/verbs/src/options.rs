//! The verbs transport's options, with perftest-like defaults.

/// How to open the device and size the queues. `Default` gives perftest's
/// choices: first device, first active port, the RoCE v2 IPv4-mapped GID,
/// tx depth 128, no inline data, the port's active MTU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsOptions {
    /// `--device`: the RDMA device (`rxe0`, `mlx5_0`); `None` = the first.
    pub device: Option<String>,
    /// `--port` (1-based); `None` = the first active port.
    pub port: Option<u8>,
    /// `--gid-index`; `None` = RoCE v2 IPv4-mapped, else as [`crate::gid::choose`].
    pub gid_index: Option<u32>,
    /// `--cm`: connect through rdma_cm instead of the bootstrap exchange.
    pub cm: bool,
    /// `--tx-depth`: send-queue entries (and send slots) per peer.
    pub tx_depth: u32,
    /// `--rx-depth`: data receive buffers pre-posted per peer (the credit window).
    pub rx_depth: u32,
    /// `--inline-size`: largest message sent inline; 0 = never.
    pub inline_size: u32,
    /// `--mtu` in bytes (256, 512, 1024, 2048, 4096); `None` = the port's active MTU.
    pub mtu: Option<u32>,
    /// `--sl`: service level.
    pub sl: u8,
    /// `--tclass`: traffic class of the GRH (RoCE DSCP/ECN byte).
    pub tclass: u8,
    /// Size of one two-sided message (header included) = one receive buffer.
    pub eager_buf_size: usize,
    /// Ask for NIC completion timestamps where the device has them.
    pub timestamps: bool,
    /// Use the extended CQ (`ibv_create_cq_ex`) where the provider has one.
    pub extended_cq: bool,
    /// Keep the completion channel armed from `poll` too (perftest `-e`);
    /// otherwise only [`ovbench_core::Transport::block`] arms it.
    pub use_event: bool,
    /// Local ACK timeout exponent (4.096 µs · 2^timeout), perftest's 14.
    pub timeout: u8,
    /// Transport retries before a QP errors out. 6, not perftest's 7:
    /// rxe treats 7 as "retry forever", so a dead peer would never be
    /// reported.
    pub retry_cnt: u8,
    /// Receiver-not-ready retries: 0, credits make RNR impossible.
    pub rnr_retry: u8,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        VerbsOptions {
            device: None,
            port: None,
            gid_index: None,
            cm: false,
            tx_depth: 128,
            rx_depth: 128,
            inline_size: 0,
            mtu: None,
            sl: 0,
            tclass: 0,
            eager_buf_size: DEFAULT_EAGER_PAYLOAD + EAGER_HEADER_ROOM,
            timestamps: true,
            extended_cq: true,
            use_event: false,
            timeout: 14,
            retry_cnt: 6,
            rnr_retry: 0,
        }
    }
}

/// Default payload of one eager (bounce) buffer: the largest payload one
/// two-sided message carries. `--proto raw --op send` moves one buffer per
/// message, so timing it at 64 KiB, as ib_send_lat does, needs
/// `--eager-buf 64K`. The buffers are `rx_depth` + `tx_depth` per peer,
/// all registered.
pub const DEFAULT_EAGER_PAYLOAD: usize = 16 * 1024;
/// Room for the engine's header above the payload.
pub const EAGER_HEADER_ROOM: usize = 64;
/// Largest eager payload `--eager-buf` may ask for.
pub const MAX_EAGER_PAYLOAD: usize = 1 << 20;

/// `eager_buf_size` for an eager payload of `payload` bytes (never below
/// the default); an error naming the limit when it is too large.
pub fn eager_buf_for(payload: usize) -> Result<usize, String> {
    if payload > MAX_EAGER_PAYLOAD {
        return Err(format!(
            "an eager buffer of {payload} bytes is above the {MAX_EAGER_PAYLOAD}-byte limit (every peer pre-posts rx_depth + tx_depth of them): give at most 1M"
        ));
    }
    Ok(payload.max(DEFAULT_EAGER_PAYLOAD) + EAGER_HEADER_ROOM)
}

/// The `ibv_mtu` code of an MTU in bytes.
pub fn mtu_code(bytes: u32) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// Bytes of an `ibv_mtu` code.
pub fn mtu_bytes(code: u8) -> u32 {
    128 << code.clamp(1, 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eager_buffer_sizes() {
        assert_eq!(eager_buf_for(65536), Ok(65536 + 64));
        assert_eq!(eager_buf_for(1024), Ok(16384 + 64));
        assert_eq!(eager_buf_for(1 << 20), Ok((1 << 20) + 64));
        assert!(eager_buf_for(2 << 20).unwrap_err().contains("1M"));
    }

    #[test]
    fn mtu_codes() {
        for b in [256, 512, 1024, 2048, 4096] {
            assert_eq!(mtu_bytes(mtu_code(b).unwrap()), b);
        }
        assert_eq!(mtu_code(1500), None);
    }
}
