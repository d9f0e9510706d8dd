//! A one-line progress indicator on stderr for sweeps, shown only when
//! stderr is a terminal (so logs and pipes stay clean).

use std::io::{IsTerminal, Write};

#[derive(Debug)]
pub struct ProgressLine {
    enabled: bool,
    total: usize,
    done: usize,
    label: String,
}

impl ProgressLine {
    /// A sweep of `total` steps; silent unless stderr is a terminal.
    pub fn new(label: &str, total: usize) -> ProgressLine {
        ProgressLine {
            enabled: std::io::stderr().is_terminal(),
            total,
            done: 0,
            label: label.to_string(),
        }
    }
    /// The text shown while step `what` runs.
    pub fn text(&self, what: &str) -> String {
        let width = 20;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
        format!(
            "{} [{}{}] {}/{} {}",
            self.label,
            "#".repeat(filled),
            "-".repeat(width - filled.min(width)),
            self.done,
            self.total,
            what
        )
    }
    /// Turn the line off (other ranks, or when the caller says so).
    pub fn enabled_if(&mut self, on: bool) {
        self.enabled &= on;
    }
    /// Show that step `what` is running.
    pub fn start(&mut self, what: &str) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K{}", self.text(what));
            let _ = e.flush();
        }
    }
    /// Count a finished step and erase the line (rows go to stdout).
    pub fn step(&mut self) {
        self.done += 1;
        self.clear();
    }
    pub fn clear(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_with_steps() {
        let mut p = ProgressLine::new("latency", 4);
        assert!(p
            .text("size 0")
            .contains("[--------------------] 0/4 size 0"));
        p.step();
        p.step();
        assert!(p.text("x").contains("[##########----------] 2/4"));
    }
}
