//! The checks, one file per part of the contract; `net` is the driver
//! they share.

mod arrivals;
mod completion;
mod endpoint;
mod messages;
mod net;
mod posted;
mod progress;
mod rma;
mod wait;

pub use arrivals::arrivals_contract;
pub use completion::send_end_known_once;
pub use endpoint::{identity_and_caps, regions};
pub use messages::{
    oversize_send_rejected, send_order_and_max_size, tagged_if_offered, zero_length_messages,
};
pub use posted::{send_done_contract, tsend_done_contract};
pub use progress::{block_returns_when_ready, many_outstanding, peer_dropped_reported};
pub use rma::{
    deregistered_key_rejected, garbled_key_rejected, key_through_the_wire, out_of_range_rejected,
    read_returns_target_bytes, write_visible_on_completion,
};
pub use wait::{trecv_wait_contract, trecv_wait_truncation};
