//! The progress bar on stderr (indicatif): the sweep's label, a bar of
//! the steps done, the step now running and an ETA. Only rank 0's sink
//! has one; `--progress-bar` chooses when it shows and `--quiet` hides it.
//!
//! The bar redraws only when a step starts or a row arrives: no ticker
//! thread wakes up on the measuring rank's core.

use std::io::Write;
use std::sync::Mutex;

use clap::ValueEnum;
use std::time::Duration;

use indicatif::{
    HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle, TermLike,
};

/// When the progress bar shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgressBarMode {
    /// When stderr is a terminal (the launcher's, for spawned ranks).
    Auto,
    /// Always, even into a pipe (mpirun, srun or ssh, where rank 0's
    /// stderr is one but ends on a terminal).
    Always,
    /// Never.
    Never,
}

impl ProgressBarMode {
    /// Whether the bar shows, given whether stderr reaches a terminal.
    pub fn shows(self, stderr_tty: bool) -> bool {
        match self {
            ProgressBarMode::Auto => stderr_tty,
            ProgressBarMode::Always => true,
            ProgressBarMode::Never => false,
        }
    }
}

/// Rank 0's progress bar; hidden when turned off.
#[derive(Debug)]
pub struct SweepProgress {
    /// Where the bar draws, while it has not been made; `None` when off.
    target: Option<fn() -> ProgressDrawTarget>,
    /// Made at the first sweep or row, so nothing shows before.
    bar: Option<ProgressBar>,
    /// The label of sweeps the measuring code did not announce (methods:
    /// the bar then counts rows).
    command: String,
    /// Whether the measuring code announced the current sweep's steps.
    announced: bool,
    rows: u64,
}

impl SweepProgress {
    /// A progress display for `command`; drawn on stderr when `shown`.
    pub fn new(command: &str, shown: bool) -> SweepProgress {
        SweepProgress {
            target: shown.then_some(draw_target as fn() -> ProgressDrawTarget),
            bar: None,
            command: command.to_string(),
            announced: false,
            rows: 0,
        }
    }

    /// No progress display at all.
    pub fn off() -> SweepProgress {
        SweepProgress::new("", false)
    }

    /// A new bar of `len` steps (none: counting rows) drawn in `style`,
    /// replacing any earlier one; `None` when off.
    fn new_bar(&mut self, len: Option<u64>, style: ProgressStyle, prefix: String, msg: String) {
        let Some(target) = self.target else { return };
        if let Some(old) = self.bar.take() {
            old.finish_and_clear();
        }
        // Styled before it is given its target, so its first draw is its own.
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden())
            .with_style(style)
            .with_prefix(prefix)
            .with_message(msg);
        bar.set_draw_target(target());
        self.bar = Some(bar);
    }

    /// A sweep of `steps` steps begins.
    pub fn sweep(&mut self, label: &str, steps: usize) {
        self.announced = true;
        self.new_bar(
            Some(steps as u64),
            sweep_style(),
            label.to_string(),
            String::new(),
        );
    }

    /// Step `what` begins; the one before it is done.
    pub fn step(&mut self, what: &str) {
        let Some(bar) = &self.bar else { return };
        if !bar.message().is_empty() {
            bar.inc(1);
        }
        bar.set_message(what.to_string());
    }

    /// The sweep is over: its bar goes.
    pub fn sweep_end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// A row arrived: in a sweep nobody announced, it counts as a step
    /// (labelled by its size or step, when it has one).
    pub fn row(&mut self, json: &serde_json::Value) {
        if self.announced {
            return;
        }
        self.rows += 1;
        if self.rows == 1 {
            self.new_bar(None, rows_style(), self.command.clone(), describe_row(json));
        }
        let Some(bar) = &self.bar else { return };
        bar.set_message(describe_row(json));
        bar.set_position(self.rows);
    }

    /// Erase the bar around `f`, which prints to the terminal.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    /// Remove the bar for good (the run is over).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.target = None;
    }
}

impl Drop for SweepProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn sweep_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix} [{bar:24}] {pos}/{len} {msg}  {elapsed} elapsed, ETA {remaining}",
    )
    .expect("the template is valid")
    .progress_chars("=> ")
    .with_key(
        "remaining",
        |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&remaining(s.elapsed(), s.pos(), s.len()));
        },
    )
}

/// The time left at the mean pace of the steps done so far (indicatif's
/// own estimate follows the latest steps, and sizes grow by powers of two).
fn remaining(elapsed: Duration, done: u64, len: Option<u64>) -> String {
    match len {
        Some(len) if done > 0 && len >= done => {
            let left = elapsed.as_secs_f64() / done as f64 * (len - done) as f64;
            format!("{:#}", HumanDuration(Duration::from_secs_f64(left)))
        }
        _ => "?".into(),
    }
}

fn rows_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix}: {pos} rows done, last {msg}  {elapsed} elapsed")
        .expect("the template is valid")
}

/// What a row was about: its size, step or rank count.
fn describe_row(json: &serde_json::Value) -> String {
    for (key, what) in [
        ("size", "size"),
        ("msgsize", "size"),
        ("step", "step"),
        ("packets", "packets"),
        ("np", "ranks"),
    ] {
        if let Some(v) = json.get(key).and_then(serde_json::Value::as_u64) {
            return if what == "size" {
                format!("size {}", crate::sizes::format_bytes(v as usize))
            } else {
                format!("{what} {v}")
            };
        }
    }
    "row".into()
}

/// Whether this process's stderr ends on a terminal: a rank spawned by
/// the local launcher writes into a pipe, and the launcher says in
/// `OVBENCH_STDERR_TTY` where that pipe ends (launcher/src/role.rs).
pub fn stderr_reaches_terminal() -> bool {
    match std::env::var("OVBENCH_STDERR_TTY") {
        Ok(v) => v == "1",
        Err(_) => std::io::IsTerminal::is_terminal(&std::io::stderr()),
    }
}

/// The bar drawn on stderr whatever it is (indicatif's own stderr target
/// hides itself in a pipe; `always` and spawned ranks need it drawn).
fn draw_target() -> ProgressDrawTarget {
    ProgressDrawTarget::term_like_with_hz(Box::new(StderrTerm::default()), 10)
}

/// stderr as a terminal: ANSI escapes, each redraw one write that ends
/// in `\r`, so a launcher forwarding its ranks' stderr line by line
/// (a line ends at `\n` or `\r`) passes it on at once.
#[derive(Debug, Default)]
struct StderrTerm {
    pending: Mutex<Vec<u8>>,
}

impl StderrTerm {
    fn put(&self, s: &[u8]) -> std::io::Result<()> {
        self.pending
            .lock()
            .map_err(|_| std::io::Error::other("progress bar lock poisoned"))?
            .extend_from_slice(s);
        Ok(())
    }
    fn cursor(&self, n: usize, code: char) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.put(format!("\x1b[{n}{code}").as_bytes())
    }
}

impl TermLike for StderrTerm {
    fn width(&self) -> u16 {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(100)
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'A')
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'B')
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'C')
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'D')
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(s.as_bytes())?;
        self.put(b"\n")
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s.as_bytes())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.put(b"\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut buf = std::mem::take(
            &mut *self
                .pending
                .lock()
                .map_err(|_| std::io::Error::other("progress bar lock poisoned"))?,
        );
        if buf.is_empty() {
            return Ok(());
        }
        if !matches!(buf.last(), Some(b'\r' | b'\n')) {
            buf.push(b'\r');
        }
        let mut e = std::io::stderr().lock();
        e.write_all(&buf)?;
        e.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modes() {
        assert!(ProgressBarMode::Auto.shows(true));
        assert!(!ProgressBarMode::Auto.shows(false));
        assert!(ProgressBarMode::Always.shows(false));
        assert!(!ProgressBarMode::Never.shows(true));
    }

    /// A bar that counts but draws nowhere.
    fn hidden(command: &str) -> SweepProgress {
        let mut p = SweepProgress::new(command, true);
        p.target = Some(ProgressDrawTarget::hidden);
        p
    }

    #[test]
    fn remaining_time_is_the_mean_pace() {
        let s = Duration::from_secs;
        assert_eq!(remaining(s(10), 0, Some(4)), "?");
        assert_eq!(remaining(s(10), 2, Some(4)), "10s");
        assert_eq!(remaining(s(60), 1, Some(3)), "2m");
    }

    #[test]
    fn off_makes_no_bar() {
        let mut p = SweepProgress::off();
        p.sweep("latency", 3);
        p.row(&json!({"size": 8}));
        assert!(p.bar.is_none());
    }

    #[test]
    fn steps_advance_the_bar() {
        let mut p = hidden("latency");
        p.sweep("latency", 3);
        p.step("size 8");
        p.step("size 16");
        let bar = p.bar.as_ref().unwrap();
        assert_eq!((bar.position(), bar.length()), (1, Some(3)));
        assert_eq!(bar.message(), "size 16");
        p.row(&json!({"size": 16}));
        assert_eq!(
            p.bar.as_ref().unwrap().position(),
            1,
            "rows do not count in an announced sweep"
        );
    }

    #[test]
    fn rows_count_when_no_sweep_was_announced() {
        let mut p = hidden("overhead");
        p.row(&json!({"size": 1024}));
        p.row(&json!({"step": 3}));
        let bar = p.bar.as_ref().unwrap();
        assert_eq!(bar.position(), 2);
        assert_eq!(bar.message(), "step 3");
        assert_eq!(describe_row(&json!({"size": 65536})), "size 64K");
    }

    #[test]
    fn nothing_is_written_before_a_flush() {
        let t = StderrTerm::default();
        t.clear_line().unwrap();
        t.move_cursor_up(0).unwrap();
        t.write_str("x").unwrap();
        assert_eq!(*t.pending.lock().unwrap(), b"\r\x1b[2Kx");
    }
}
