//! What the by-hand examples share: reading the progress mode from the
//! command line and connecting two TCP transports in one process.

use ovbench_conformance::connect_all;
use ovbench_core::{Progress, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

/// The next argument as `poll` or `thread` (default: the transport's own).
pub fn progress_arg(args: &mut impl Iterator<Item = String>) -> Progress {
    args.next()
        .map(|s| s.parse().expect("poll or thread"))
        .unwrap_or_default()
}

/// Ranks 0 and 1, connected to each other, progressing as `progress` says.
pub fn connected_pair(progress: Progress) -> (Box<dyn Transport>, Box<dyn Transport>) {
    let opts = TcpOptions {
        progress,
        ..TcpOptions::default()
    };
    let mut ts: Vec<Box<dyn Transport>> = (0..2)
        .map(|r| {
            Box::new(TcpTransport::new(r, 2, opts.clone()).expect("listen")) as Box<dyn Transport>
        })
        .collect();
    connect_all(&mut ts).expect("connect");
    let t1 = ts.pop().expect("two");
    let t0 = ts.pop().expect("two");
    (t0, t1)
}
