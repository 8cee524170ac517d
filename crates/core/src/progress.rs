//! Progress of long work and the notices that go with it, for every layer: one interface,
//! indicatif behind it. Library code reports through [`note!`](crate::note) and [`bar`];
//! only the binary decides where that goes ([`set_quiet`]) and prints final output.
//!
//! On a terminal every bar belongs to one `MultiProgress` on stderr, and notes are printed
//! through it, so a line never tears a bar. When stderr is not a terminal (a log file, CI,
//! cron, a scheduler) a bar is a log instead, for a person reading it afterwards (`BarLog`
//! has the rule):
//! nothing at position 0, nothing in a bar's first [`LOG_INTERVAL`] unless it finishes, then
//! at most one line per interval, never the same line twice in a row, and one line when a
//! unit of work (not an inner bar inside another's work) finishes; notes always go to stderr
//! unless quieted.

use indicatif::{
    HumanBytes, MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle,
    TermLike,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often a bar writes a line when stderr is not a terminal, and how long a bar runs
/// before its first line.
pub const LOG_INTERVAL: Duration = Duration::from_secs(30);

static QUIET: AtomicBool = AtomicBool::new(false);

/// Log-mode bars not finished yet: a bar made while another runs is an inner one.
static LIVE_LOG_BARS: AtomicUsize = AtomicUsize::new(0);

fn multi() -> &'static MultiProgress {
    static MULTI: OnceLock<MultiProgress> = OnceLock::new();
    MULTI.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

fn stderr_sink() -> &'static Arc<LogSink> {
    static SINK: OnceLock<Arc<LogSink>> = OnceLock::new();
    SINK.get_or_init(|| Arc::new(LogSink::new(Box::new(|line| eprintln!("{line}")))))
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
    let line = &*crate::terminal::terminal_safe(line);
    // `println` on a MultiProgress whose target is hidden prints nothing: write directly then
    // (through the log's sink, so that a bar's line and a note never interleave).
    if multi().is_hidden() {
        stderr_sink().note(line);
    } else {
        multi().suspend(|| eprintln!("{line}"));
    }
}

/// A progress bar of `len` steps with an indicatif `template` (`{bar}`, `{pos}`, `{len}`,
/// `{msg}`, `{prefix}`...), on stderr: drawn on a terminal, a log otherwise (see the module).
pub fn bar(len: u64, template: &str) -> Bar {
    use std::io::IsTerminal;
    if QUIET.load(Ordering::Relaxed) {
        return Bar::hidden();
    }
    if std::io::stderr().is_terminal() {
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        return Bar {
            bar: multi().add(ProgressBar::new(len).with_style(style)),
            log: None,
        };
    }
    let inner = LIVE_LOG_BARS.load(Ordering::Relaxed) > 0;
    logged_bar(len, template, stderr_sink().clone(), LOG_INTERVAL, inner)
}

/// A bar whose redraws go to `sink` as log lines (see [`BarLog`]).
fn logged_bar(
    len: u64,
    template: &str,
    sink: Arc<LogSink>,
    interval: Duration,
    inner: bool,
) -> Bar {
    let line = log_template(template);
    // The bar's position and age lead every rendered line (see `LogLines`).
    let style = ProgressStyle::with_template(&format!("{{{STATE_KEY}}}{line}"))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            STATE_KEY,
            |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}{SEP}{}{SEP}", s.pos(), s.elapsed().as_millis());
            },
        );
    let log = Arc::new(BarLog::new(sink, interval, &line, inner));
    LIVE_LOG_BARS.fetch_add(1, Ordering::Relaxed);
    let bar = ProgressBar::with_draw_target(
        Some(len),
        ProgressDrawTarget::term_like_with_hz(Box::new(LogLines(log.clone())), 1),
    )
    .with_style(style);
    Bar {
        bar,
        log: Some(log),
    }
}

/// A progress bar from [`bar`]: an indicatif `ProgressBar` (every method of it works through
/// `Deref`) that, when stderr is not a terminal, also writes the line of its end: on
/// [`Bar::finish_and_clear`], or when dropped.
pub struct Bar {
    bar: ProgressBar,
    log: Option<Arc<BarLog>>,
}

impl Bar {
    /// A bar that shows nothing anywhere.
    pub fn hidden() -> Self {
        Bar {
            bar: ProgressBar::hidden(),
            log: None,
        }
    }

    /// In a log, this bar is a unit of its own under `label` (a dataset's download): its end
    /// is one line `label: done ...` even while another bar runs.
    pub fn logged_as(self, label: impl Into<String>) -> Self {
        if let Some(log) = &self.log {
            log.name_unit(label.into());
        }
        self
    }

    /// Finishes the bar and clears it from the terminal; in a log, writes its end line.
    pub fn finish_and_clear(&self) {
        self.end();
        self.bar.finish_and_clear();
    }

    /// The log's end line, from the bar's state read here, outside indicatif's drawing.
    fn end(&self) {
        if let Some(log) = &self.log {
            let b = &self.bar;
            log.finish(b.position(), b.length(), b.elapsed(), &b.message());
        }
    }

    /// While the returned [`Ticker`] lives, asks `message` every second what the work is doing
    /// and says it: as the bar's message on a terminal, as a note at most once per
    /// [`LOG_INTERVAL`] in a log (where a bar at position 0 writes nothing). For a bar that
    /// can stand still for minutes (a GPU's first step compiling and tuning kernels); `None`
    /// from `message` clears the ticker's own message if it is still the bar's, and leaves
    /// any other. Nothing runs for a hidden bar.
    pub fn ticker(&self, message: impl Fn() -> Option<String> + Send + 'static) -> Ticker {
        if self.bar.is_hidden() && self.log.is_none() {
            return Ticker::default();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let bar = self.bar.clone();
        let logged = self.log.is_some();
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("harness-ticker".into())
            .spawn(move || {
                let mut noted: Option<std::time::Instant> = None;
                let mut said: Option<String> = None;
                let mut waited = Duration::ZERO;
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK_POLL);
                    waited += TICK_POLL;
                    if waited < TICK {
                        continue;
                    }
                    waited = Duration::ZERO;
                    let Some(m) = message() else {
                        // Its own message, still shown, is cleared once there is nothing to say.
                        if said.take().is_some_and(|s| bar.message() == s) {
                            bar.set_message("");
                        }
                        continue;
                    };
                    if !logged {
                        bar.set_message(m.clone());
                        said = Some(m);
                    } else if noted.is_none_or(|t| t.elapsed() >= LOG_INTERVAL) {
                        note_line(&m);
                        noted = Some(std::time::Instant::now());
                    }
                }
            })
            // A ticker that cannot start only leaves the bar without its message.
            .ok();
        Ticker { stop, thread }
    }
}

/// How often a [`Ticker`] asks for its message, and how often it looks whether to stop.
const TICK: Duration = Duration::from_secs(1);
const TICK_POLL: Duration = Duration::from_millis(50);

/// The thread of [`Bar::ticker`]; stopped (and joined) when dropped.
#[derive(Debug, Default)]
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::ops::Deref for Bar {
    type Target = ProgressBar;
    fn deref(&self) -> &ProgressBar {
        &self.bar
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.end();
        }
    }
}

impl std::fmt::Debug for Bar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bar")
            .field("bar", &self.bar)
            .field("logged", &self.log.is_some())
            .finish()
    }
}

/// The template key whose text carries a bar's position and age to [`LogLines`].
const STATE_KEY: &str = "harness_log_state";
/// Separates those fields from each other and from the line.
const SEP: char = '\u{1f}';

/// Where log lines go (stderr; a buffer in tests). It remembers the last line written, bar or
/// note, so that no line is written twice in a row, and serialises the writers.
struct LogSink {
    last: Mutex<Option<String>>,
    out: Box<dyn Fn(&str) + Send + Sync>,
}

impl LogSink {
    fn new(out: Box<dyn Fn(&str) + Send + Sync>) -> Self {
        LogSink {
            last: Mutex::new(None),
            out,
        }
    }

    /// Writes `line` unless it is the last line written; whether it was written.
    fn line(&self, line: &str) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_deref() == Some(line) {
            return false;
        }
        (self.out)(line);
        *last = Some(line.to_string());
        true
    }

    /// Writes a note (always).
    fn note(&self, line: &str) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        (self.out)(line);
        *last = Some(line.to_string());
    }
}

/// The log of one bar, shared by the [`Bar`] (which reports its end) and its draw target
/// [`LogLines`] (which offers each redraw). The rule, for a person reading a nightly log:
/// - a redraw is written only when the bar is past position 0, has run for at least the
///   interval, and wrote no line in the last interval (so a bar that finishes within 30 s
///   writes no progress line at all, and a long one one line per interval);
/// - its end is one line, `label: done 204 epochs in 3.1 s` (or `stopped at 57/204 epochs
///   after 40.0 s` when it ends short), from a bar of its own — none from an inner bar (made
///   while another runs: a classifier of a validation search inside a benchmark) unless that
///   one wrote progress lines, whose story the end line closes; never at position 0;
/// - a line identical to the last one written ([`LogSink`]) is not written again.
struct BarLog {
    sink: Arc<LogSink>,
    interval: Duration,
    /// The template's leading words (`classifier`), empty when it starts with the message.
    label: String,
    unit: Unit,
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    inner: bool,
    /// Set by [`Bar::logged_as`].
    named: Option<String>,
    /// The bar's age at its last line.
    last_at: Option<Duration>,
    ended: bool,
}

/// What a bar counts, for its end line.
#[derive(Debug, Clone, PartialEq)]
enum Unit {
    Bytes,
    /// `epoch` (made plural) or `sentences` (as written in the template).
    Word {
        word: String,
        plural: bool,
    },
    Plain,
}

impl BarLog {
    fn new(sink: Arc<LogSink>, interval: Duration, template: &str, inner: bool) -> Self {
        let (label, unit) = describe(template);
        BarLog {
            sink,
            interval,
            label,
            unit,
            state: Mutex::new(LogState {
                inner,
                ..LogState::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn name_unit(&self, label: String) {
        let mut st = self.lock();
        st.named = Some(label);
        st.inner = false;
    }

    /// A redraw of the bar, at `pos` when it had run `age`, rendered as `text`.
    fn offer(&self, pos: u64, age: Duration, text: &str) {
        let mut st = self.lock();
        let due = st.last_at.map_or(self.interval, |t| t + self.interval);
        if st.ended || pos == 0 || age < due || text.is_empty() {
            return;
        }
        if self.sink.line(text) {
            st.last_at = Some(age);
        }
    }

    /// The bar ends at `pos` of `len` after `age`, its message `msg` (once; later calls
    /// write nothing).
    fn finish(&self, pos: u64, len: Option<u64>, age: Duration, msg: &str) {
        let mut st = self.lock();
        if std::mem::replace(&mut st.ended, true) {
            return;
        }
        LIVE_LOG_BARS.fetch_sub(1, Ordering::Relaxed);
        if pos == 0 || (st.inner && st.last_at.is_none()) {
            return;
        }
        let label = match (&st.named, self.label.is_empty(), msg.is_empty()) {
            (Some(n), _, _) => n.as_str(),
            (None, false, _) => self.label.as_str(),
            (None, true, false) => msg,
            (None, true, true) => "progress",
        };
        let line = match len {
            Some(len) if pos < len => format!(
                "{label}: stopped at {} after {}",
                self.amount(pos, Some(len)),
                human_duration(age)
            ),
            _ => format!(
                "{label}: done {} in {}",
                self.total(pos, len),
                human_duration(age)
            ),
        };
        self.sink.line(&line);
    }

    /// `204 epochs` or `57/204 epochs`, `1.20 MiB` or `3.00 MiB/10.00 MiB`, `7` or `3/7`.
    fn amount(&self, pos: u64, of: Option<u64>) -> String {
        match &self.unit {
            Unit::Bytes => match of {
                Some(len) => format!("{}/{}", HumanBytes(pos), HumanBytes(len)),
                None => HumanBytes(pos).to_string(),
            },
            Unit::Word { word, plural } => {
                let n = of.map_or(pos.to_string(), |len| format!("{pos}/{len}"));
                let s = if *plural && of.unwrap_or(pos) != 1 {
                    "s"
                } else {
                    ""
                };
                format!("{n} {word}{s}")
            }
            Unit::Plain => of.map_or(pos.to_string(), |len| format!("{pos}/{len}")),
        }
    }

    /// The amount of an end line: `204 epochs`, `1.20 MiB`, `7/7`.
    fn total(&self, pos: u64, len: Option<u64>) -> String {
        match self.unit {
            Unit::Plain => self.amount(pos, len),
            _ => self.amount(pos, None),
        }
    }
}

/// `0.4 s`, `3 min 05 s`, `2 h 07 min`.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, s % 3600 / 60)
    }
}

/// A bar's template as a log line: no bar, spinner or padding (`classifier [{bar:30}] epoch
/// {pos}/{len} {msg}` → `classifier epoch {pos}/{len} {msg}`).
fn log_template(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let spec = &rest[open + 1..close];
        let key = spec.split(':').next().unwrap_or_default();
        let mut before = &rest[..open];
        let mut after = close + 1;
        match key {
            "bar" | "wide_bar" | "spinner" => {
                // `[{bar}]` goes with its brackets.
                if before.ends_with('[') && rest[after..].starts_with(']') {
                    before = &before[..before.len() - 1];
                    after += 1;
                }
                out.push_str(before);
            }
            "msg" | "wide_msg" | "prefix" => {
                out.push_str(before);
                out.push_str(&format!("{{{}}}", key.trim_start_matches("wide_")));
            }
            _ => {
                out.push_str(before);
                out.push_str(&rest[open..=close]);
            }
        }
        rest = &rest[after..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The label (the literal words before the first placeholder, less a unit word that ends
/// them) and the unit of a log template.
fn describe(template: &str) -> (String, Unit) {
    let label = template
        .split('{')
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches(':')
        .to_string();
    if [
        "{bytes}",
        "{total_bytes}",
        "{binary_bytes}",
        "{decimal_bytes}",
    ]
    .iter()
    .any(|k| template.contains(k))
    {
        return (label, Unit::Bytes);
    }
    let is_word = |w: &&str| !w.is_empty() && w.chars().all(char::is_alphabetic);
    // `{pos}/{len} sentences`: the word after, as written.
    if let Some(w) = template
        .split_once("{len}")
        .and_then(|(_, after)| after.split_whitespace().next())
        .filter(is_word)
    {
        return (
            label,
            Unit::Word {
                word: w.to_string(),
                plural: false,
            },
        );
    }
    // `epoch {pos}/{len}`: the word before, made plural (unless it is the label).
    if let Some(w) = template
        .split_once("{pos}")
        .and_then(|(before, _)| before.split_whitespace().last())
        .filter(is_word)
        .filter(|w| *w != label)
    {
        // `classifier epoch {pos}`: the label is `classifier`.
        let label = label
            .strip_suffix(w)
            .unwrap_or(&label)
            .trim_end()
            .to_string();
        return (
            label,
            Unit::Word {
                word: w.to_string(),
                plural: true,
            },
        );
    }
    (label, Unit::Plain)
}

/// A "terminal" for indicatif that hands each redraw of one bar to its [`BarLog`] (cursor
/// movements and clears are ignored). Hand-written because indicatif has no such target: its
/// non-terminal stderr target draws nothing, and a plain writer target would write every
/// redraw. A redraw happens inside indicatif's lock on the bar, where calling the bar's own
/// methods deadlocks: its position and age come in the line's text instead (the
/// [`STATE_KEY`] placeholder leading the template), and the end line is written by [`Bar`].
struct LogLines(Arc<BarLog>);

impl LogLines {
    fn emit(&self, s: &str) -> std::io::Result<()> {
        let mut fields = s.splitn(3, SEP);
        let (Some(pos), Some(ms), Some(text)) = (fields.next(), fields.next(), fields.next())
        else {
            return Ok(()); // a cursor return or the padding after a line
        };
        if let (Ok(pos), Ok(ms)) = (pos.parse(), ms.parse()) {
            self.0.offer(pos, Duration::from_millis(ms), text.trim());
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

impl std::fmt::Debug for LogLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogLines")
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

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    type Lines = Arc<Mutex<Vec<String>>>;

    /// A sink that keeps its lines.
    fn sink() -> (Arc<LogSink>, Lines) {
        let lines = Lines::default();
        let kept = lines.clone();
        let sink = LogSink::new(Box::new(move |l| kept.lock().unwrap().push(l.to_string())));
        (Arc::new(sink), lines)
    }

    fn bar_log(template: &str, inner: bool) -> (BarLog, Lines) {
        let (sink, lines) = sink();
        let log = BarLog::new(sink, LOG_INTERVAL, &log_template(template), inner);
        (log, lines)
    }

    fn taken(lines: &Lines) -> Vec<String> {
        std::mem::take(&mut *lines.lock().unwrap())
    }

    const CLASSIFIER: &str = "classifier [{bar:30}] epoch {pos}/{len} {msg} ETA {eta}";

    #[test]
    fn a_ticker_says_what_the_work_is_doing_until_dropped() {
        let (sink, _lines) = sink();
        let log = Arc::new(BarLog::new(sink, LOG_INTERVAL, "x", false));
        // Drawn as on a terminal (not hidden, no log of its own): the message is the bar's.
        let target = ProgressDrawTarget::term_like(Box::new(LogLines(log)));
        let bar = Bar {
            bar: ProgressBar::with_draw_target(Some(10), target),
            log: None,
        };
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let ticker = bar.ticker(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            Some("tuning kernels".to_string())
        });
        for _ in 0..200 {
            if calls.load(Ordering::Relaxed) > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        drop(ticker);
        assert!(calls.load(Ordering::Relaxed) > 0, "never asked");
        assert_eq!(bar.message(), "tuning kernels");
        let asked = calls.load(Ordering::Relaxed);
        std::thread::sleep(TICK + TICK_POLL * 4);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            asked,
            "asked after it was dropped"
        );
        // A hidden bar starts nothing.
        drop(Bar::hidden().ticker(|| panic!("a hidden bar's ticker ran")));
    }

    #[test]
    fn no_line_at_zero_nor_in_the_first_interval_then_one_per_interval() {
        let (log, lines) = bar_log(CLASSIFIER, false);
        // The fake clock is the bar's age, passed with each redraw (as indicatif's is).
        log.offer(0, secs(0), "classifier epoch 0/200");
        log.offer(0, secs(45), "classifier epoch 0/200"); // long, but still at 0
        for s in 1..30 {
            log.offer(s, secs(s), &format!("classifier epoch {s}/200"));
        }
        assert_eq!(taken(&lines), Vec::<String>::new());
        // One line per 30 s from there, whatever the redraw rate.
        for s in 30..=100 {
            log.offer(s, secs(s), &format!("classifier epoch {s}/200"));
            log.offer(s, secs(s) + Duration::from_millis(500), "classifier busy");
        }
        assert_eq!(
            taken(&lines),
            [
                "classifier epoch 30/200",
                "classifier epoch 60/200",
                "classifier epoch 90/200"
            ]
        );
        log.finish(200, Some(200), Duration::from_millis(123_400), "dev 71.2");
        log.finish(200, Some(200), secs(130), "dev 71.2"); // a second end writes nothing
        log.offer(200, secs(200), "classifier epoch 200/200"); // nor a redraw after it
        assert_eq!(taken(&lines), ["classifier: done 200 epochs in 2 min 03 s"]);
    }

    #[test]
    fn a_quick_bar_writes_its_end_only_and_an_inner_one_nothing() {
        for inner in [false, true] {
            let (log, lines) = bar_log(CLASSIFIER, inner);
            for s in 1..=204 {
                log.offer(s, Duration::from_millis(15 * s), &format!("epoch {s}/204"));
            }
            log.finish(204, Some(204), Duration::from_millis(3_100), "");
            let want: &[&str] = if inner {
                &[]
            } else {
                &["classifier: done 204 epochs in 3.1 s"]
            };
            assert_eq!(taken(&lines), want);
        }
        // An inner bar that ran long enough to write progress closes it with its end.
        let (log, lines) = bar_log(CLASSIFIER, true);
        log.offer(10, secs(40), "classifier epoch 10/20");
        log.finish(20, Some(20), secs(70), "");
        assert_eq!(
            taken(&lines),
            [
                "classifier epoch 10/20",
                "classifier: done 20 epochs in 1 min 10 s"
            ]
        );
    }

    #[test]
    fn the_same_line_is_never_written_twice_in_a_row() {
        let (sink, lines) = sink();
        let template = "evaluate {pos}/{len} {msg}";
        let a = BarLog::new(sink.clone(), LOG_INTERVAL, template, false);
        let b = BarLog::new(sink.clone(), LOG_INTERVAL, template, false);
        a.offer(3, secs(31), "evaluate 3/7 mr");
        b.offer(3, secs(31), "evaluate 3/7 mr");
        a.offer(3, secs(70), "evaluate 3/7 mr");
        assert_eq!(taken(&lines), ["evaluate 3/7 mr"]);
        // A repeat refused does not restart the interval: the next change is written.
        a.offer(4, secs(71), "evaluate 4/7 cr");
        sink.note("a note");
        a.offer(5, secs(72), "evaluate 5/7 subj"); // within the interval of the last one
        sink.note("a note"); // notes are always written
        assert_eq!(taken(&lines), ["evaluate 4/7 cr", "a note", "a note"]);
    }

    #[test]
    fn end_lines_name_the_unit_and_never_say_zero() {
        let fetch = "{msg:>20} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}";
        let (log, lines) = bar_log(fetch, false);
        log.finish(0, Some(1000), secs(1), "mr");
        assert_eq!(
            taken(&lines),
            Vec::<String>::new(),
            "a bar that never moved says nothing"
        );

        // A download is a unit even inside a benchmark's bar.
        let (log, lines) = bar_log(fetch, true);
        log.name_unit("mr".into());
        log.finish(1_258_291, Some(1_258_291), Duration::from_millis(400), "mr");
        assert_eq!(taken(&lines), ["mr: done 1.20 MiB in 0.4 s"]);

        let (log, lines) = bar_log(fetch, false);
        log.finish(3 << 20, Some(10 << 20), secs(2), "mr");
        assert_eq!(
            taken(&lines),
            ["mr: stopped at 3.00 MiB/10.00 MiB after 2.0 s"]
        );

        let (log, lines) = bar_log("train [{bar:30}] step {pos}/{len} {msg} ETA {eta}", false);
        log.finish(57, Some(1000), secs(4000), "loss 2.1");
        assert_eq!(
            taken(&lines),
            ["train: stopped at 57/1000 steps after 1 h 06 min"]
        );

        let (log, lines) = bar_log("evaluate [{bar:30}] {pos}/{len} {msg} ({elapsed})", false);
        log.finish(7, Some(7), secs(95), "mrpc");
        assert_eq!(taken(&lines), ["evaluate: done 7/7 in 1 min 35 s"]);

        let embed = "{spinner} embedding {pos}/{len} sentences [{bar:40}] {per_sec}, ETA {eta}";
        let (log, lines) = bar_log(embed, false);
        log.finish(2048, Some(2048), secs(1), "");
        assert_eq!(taken(&lines), ["embedding: done 2048 sentences in 1.0 s"]);
    }

    #[test]
    fn log_templates_drop_bars_spinners_and_padding() {
        assert_eq!(
            log_template(CLASSIFIER),
            "classifier epoch {pos}/{len} {msg} ETA {eta}"
        );
        assert_eq!(
            log_template("{msg:>20} [{bar:30}] {bytes}/{total_bytes} eta {eta}"),
            "{msg} {bytes}/{total_bytes} eta {eta}"
        );
        assert_eq!(
            log_template("{spinner} embedding {pos}/{len} [{wide_bar}] {wide_msg}"),
            "embedding {pos}/{len} {msg}"
        );
    }

    /// Through indicatif: a bar drawn into a log writes neither its 0 % state nor progress in
    /// its first interval, and its end once (an inner bar: not at all).
    #[test]
    fn a_real_bar_in_a_log_writes_only_its_end() {
        for inner in [false, true] {
            let (sink, lines) = sink();
            let bar = logged_bar(204, CLASSIFIER, sink, LOG_INTERVAL, inner);
            bar.tick();
            for _ in 0..204 {
                bar.inc(1);
                bar.set_message("dev 71.20");
            }
            bar.finish_and_clear();
            drop(bar);
            let lines = taken(&lines);
            if inner {
                assert!(lines.is_empty(), "{lines:?}");
            } else {
                assert_eq!(lines.len(), 1, "{lines:?}");
                assert!(
                    lines[0].starts_with("classifier: done 204 epochs in 0."),
                    "{lines:?}"
                );
            }
        }
        // Dropped without finishing: where it stopped.
        let (sink, lines) = sink();
        let bar = logged_bar(10, CLASSIFIER, sink, LOG_INTERVAL, false);
        bar.inc(3);
        drop(bar);
        let lines = taken(&lines);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("classifier: stopped at 3/10 epochs after 0."),
            "{lines:?}"
        );
    }

    /// With no interval, a redraw past 0 goes through the draw target with the position and
    /// message in its text (and the 0 % one does not).
    #[test]
    fn redraws_carry_position_and_message_into_the_line() {
        let (sink, lines) = sink();
        let bar = logged_bar(5, CLASSIFIER, sink, Duration::ZERO, false);
        bar.set_message("dev 50.00");
        std::thread::sleep(Duration::from_millis(1100)); // the draw target's 1 Hz
        bar.inc(2);
        let lines = taken(&lines);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("classifier epoch 2/5 dev 50.00 ETA"),
            "{lines:?}"
        );
    }
}
