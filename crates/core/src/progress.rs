//! Progress of long work and the notices that go with it, for every layer: one interface,
//! indicatif behind it. Library code reports through [`note!`](crate::note) and [`bar`];
//! only the binary decides where that goes ([`set_quiet`]) and prints final output.
//!
//! Every bar belongs to one `MultiProgress` on stderr, and notes are printed through it, so a
//! line never tears a bar. When stderr is not a terminal (a log file, CI, a scheduler) a bar
//! becomes a plain line at most every [`LOG_INTERVAL`] instead (long work stays visible in
//! logs without flooding them); notes always go to stderr unless quieted.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often a bar writes a line when stderr is not a terminal.
pub const LOG_INTERVAL: Duration = Duration::from_secs(30);

static QUIET: AtomicBool = AtomicBool::new(false);

fn multi() -> &'static MultiProgress {
    static MULTI: OnceLock<MultiProgress> = OnceLock::new();
    MULTI.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// Silences notes (errors are still returned to the caller, which prints them).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Prints one notice line on stderr without tearing a progress bar. Use [`note!`](crate::note).
pub fn note_line(line: &str) {
    if QUIET.load(Ordering::Relaxed) {
        return;
    }
    // `println` on a MultiProgress whose target is hidden prints nothing: write directly then.
    if multi().is_hidden() {
        eprintln!("{line}");
    } else {
        multi().suspend(|| eprintln!("{line}"));
    }
}

/// A progress bar of `len` steps with an indicatif `template` (`{bar}`, `{pos}`, `{len}`,
/// `{msg}`, `{prefix}`...), on stderr, hidden unless stderr is a terminal.
pub fn bar(len: u64, template: &str) -> ProgressBar {
    use std::io::IsTerminal;
    if QUIET.load(Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let bar = ProgressBar::new(len).with_style(style);
    if std::io::stderr().is_terminal() {
        return multi().add(bar);
    }
    bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(
        Box::new(LogLines::new(LOG_INTERVAL)),
        1,
    ));
    bar
}

/// A "terminal" for indicatif that turns redraws into plain stderr lines, at most one per
/// `interval` (cursor movements and clears are ignored). indicatif has no such target of its
/// own: its non-terminal stderr target draws nothing.
#[derive(Debug)]
struct LogLines {
    interval: Duration,
    last: Mutex<Option<Instant>>,
}

impl LogLines {
    fn new(interval: Duration) -> Self {
        LogLines {
            interval,
            last: Mutex::new(None),
        }
    }

    /// Whether a line drawn now is due (and if so, the clock restarts).
    fn due(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < self.interval) {
            return false;
        }
        *last = Some(now);
        true
    }

    fn emit(&self, s: &str) -> std::io::Result<()> {
        let s = s.trim_end();
        if !s.is_empty() && self.due() {
            eprintln!("{s}");
        }
        Ok(())
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.emit(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.emit(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `note!("fetching {name}")`: a notice line on stderr through [`note_line`].
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::progress::note_line(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_throttled_to_the_interval() {
        let log = LogLines::new(Duration::from_secs(3600));
        assert!(log.due(), "the first line is written");
        assert!(!log.due(), "a second one within the interval is not");
        let log = LogLines::new(Duration::ZERO);
        assert!(log.due() && log.due());
    }
}
