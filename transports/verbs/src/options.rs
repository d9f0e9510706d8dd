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
            eager_buf_size: eager_buf_from_env(std::env::var(EAGER_BUF_ENV).ok().as_deref())
                .unwrap_or(DEFAULT_EAGER_PAYLOAD + EAGER_HEADER_ROOM),
            timestamps: true,
            extended_cq: true,
            use_event: false,
            timeout: 14,
            retry_cnt: 6,
            rnr_retry: 0,
        }
    }
}

/// Environment variable that raises the eager (bounce) buffer: the largest
/// payload one two-sided message carries, in bytes (`64K`, `65536`).
/// `--proto raw --op send` moves one buffer per message, so timing it at
/// 64 KiB, as ib_send_lat does, needs `OVBENCH_VERBS_EAGER_BUF=64K`. The
/// buffers are `rx_depth` + `tx_depth` per peer, all registered.
pub const EAGER_BUF_ENV: &str = "OVBENCH_VERBS_EAGER_BUF";
/// Default payload of one eager buffer.
pub const DEFAULT_EAGER_PAYLOAD: usize = 16 * 1024;
/// Room for the engine's header above the payload.
pub const EAGER_HEADER_ROOM: usize = 64;
/// Largest payload the variable may ask for.
const MAX_EAGER_PAYLOAD: usize = 1 << 20;

/// `eager_buf_size` for a value of [`EAGER_BUF_ENV`]: `None` when unset,
/// empty or unreadable (a warning on stderr), never below the default.
pub fn eager_buf_from_env(v: Option<&str>) -> Option<usize> {
    let v = v?.trim();
    if v.is_empty() {
        return None;
    }
    let (num, mult) = match v.as_bytes()[v.len() - 1] {
        b'k' | b'K' => (&v[..v.len() - 1], 1024),
        b'm' | b'M' => (&v[..v.len() - 1], 1 << 20),
        _ => (v, 1),
    };
    match num.parse::<usize>().ok().map(|n| n * mult) {
        Some(n) if n <= MAX_EAGER_PAYLOAD => Some(n.max(DEFAULT_EAGER_PAYLOAD) + EAGER_HEADER_ROOM),
        _ => {
            eprintln!(
                "warning: {EAGER_BUF_ENV}={v} ignored: give the eager payload in bytes (e.g. 64K), at most 1M"
            );
            None
        }
    }
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
    fn eager_buffer_from_the_environment() {
        assert_eq!(eager_buf_from_env(None), None);
        assert_eq!(eager_buf_from_env(Some("")), None);
        assert_eq!(eager_buf_from_env(Some("64K")), Some(65536 + 64));
        assert_eq!(eager_buf_from_env(Some("65536")), Some(65536 + 64));
        assert_eq!(eager_buf_from_env(Some("1k")), Some(16384 + 64));
        assert_eq!(eager_buf_from_env(Some("2M")), None);
        assert_eq!(eager_buf_from_env(Some("lots")), None);
    }

    #[test]
    fn mtu_codes() {
        for b in [256, 512, 1024, 2048, 4096] {
            assert_eq!(mtu_bytes(mtu_code(b).unwrap()), b);
        }
        assert_eq!(mtu_code(1500), None);
    }
}
