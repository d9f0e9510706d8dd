//! Forwarding a rank's output line by line, so two ranks' diagnostics are
//! never interleaved mid-line on the user's terminal.
//!
//! Rank 0 writes to the terminal directly (its report, and its progress bar
//! needs to see a terminal); the other ranks' stdout and stderr come
//! through pipes and go out here, one whole line per write, prefixed with
//! the rank.

use std::io::{BufRead, BufReader, Read, Write};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A line longer than this is cut and forwarded in pieces.
const MAX_LINE: u64 = 16 * 1024;

/// Which of the launcher's streams a rank's pipe goes to.
#[derive(Clone, Copy, Debug)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Starts a thread copying `from` to `sink` line by line, prefixed
/// `[rank N] `. The thread ends when the pipe closes (the rank exited).
pub fn forward(from: impl Read + Send + 'static, rank: u32, sink: Sink) -> Option<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("ovbench-out-{rank}"))
        .spawn(move || {
            let mut reader = BufReader::new(from);
            let prefix = format!("[rank {rank}] ");
            let mut buf = Vec::new();
            loop {
                buf.clear();
                buf.extend_from_slice(prefix.as_bytes());
                match reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if !buf.ends_with(b"\n") {
                    buf.push(b'\n');
                }
                let r = match sink {
                    Sink::Stdout => std::io::stdout().lock().write_all(&buf),
                    Sink::Stderr => std::io::stderr().lock().write_all(&buf),
                };
                if r.is_err() {
                    return;
                }
            }
        })
        .ok()
}

/// Waits for forwarders to drain what the ranks wrote, until `deadline`;
/// a forwarder still blocked then (a pipe kept open by someone else) is
/// left behind rather than waited for.
pub fn drain(handles: Vec<JoinHandle<()>>, deadline: Instant) {
    let mut pending = handles;
    while !pending.is_empty() && Instant::now() < deadline {
        let (done, rest): (Vec<_>, Vec<_>) = pending.into_iter().partition(|h| h.is_finished());
        for h in done {
            let _ = h.join();
        }
        pending = rest;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
