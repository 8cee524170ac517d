//! Progress of long work and the notices that go with it, for every layer: one interface,
//! indicatif behind it. Library code reports through [`note!`](crate::note) and [`bar`];
//! only the binary decides where that goes ([`set_quiet`]) and prints final output.
//!
//! Every bar belongs to one `MultiProgress` on stderr, and notes are printed through it, so a
//! line never tears a bar. Bars are hidden when stderr is not a terminal (logs stay clean);
//! notes always go to stderr unless quieted.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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
    if QUIET.load(Ordering::Relaxed) || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    multi().add(ProgressBar::new(len).with_style(style))
}

/// `note!("fetching {name}")`: a notice line on stderr through [`note_line`].
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::progress::note_line(&format!($($arg)*))
    };
}
