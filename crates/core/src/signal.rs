//! Ctrl-C (SIGINT) and SIGTERM (what `kill`, a scheduler's cancel or time limit and systemd
//! send first) as a flag that long loops check between units of work, so that they stop
//! cleanly (a checkpoint saved, a ledger written) instead of dying mid-write. The trainer
//! keeps the handler for the whole process; a sweep holds it while it runs and forwards the
//! request to its children itself.
//!
//! One flag per process: signal handlers are per process too. By hand with libc's
//! `signal`, as std offers no signal handling and one flag does not warrant a crate.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived while [`Interrupts`] caught them (since the last
/// [`reset`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Forgets a signal that arrived before: [`interrupted`] is false until the next one.
pub fn reset() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

#[cfg(unix)]
const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM caught: while this lives they set the flag ([`interrupted`]) instead
/// of ending the process; dropping it puts back the handlers that were there before.
#[must_use = "the handlers are restored when this is dropped; `.keep()` keeps them"]
pub struct Interrupts {
    #[cfg(unix)]
    previous: [libc::sighandler_t; 2],
}

impl Interrupts {
    /// Installs the handler on SIGINT and SIGTERM (the flag keeps what it held: see
    /// [`reset`]).
    pub fn catch() -> Interrupts {
        #[cfg(unix)]
        {
            let previous = SIGNALS.map(|signal| {
                // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
                // signal(2) reads and writes no memory of ours.
                unsafe {
                    libc::signal(
                        signal,
                        on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
                    )
                }
            });
            Interrupts { previous }
        }
        #[cfg(not(unix))]
        Interrupts {}
    }

    /// Keeps the handler for the rest of the process: nothing is restored.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        #[cfg(unix)]
        for (signal, previous) in SIGNALS.into_iter().zip(self.previous) {
            // SAFETY: `previous` is what signal(2) returned for this signal in `catch`: the
            // handler, SIG_DFL or SIG_IGN in force before (or SIG_ERR, which it refuses with
            // EINVAL and changes nothing); signal(2) reads and writes no memory of ours.
            unsafe {
                libc::signal(signal, previous);
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A SIGTERM sent to this process while caught sets the flag instead of ending it, and
    /// the handler found before is back afterwards.
    #[test]
    fn a_caught_signal_sets_the_flag_and_the_old_handler_returns() {
        // SAFETY: reads the current disposition of SIGTERM (set, then put back at once).
        let before = unsafe {
            let h = libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, h);
            h
        };
        let caught = Interrupts::catch();
        reset();
        assert!(!interrupted());
        // SAFETY: raise(3) delivers SIGTERM to this thread; the handler just installed only
        // stores to the flag.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert!(interrupted());
        drop(caught);
        reset();
        // SAFETY: as above.
        let after = unsafe {
            let h = libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, h);
            h
        };
        assert_eq!(after, before);
    }
}
