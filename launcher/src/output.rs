//! Forwarding the ranks' output whole lines at a time, so two ranks'
//! diagnostics are never interleaved mid-line on the user's terminal.
//!
//! Every rank's stderr, and the stdout of ranks other than 0, come through
//! pipes and go out here, one line per write (a line ends at `\n`, or at
//! `\r` so progress bars still move), labelled `[rank N] ` except for
//! rank 0. Rank 0's stdout (the report) goes to the terminal directly.

use std::io::{Read, Write};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A line longer than this is cut and forwarded in pieces.
const MAX_LINE: usize = 16 * 1024;

/// Which of the launcher's streams a rank's pipe goes to.
#[derive(Clone, Copy, Debug)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Starts a thread copying `from` to `sink` a line at a time, each line
/// prefixed with `label`. The thread ends when the pipe closes.
pub fn forward(
    mut from: impl Read + Send + 'static,
    label: String,
    sink: Sink,
) -> Option<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ovbench-output".into())
        .spawn(move || {
            let mut pending: Vec<u8> = Vec::new();
            let mut chunk = [0u8; 8192];
            // If our own stream breaks, keep draining: a rank whose stderr
            // pipe closed would die on its next diagnostic.
            let mut sink = Some(sink);
            loop {
                let n = match from.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        if !pending.is_empty() {
                            pending.push(b'\n');
                            emit(&mut sink, &label, &pending);
                        }
                        return;
                    }
                    Ok(n) => n,
                };
                pending.extend_from_slice(&chunk[..n]);
                while let Some(i) = pending.iter().position(|&c| c == b'\n' || c == b'\r') {
                    let line: Vec<u8> = pending.drain(..=i).collect();
                    emit(&mut sink, &label, &line);
                }
                if pending.len() > MAX_LINE {
                    pending.push(b'\n');
                    emit(&mut sink, &label, &pending);
                    pending.clear();
                }
            }
        })
        .ok()
}

/// Writes `label` and `line` with one write call; forgets a broken sink.
fn emit(sink: &mut Option<Sink>, label: &str, line: &[u8]) {
    let Some(to) = *sink else { return };
    let mut buf = Vec::with_capacity(label.len() + line.len());
    buf.extend_from_slice(label.as_bytes());
    buf.extend_from_slice(line);
    let r = match to {
        Sink::Stdout => std::io::stdout().lock().write_all(&buf),
        Sink::Stderr => std::io::stderr().lock().write_all(&buf),
    };
    if r.is_err() {
        *sink = None;
    }
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
